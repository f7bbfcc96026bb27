// A compiled CUDA program run on the GPU: its inputs uploaded once (or written on the device through input()),
// every intermediate and output in device memory (the caching allocator), its kernels launched back to back on
// the program's stream. The step toward device tensors (docs/cuda.md).
//
// Extern calls: matrix products (mm, bmm, addmm in f32, f64, f16, bf16) run through cuBLAS on the device buffers
// (cublas.h). Others (convolutions, nll_loss, integer products, ...) run on the host: the stream is waited for,
// the call's input buffers are copied to the host, the op's eager kernel runs there, and its results are copied
// back into their device buffers (logged once a program on the `lowering` channel, with why the op is extern and
// why cuBLAS does not run it).
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
  // Throws kiln::Error when `program` was not compiled for "cuda", there is no device, or a CUDA graph is asked for
  // a program with extern calls (they run on the host, which a graph cannot record).
  explicit DeviceProgram(std::shared_ptr<CompiledGraph> program, Launches launches = Launches::Direct);
  // On a program kept alive by its owner (CompiledGraph's reduce-overhead recording).
  DeviceProgram(const CompiledGraph::Impl& program, Launches launches);
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
  // Where input `i` and output `i` live on the device: the buffer the kernels read (inputs: contiguous) or the
  // output's view into its buffer. Valid for the program's life; another program (or cuMemcpy) may write an input
  // there instead of upload(), or read an output there instead of download(), after synchronize().
  struct DeviceView {
    CUdeviceptr data = 0;  // the first element
    DType dtype = DType::F32;
    Shape sizes, strides;  // strides in elements
  };
  DeviceView input(int i) const;
  DeviceView output(int i) const;
  // Bytes of the graph's inputs and outputs: what a program that reads each input once and writes each output
  // once moves (the roofline's numerator).
  int64_t io_bytes() const;

 private:
  std::shared_ptr<CompiledGraph> owner_;  // null when the program's owner keeps it alive
  const CompiledGraph::Impl* program_;
  std::vector<std::unique_ptr<DeviceBlock>> buffers_;  // per buffer of the lowered graph
  std::unique_ptr<DeviceBlock> status_;
  Launches launches_;
  CUstream stream_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec graph_exec_ = nullptr;

  std::vector<bool> fallback_logged_;  // per lowered node: its host fallback was logged

  void launch_steps();
  void capture();
  friend std::vector<Tensor> run_recorded(DeviceProgram& program, const std::vector<Tensor>& inputs);
};

// CompiledGraph::operator() for a program compiled for "cuda" whose inputs are CUDA tensors (the host program's
// staging is skipped): every buffer is device memory from the caching allocator on the legacy null stream, inputs
// are used in place (copied first where their strides differ from the compiled layout), outputs are CUDA tensors
// over their buffers. Extern calls as in DeviceProgram (cuBLAS, else the host fallback). Returns after the kernels
// ran (the status word is checked).
std::vector<Tensor> run_on_device_tensors(const CompiledGraph::Impl& program, const std::vector<Tensor>& inputs);

// A reduce-overhead call (CompileOptions::mode): `inputs` (CUDA or host tensors) copied into the recorded
// program's static input buffers, the CUDA graph replayed, the outputs copied out (CUDA tensors when any input is
// one, else host tensors), so a later replay cannot overwrite what a caller holds.
std::vector<Tensor> run_recorded(DeviceProgram& program, const std::vector<Tensor>& inputs);

}  // namespace kiln::cuda
