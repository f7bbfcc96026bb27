// Storage-bounds and memory-overlap checks shared by eager and the inductor (see storage_checks.h).
#include "ops/storage_checks.h"

#include <algorithm>
#include <numeric>

#include "core/size_math.h"
#include "ops/op_info.h"

namespace kiln {

StorageSpan storage_span(const Tensor& t) {
  return StorageSpan{reinterpret_cast<uintptr_t>(t.storage().get()), t.offset(), t.sizes(), t.strides()};
}

int64_t storage_capacity(const Tensor& t) { return t.storage()->nbytes() / int64_t(dtype_size(t.dtype())); }

int64_t strided_extent(const Shape& sizes, const Shape& strides) {
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    extent += (sizes[i] - 1) * strides[i];
  }
  return extent;
}

void check_view_in_storage(std::string_view op, const Shape& size, const Shape& stride, int64_t offset,
                           std::optional<int64_t> capacity) {
  KILN_CHECK(size.size() == stride.size(), "{}: {} sizes but {} strides", op, size.size(), stride.size());
  KILN_CHECK(offset >= 0, "{}: negative storage offset {}", op, offset);
  int64_t last = offset;  // the storage element the view reaches last (-1 when it is empty)
  for (size_t i = 0; i < size.size(); ++i) {
    KILN_CHECK(size[i] >= 0 && stride[i] >= 0, "{}: sizes and strides must be non-negative, got {} and {}", op,
               shape_str(size), shape_str(stride));
    if (size[i] == 0) last = -1;
  }
  for (size_t i = 0; i < size.size() && last >= 0; ++i)
    last = checked_add(last, checked_mul(size[i] - 1, stride[i], op, "the last element's storage offset"), op,
                       "the last element's storage offset");
  if (capacity && last >= 0)
    KILN_CHECK(last < *capacity, "{}: size {} stride {} offset {} reaches element {}, past the storage's {} elements",
               op, shape_str(size), shape_str(stride), offset, last, *capacity);
}

namespace {

// c10's is_non_overlapping_and_dense: the strides are a permutation of contiguous strides.
bool non_overlapping_and_dense(const StorageSpan& t) {
  std::vector<size_t> perm(t.sizes.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (t.sizes[a] < 2) return false;
    if (t.sizes[b] < 2) return true;
    return t.strides[a] < t.strides[b];
  });
  int64_t required = 1;
  for (size_t i : perm) {
    if (t.sizes[i] < 2) return true;
    if (t.strides[i] != required) return false;
    required *= t.sizes[i];
  }
  return true;
}

bool has_internal_overlap(const StorageSpan& t) {
  if (non_overlapping_and_dense(t)) return false;
  for (size_t i = 0; i < t.sizes.size(); ++i)
    if (t.strides[i] == 0 && t.sizes[i] > 1) return true;
  return false;  // c10's TooHard: allowed
}

// The dims that address anything: (size, stride) of each dim of size != 1. A size-1 dim's stride is never
// multiplied by a non-zero index, so views that differ only there (an unsqueeze's [1, 5]{5, 1} and an
// expand's [1, 5]{0, 1}) address the same elements in the same order.
std::vector<std::pair<int64_t, int64_t>> addressing_dims(const StorageSpan& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t i = 0; i < t.sizes.size(); ++i)
    if (t.sizes[i] != 1) dims.emplace_back(t.sizes[i], t.strides[i]);
  return dims;
}

// c10's get_overlap_status == Partial, except that views addressing the same elements in the same order are a
// full overlap whatever the strides of their size-1 dims (c10 compares every stride: the compiled program's
// views of one buffer may differ there from eager's, fuzz/findings/README.md).
bool partially_overlaps(const StorageSpan& a, const StorageSpan& b) {
  int64_t na = shape_numel(a.sizes), nb = shape_numel(b.sizes);
  if (na == 0 || nb == 0 || a.storage != b.storage) return false;
  if (!non_overlapping_and_dense(a) || !non_overlapping_and_dense(b)) return false;  // TooHard: allowed
  int64_t a_end = a.offset + na, b_end = b.offset + nb;
  if (a.offset == b.offset && a_end == b_end) return addressing_dims(a) != addressing_dims(b);
  return a.offset < b_end && b.offset < a_end;
}

std::string describe(const StorageSpan& t) {
  return fmt::format("sizes {}, strides {}, storage offset {}", shape_str(t.sizes), shape_str(t.strides), t.offset);
}

}  // namespace

void check_no_internal_overlap(std::string_view op, const Shape& sizes, const Shape& strides) {
  const StorageSpan written{0, 0, sizes, strides};
  KILN_CHECK(!has_internal_overlap(written), "{}: unsupported operation: more than one element of the written-to "
             "tensor ({}) refers to a single memory location. Please clone() the tensor before performing the "
             "operation.", op, describe(written));
}

void check_inplace_overlap(std::string_view op, const StorageSpan& written, const std::vector<StorageSpan>& inputs) {
  KILN_CHECK(!has_internal_overlap(written), "{}: unsupported operation: more than one element of the written-to "
             "tensor ({}) refers to a single memory location. Please clone() the tensor before performing the "
             "operation.", op, describe(written));
  for (const StorageSpan& in : inputs)
    KILN_CHECK(!partially_overlaps(written, in), "{}: unsupported operation: some elements of the input tensor ({}) "
               "and the written-to tensor ({}) refer to a single memory location. Please clone() the tensor before "
               "performing the operation.", op, describe(in), describe(written));
}

bool inplace_checks_overlap(const OpInfo& op) {
  if (!op.is_inplace()) return false;
  const auto& args = op.schema.args;
  return std::any_of(args.begin() + 1, args.end(), [](const ArgSpec& a) { return a.type == ArgType::Tensor; });
}

}  // namespace kiln
