# Peer figures on a machine with PyTorch (the device machine): eager and torch.compile (Inductor, CPU) softmax
# and layer norm on 4096x4096 f32 beside a copy of the same bytes, fastest of 20 runs each, alternating.
# Usage: python3 bench/peer_torch.py [THREADS]   (default: PyTorch's own thread count)
import sys
import time

import torch

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads())
x = torch.randn(4096, 4096)
def best(f, n=20):
    b = 1e9
    for _ in range(n):
        t0 = time.perf_counter(); f(); b = min(b, time.perf_counter() - t0)
    return b
out = torch.empty_like(x)
copy = lambda: out.copy_(x)
sm = torch.compile(lambda t: torch.softmax(t, -1))
ln = torch.compile(lambda t: torch.nn.functional.layer_norm(t, (4096,)))
t0 = time.perf_counter(); sm(x); ln(x); print("compile both: %.1f s" % (time.perf_counter() - t0))
for rep in range(3):
    c = best(copy); s = best(lambda: sm(x)); l = best(lambda: ln(x)); se = best(lambda: torch.softmax(x, -1))
    print("copy %.3f ms  inductor softmax %.3f ms (%.2f of copy)  layernorm %.3f ms (%.2f)  eager softmax %.3f ms (%.2f)"
          % (c*1e3, s*1e3, c/s, l*1e3, c/l, se*1e3, c/se))
