// What the target-neutral inductor may know about the machine it compiles for: a Target, filled in by the
// backend (src/backends/cpu/backend.cpp for the host CPU). Passes read budgets and capabilities from it and
// never ask the host themselves, so the same scheduler serves any backend, and everything that can change the
// generated code is in one value the compile cache key is derived from (context.h).
#pragma once
#include <cstdint>
#include <string>

namespace kiln::inductor {

struct Target {
  std::string backend = "none";  // the backend's name ("cpu")
  // The code generator's own description of what it compiles for (triple, CPU, optimisation level, vector
  // width): part of every cache key.
  std::string description;
  int vector_bytes = 32;  // the vector width the code generator prefers

  // Kernel-local scratch rows (localise): per-thread memory the backend gives a kernel (the CPU: its stack).
  int64_t max_local_row_bytes = 128 << 10;
  int64_t max_local_bytes_per_kernel = 512 << 10;

  // Streaming (non-temporal) stores: the backend's placement passes mark pointwise outputs at least this large
  // (0: the backend has no streaming stores). `streaming_threshold_source` says where the figure came from.
  int64_t streaming_threshold_bytes = 0;
  std::string streaming_threshold_source;
  // The alignment a streamed row must start at for the backend to prove its vector stores aligned.
  int64_t streaming_alignment = 64;

  // Every field, one per line: the target's part of the cache key and of the KILN_DEBUG_DIR dump.
  std::string str() const;
};

}  // namespace kiln::inductor
