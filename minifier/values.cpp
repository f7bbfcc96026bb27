// ValueStore: in-memory values under a budget, the rest appended to an unlinked spill file (pwrite/pread, so
// concurrent forked readers never share a file offset).
#include "minifier/values.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "graph/interpreter.h"
#include "ops/api.h"

namespace kiln::minify {

ValueStore::ValueStore(int64_t budget_bytes, std::string spill_dir) : budget_(budget_bytes), spill_dir_(std::move(spill_dir)) {
  if (spill_dir_.empty()) spill_dir_ = std::filesystem::temp_directory_path().string();
}

ValueStore::~ValueStore() {
  if (fd_ >= 0) ::close(fd_);
}

void ValueStore::put(graph::ValueId id, const Tensor& value) {
  if (size_t(id) >= entries_.size()) entries_.resize(size_t(id) + 1);
  Entry& e = entries_[size_t(id)];
  int64_t bytes = value.numel() * int64_t(dtype_size(value.dtype()));
  if (memory_bytes_ + bytes <= budget_ || bytes == 0) {
    e.in_memory = clone(value).detach();
    memory_bytes_ += bytes;
    return;
  }
  if (fd_ < 0) {
    std::string tmpl = (std::filesystem::path(spill_dir_) / "kiln-minify-values-XXXXXX").string();
    fd_ = ::mkstemp(tmpl.data());
    KILN_CHECK(fd_ >= 0, "cannot create a spill file for recorded values in {}: {} (set --spill-dir to a writable "
               "directory with room for the graph's intermediates)", spill_dir_, strerror(errno));
    ::unlink(tmpl.c_str());
  }
  Tensor c = contiguous(value);
  e.meta = c.meta();
  e.offset = spilled_bytes_;
  const char* p = static_cast<const char*>(c.data_ptr());
  int64_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pwrite(fd_, p + done, size_t(bytes - done), off_t(e.offset + done));
    KILN_CHECK(n > 0, "writing recorded values to the spill file in {} failed: {} (is the disk full?)", spill_dir_,
               strerror(errno));
    done += n;
  }
  spilled_bytes_ += bytes;
}

bool ValueStore::has(graph::ValueId id) const {
  return size_t(id) < entries_.size() && (entries_[size_t(id)].in_memory.defined() || entries_[size_t(id)].offset >= 0);
}

Tensor ValueStore::get(graph::ValueId id) const {
  KILN_CHECK(has(id), "minifier: no recorded value for value {}", id);
  const Entry& e = entries_[size_t(id)];
  if (e.in_memory.defined()) return e.in_memory;
  Tensor t = Tensor::empty(e.meta.sizes, e.meta.dtype);
  int64_t bytes = t.numel() * int64_t(dtype_size(t.dtype()));
  char* p = static_cast<char*>(t.data_ptr());
  int64_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(fd_, p + done, size_t(bytes - done), off_t(e.offset + done));
    KILN_CHECK(n > 0, "reading a recorded value back from the spill file failed: {}", strerror(errno));
    done += n;
  }
  return t;
}

void record_reference(const graph::Graph& g, const std::vector<Tensor>& inputs, const GeneratorState& seed_state,
                      ValueStore& store) {
  graph::InterpretOptions o;
  o.fp64 = true;
  o.on_value = [&](graph::ValueId id, const Tensor& t) { store.put(id, t); };
  std::vector<Tensor> copies;
  {
    NoGradGuard no_grad;
    for (const Tensor& t : inputs) copies.push_back(clone(t).detach());
  }
  default_generator() = seed_state;
  try {
    graph::run_graph(g, copies, o);
  } catch (const Error& e) {
    fail("the fp64 reference run of this graph fails, so it cannot show a backend bug: {}", e.what());
  }
  default_generator() = seed_state;
}

}  // namespace kiln::minify
