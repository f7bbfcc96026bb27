// The checks that keep views and in-place writes inside their storage, shared by eager (on real tensors) and
// the inductor (at compile time, on its model of eager's storages: src/graph/storage_model.h), so both
// accept and reject the same programs with the same messages.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

#include "eager/tensor.h"
#include "ops/op_info.h"

namespace kiln {

// Where a tensor lies in a storage, in elements. `storage` only identifies the storage (two spans alias when
// it is equal): eager uses the Storage's address, the inductor the id of the graph value that owns it.
struct StorageSpan {
  uintptr_t storage = 0;
  int64_t offset = 0;
  Shape sizes, strides;
};
StorageSpan storage_span(const Tensor& t);
// Elements a storage of `nbytes` holds for `dtype`.
int64_t storage_capacity(const Tensor& t);
// Elements a fresh tensor of these sizes and strides allocates (Tensor::empty_strided): 1 + the last element's
// offset, 0 when empty.
int64_t strided_extent(const Shape& sizes, const Shape& strides);

// A view (size, stride, storage offset) made by `op` (as_strided): checks the arithmetic (matching lengths,
// non-negative sizes, strides and offset, no overflow) and, when `capacity` is given, that its last element
// lies inside a storage of that many elements. Throws kiln::Error with eager's message.
void check_view_in_storage(std::string_view op, const Shape& size, const Shape& stride, int64_t offset,
                           std::optional<int64_t> capacity);

// PyTorch's memory-overlap rules for an in-place op writing `written` while reading `inputs` (TensorIterator's
// check_mem_overlap): the written-to tensor must not have internal overlap (a stride 0 over a dim longer than
// 1: more than one element refers to one memory location), and no input may partially overlap it (the same
// storage, overlapping ranges, but not the same elements in the same order). Throws kiln::Error with
// PyTorch's messages, naming `op`.
void check_inplace_overlap(std::string_view op, const StorageSpan& written, const std::vector<StorageSpan>& inputs);

// The first of those checks alone, from the written-to tensor's layout: what shape inference of add_, mul_ and
// copy_ can check before any storage exists (an expanded value written in place), with the same message.
void check_no_internal_overlap(std::string_view op, const Shape& sizes, const Shape& strides);

// Whether an in-place op is subject to check_inplace_overlap: it reads a tensor besides the one it writes
// (add_, mul_, copy_). fill_ and zero_ write one value everywhere, which PyTorch allows on overlapping views.
bool inplace_checks_overlap(const OpInfo& op);

}  // namespace kiln
