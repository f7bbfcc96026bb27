// The register functions of the op families (one source file each under src/ops/). registry.cpp calls
// register_all_families() once, after the rows of ops.def are in the table.
#pragma once

namespace kiln {

void register_pointwise_ops();
void register_reduction_ops();
void register_linalg_ops();
void register_shape_ops();
void register_index_ops();
void register_creation_ops();
void register_random_ops();
void register_nn_ops();
void register_conv_ops();
void register_convolution_ops();
void register_scan_ops();
void register_resample_ops();
void register_inplace_ops();

inline void register_all_families() {
  register_pointwise_ops();
  register_reduction_ops();
  register_linalg_ops();
  register_shape_ops();
  register_index_ops();
  register_creation_ops();
  register_random_ops();
  register_nn_ops();
  register_conv_ops();
  register_convolution_ops();
  register_scan_ops();
  register_resample_ops();
  register_inplace_ops();
}

}  // namespace kiln
