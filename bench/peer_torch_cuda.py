# torch.compile's figures for bench/bench_inductor_cuda.cpp's cases on the GPU, in the same device run
# (ci/gpu-test.sh): pointwise10 over 64M f32, softmax, layer norm and row sum over 8192x8192 f32, beside a
# device-to-device copy of the same bytes; fastest of 20 runs each (CUDA events), and each case's cold compile
# time (first call, Inductor + Triton). Prints one JSON object per case. Then the per-call cost of pointwise10
# on 1024 elements (bench_inductor_cuda's overhead cases) with mode default and reduce-overhead: issue_us (host
# time to enqueue one call, averaged over 100) and latency_us (one call and a synchronize, median of 1001).
import json
import time

import torch

torch.manual_seed(0)
dev = "cuda"
N = 64 << 20
R = 8192

def pointwise10(x, y):
    t = x + y; t = t * 0.5; t = t - y; t = torch.relu(t); t = t * x
    t = t + 1.0; t = torch.maximum(t, y); t = t * 2.0; t = t - 0.25
    return torch.abs(t)

cases = {
    "pointwise10_f32_64M": (pointwise10, [torch.randn(N, device=dev), torch.randn(N, device=dev)], N * 4),
    "softmax_8192x8192": (lambda x: torch.softmax(x, -1), [torch.randn(R, R, device=dev)], R * R * 4),
    "layernorm_8192x8192": (lambda x, w, b: torch.nn.functional.layer_norm(x, (R,), w, b),
                            [torch.randn(R, R, device=dev), torch.randn(R, device=dev), torch.randn(R, device=dev)], R * R * 4),
    "row_sum_8192x8192": (lambda x: x.sum(1), [torch.randn(R, R, device=dev)], R * 4),
    "whole_sum_f32_64M": (lambda x: x.sum(), [torch.randn(N, device=dev)], 4),
    "mlp_4096x1024_f32": (lambda x, w1, b1, w2, b2: torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1, b1)), w2, b2),
                          [torch.randn(4096, 1024, device=dev), torch.randn(4096, 1024, device=dev), torch.randn(4096, device=dev),
                           torch.randn(1024, 4096, device=dev), torch.randn(1024, device=dev)], 4096 * 1024 * 4),
}

def best(f, n=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    b = 1e30
    for _ in range(n):
        s.record(); f(); e.record(); e.synchronize()
        b = min(b, s.elapsed_time(e) * 1e-3)
    return b

for name, (fn, inputs, out_bytes) in cases.items():
    in_bytes = sum(t.numel() * t.element_size() for t in inputs)
    nbytes = in_bytes + out_bytes
    torch._dynamo.reset()
    compiled = torch.compile(fn)
    t0 = time.perf_counter(); compiled(*inputs); torch.cuda.synchronize(); compile_s = time.perf_counter() - t0
    # A copy of half the bytes reads and writes them: it moves `nbytes`, as bench_inductor_cuda.cpp's copy does.
    src = torch.empty(nbytes // 16, dtype=torch.float64, device=dev); dst = torch.empty_like(src)
    copy_s = best(lambda: dst.copy_(src))
    comp_s = best(lambda: compiled(*inputs))
    print(json.dumps({"case": "torch_compile/" + name, "compiled_ms": comp_s * 1e3, "GB/s": nbytes / comp_s * 1e-9,
                      "copy_GB/s": nbytes / copy_s * 1e-9, "vs_copy": copy_s / comp_s, "cold_compile_s": compile_s}))

x, y = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
for mode in ("default", "reduce-overhead"):
    torch._dynamo.reset()
    compiled = torch.compile(pointwise10, mode=mode)
    for _ in range(5): compiled(x, y)
    torch.cuda.synchronize()
    issue = 1e30
    for _ in range(20):
        t0 = time.perf_counter()
        for _ in range(100): compiled(x, y)
        issue = min(issue, (time.perf_counter() - t0) / 100)
        torch.cuda.synchronize()
    lat = []
    for _ in range(1001):
        t0 = time.perf_counter(); compiled(x, y); torch.cuda.synchronize(); lat.append(time.perf_counter() - t0)
    lat.sort()
    print(json.dumps({"case": "torch_compile/overhead_pointwise10_1024_" + mode, "issue_us": issue * 1e6,
                      "latency_us": lat[len(lat) // 2] * 1e6}))
