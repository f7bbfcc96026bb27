// A compiled CUDA program run entirely on the GPU: its inputs uploaded once, every intermediate and output in
// device memory (the caching allocator), its kernels launched back to back on the null stream. The step toward
// device tensors (docs/cuda.md): for now benchmarks use it, and it refuses programs with extern calls (those
// still need the staged path through CompiledGraph::operator()).
#pragma once
#include <memory>
#include <vector>

#include "backends/cuda/device_memory.h"
#include "inductor/compile.h"

namespace kiln::cuda {

class DeviceProgram {
 public:
  // Throws kiln::Error when `program` was not compiled for "cuda", has extern calls, or there is no device.
  explicit DeviceProgram(std::shared_ptr<CompiledGraph> program);
  // Copies `inputs` (contiguous, as the graph's inputs) to the device.
  void upload(const std::vector<Tensor>& inputs);
  // Launches every kernel in order, asynchronously; then synchronize() waits and checks the status word.
  void launch() const;
  void synchronize() const;
  // The graph's outputs, copied to the host (contiguous).
  std::vector<Tensor> download() const;
  // Bytes of the graph's inputs and outputs: what a program that reads each input once and writes each output
  // once moves (the roofline's numerator).
  int64_t io_bytes() const;

 private:
  std::shared_ptr<CompiledGraph> program_;
  std::vector<std::unique_ptr<DeviceBlock>> buffers_;  // per buffer of the lowered graph
  std::unique_ptr<DeviceBlock> status_;
};

}  // namespace kiln::cuda
