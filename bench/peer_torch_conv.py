# Peer figures for kiln's inductor/conv_<kind> benchmarks (bench/bench_inductor.cpp): PyTorch eager and
# torch.compile (Inductor, CPU) per-call time of one f32 convolution of each kind, median of 30 calls after
# warm-up, at a fixed thread count (default 2, as kiln's benchmarks are compared). Prints one JSON object.
# Usage: python3 bench/peer_torch_conv.py [THREADS]
import json
import statistics
import sys
import time

import torch

# name: (input [N, C, H, W], out channels, kernel, stride, padding, groups); kiln's benchmarks use the same.
KINDS = {
    "depthwise7x7": ([1, 96, 56, 56], 96, 7, 1, 3, 96),   # ConvNeXt's token mixer
    "pointwise1x1": ([1, 64, 56, 56], 256, 1, 1, 0, 1),   # MobileNet / ResNet bottleneck expansion
    "3x3": ([1, 64, 56, 56], 64, 3, 1, 1, 1),             # ResNet basic block
    "strided3x3": ([1, 64, 56, 56], 128, 3, 2, 1, 1),     # downsampling
    "grouped3x3": ([1, 128, 28, 28], 128, 3, 1, 1, 4),    # ResNeXt-style
}


def median_ms(f, n=30):
    for _ in range(3):
        f()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    result = {"torch": torch.__version__, "threads": threads, "mkldnn": torch.backends.mkldnn.is_available(),
              "kinds": {}}
    with torch.no_grad():
        for name, (shape, out_c, k, s, p, g) in KINDS.items():
            x = torch.randn(shape)
            w = torch.randn(out_c, shape[1] // g, k, k)
            b = torch.randn(out_c)
            eager = lambda: torch.nn.functional.conv2d(x, w, b, s, p, 1, g)
            compiled_fn = torch.compile(lambda x, w, b: torch.nn.functional.conv2d(x, w, b, s, p, 1, g))
            t0 = time.perf_counter()
            compiled_fn(x, w, b)
            compile_s = time.perf_counter() - t0
            compiled = lambda: compiled_fn(x, w, b)
            result["kinds"][name] = {"eager_ms": median_ms(eager), "compiled_ms": median_ms(compiled),
                                     "compile_s": compile_s}
            print(name, result["kinds"][name], file=sys.stderr, flush=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
