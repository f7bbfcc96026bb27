// A compiled CUDA program run entirely on the GPU: its inputs uploaded once, every intermediate and output in
// device memory (the caching allocator), its kernels launched back to back on the null stream. The step toward
// device tensors (docs/cuda.md): for now benchmarks use it, and it refuses programs with extern calls (those
// still need the staged path through CompiledGraph::operator()).
//
// reduce-overhead (Launches::CudaGraph): the first launch() runs the kernels once, then records their launches
// on the program's stream into a CUDA graph; every later launch() replays it with one cuGraphLaunch. The buffers
// are static (upload() copies new inputs into the same device memory), so a replay reads the latest inputs.
#pragma once
#include <memory>
#include <vector>

#include "backends/cuda/device_memory.h"
#include "inductor/compile.h"

namespace kiln::cuda {

class DeviceProgram {
 public:
  enum class Launches {
    Direct,     // one cuLaunchKernel per kernel per launch()
    CudaGraph,  // reduce-overhead: the launches captured once into a CUDA graph, replayed by launch()
  };
  // Throws kiln::Error when `program` was not compiled for "cuda", has extern calls, or there is no device.
  explicit DeviceProgram(std::shared_ptr<CompiledGraph> program, Launches launches = Launches::Direct);
  ~DeviceProgram();
  DeviceProgram(const DeviceProgram&) = delete;
  DeviceProgram& operator=(const DeviceProgram&) = delete;
  // Copies `inputs` (contiguous, as the graph's inputs) to the device.
  void upload(const std::vector<Tensor>& inputs);
  // Launches every kernel in order (or replays the CUDA graph), asynchronously, on the program's stream (which
  // synchronises with the null stream); then synchronize() waits and checks the status word.
  void launch();
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
  Launches launches_;
  CUstream stream_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec graph_exec_ = nullptr;

  void launch_kernels() const;
  void capture();
};

}  // namespace kiln::cuda
