// ValueStore: values under the budget in a shared memory file mapped MAP_SHARED, the rest appended to an
// unlinked spill file (pwrite/pread, so concurrent forked readers never share a file offset).
#include "minifier/values.h"

#include <fcntl.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "ops/api.h"

namespace kiln::minify {

namespace {

template <class... A>
void store_check(bool ok, fmt::format_string<A...> f, A&&... a) {
  if (!ok) throw ValueStoreError(fmt::format(f, std::forward<A>(a)...));
}

}  // namespace

ValueStore::ValueStore(int64_t budget_bytes, std::string spill_dir) : budget_(budget_bytes), spill_dir_(std::move(spill_dir)) {
  if (spill_dir_.empty()) spill_dir_ = std::filesystem::temp_directory_path().string();
}

ValueStore::~ValueStore() {
  if (memory_) ::munmap(memory_, size_t(budget_));
  if (memory_fd_ >= 0) ::close(memory_fd_);
  if (spill_fd_ >= 0) ::close(spill_fd_);
}

void ValueStore::put(graph::ValueId id, const Tensor& value) {
  if (size_t(id) >= entries_.size()) entries_.resize(size_t(id) + 1);
  Entry& e = entries_[size_t(id)];
  Tensor c = contiguous(value);
  e.meta = c.meta();
  const int64_t bytes = c.numel() * int64_t(dtype_size(c.dtype()));
  const char* p = static_cast<const char*>(c.data_ptr());
  if (bytes == 0) {  // nothing to store, in either file
    e.in_memory = true;
    e.offset = 0;
    return;
  }
  const int64_t at = (memory_end_ + kAlign - 1) / kAlign * kAlign;
  if (at + bytes <= budget_) {
    if (!memory_) {
      // Address space for the whole budget at once (pages exist only once written); the file grows below.
      memory_fd_ = ::memfd_create("kiln-minify-values", MFD_CLOEXEC);
      store_check(memory_fd_ >= 0, "cannot create a shared memory file for recorded values: {}", strerror(errno));
      void* m = ::mmap(nullptr, size_t(budget_), PROT_READ | PROT_WRITE, MAP_SHARED, memory_fd_, 0);
      store_check(m != MAP_FAILED, "cannot map {} bytes for recorded values: {} (lower --budget)", budget_,
                 strerror(errno));
      memory_ = static_cast<char*>(m);
    }
    // Pages of the mapping beyond the file's end fault with SIGBUS: grow the file first.
    store_check(::ftruncate(memory_fd_, off_t(at + bytes)) == 0, "cannot grow the shared memory file of recorded "
               "values to {} bytes: {}", at + bytes, strerror(errno));
    std::memcpy(memory_ + at, p, size_t(bytes));
    e.in_memory = true;
    e.offset = at;
    memory_end_ = at + bytes;
    memory_bytes_ += bytes;
    return;
  }
  if (spill_fd_ < 0) {
    std::string tmpl = (std::filesystem::path(spill_dir_) / "kiln-minify-values-XXXXXX").string();
    spill_fd_ = ::mkstemp(tmpl.data());
    store_check(spill_fd_ >= 0, "cannot create a spill file for recorded values in {}: {} (set --spill-dir to a "
               "writable directory with room for the graph's intermediates)", spill_dir_, strerror(errno));
    ::unlink(tmpl.c_str());
  }
  e.in_memory = false;
  e.offset = spilled_bytes_;
  int64_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pwrite(spill_fd_, p + done, size_t(bytes - done), off_t(e.offset + done));
    store_check(n > 0, "writing recorded values to the spill file in {} failed: {} (is the disk full?)", spill_dir_,
               strerror(errno));
    done += n;
  }
  spilled_bytes_ += bytes;
}

bool ValueStore::has(graph::ValueId id) const {
  return size_t(id) < entries_.size() && entries_[size_t(id)].offset >= 0;
}

Tensor ValueStore::get(graph::ValueId id) const {
  KILN_CHECK(has(id), "minifier: no recorded value for value {}", id);
  const Entry& e = entries_[size_t(id)];
  Tensor t = Tensor::empty(e.meta.sizes, e.meta.dtype);
  int64_t bytes = t.numel() * int64_t(dtype_size(t.dtype()));
  char* p = static_cast<char*>(t.data_ptr());
  if (e.in_memory) {
    if (bytes > 0) std::memcpy(p, memory_ + e.offset, size_t(bytes));
    return t;
  }
  int64_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(spill_fd_, p + done, size_t(bytes - done), off_t(e.offset + done));
    store_check(n > 0, "reading a recorded value back from the spill file failed: {}", strerror(errno));
    done += n;
  }
  return t;
}

void record_reference(const graph::Graph& g, const std::vector<Tensor>& inputs, const GeneratorState& seed_state,
                      ValueStore& store) {
  graph::InterpretOptions o;
  o.fp64 = true;
  o.on_value = [&](graph::ValueId id, const Tensor& t) { store.put(id, t); };
  std::vector<Tensor> copies = graph::copy_inputs(inputs);
  default_generator() = seed_state;
  // On one thread, like a forked child's reference run (repro/isolate.h): whatever an eager kernel splits by
  // thread count, a recorded value is then bit for bit what a candidate's own reference run computes (the
  // oracle relies on it, oracle.h). It also keeps the recording from stalling while another process holds
  // the other cores: an OpenMP team waits at every op's barrier for a preempted member (docs/benchmarks.md).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  struct RestoreThreads { int n; ~RestoreThreads() { omp_set_num_threads(n); } } restore{threads};
  try {
    graph::run_graph(g, copies, o);
  } catch (const ValueStoreError&) {
    throw;  // recording failed, not the graph
  } catch (const Error& e) {
    fail("the fp64 reference run of this graph fails, so it cannot show a backend bug: {}", e.what());
  }
  default_generator() = seed_state;
}

}  // namespace kiln::minify
