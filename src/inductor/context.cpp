// CompileContext and Target: the decision log and the text the compile cache key is derived from (context.h).
#include "inductor/context.h"

#include <fmt/format.h>

namespace kiln::inductor {

std::string Target::str() const {
  return fmt::format(
      "backend {}\ndescription {}\nvector_bytes {}\nmax_local_row_bytes {}\nmax_local_bytes_per_kernel {}\n"
      "streaming_threshold_bytes {}\nstreaming_alignment {}\n",
      backend, description, vector_bytes, max_local_row_bytes, max_local_bytes_per_kernel, streaming_threshold_bytes,
      streaming_alignment);
}

void DecisionLog::record(LogChannel channel, std::string decision) {
  KILN_LOG(channel, "{}", decision);
  decisions_.push_back(std::move(decision));
}

std::string CompileContext::key_material() const {
  return fmt::format("{}repro_stage {}\nbackend_name {}\nfuse {}\nmode {}\ninject {}\n", target.str(),
                     options.repro_stage, options.backend, options.fuse, options.mode, inject.str());
}

}  // namespace kiln::inductor
