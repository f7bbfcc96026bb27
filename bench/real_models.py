#!/usr/bin/env python3
"""kiln's compiled per-call time against torch.compile's (Inductor, CPU) on whole models, on one host: the
CI fixtures of tools/export_pt2.py and three convolution-heavy models in the style of ConvNeXt, SqueezeNet
and MobileNetV3 (issue 21). Each model is exported to a .pt2 (tools/export_pt2.py's export_model), imported
with `kiln import` and timed with `kiln bench --caches warm` (median of 10 samples); PyTorch times eager and
torch.compile (median of 30 warm calls after compiling). Run it pinned, both sides at the same thread count:

    python3 bench/real_models.py --out DIR --compile-only    # optional: fill Inductor's caches on every core
    taskset -c 0,1 python3 bench/real_models.py --threads 2 --out DIR --kiln 'build/kiln'

Writes DIR/torch.json, DIR/kiln.json (kiln bench's Google Benchmark JSON) and prints the table with the
geometric mean of torch.compile's time over kiln's (above 1: kiln is faster). Needs torch (>= 2.6).
"""
import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import export_pt2  # noqa: E402


class LayerNorm2d(nn.LayerNorm):  # ConvNeXt's channels-first layer norm
    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw, self.ln = nn.Conv2d(c, c, 7, padding=3, groups=c), nn.LayerNorm(c)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        y = self.fc2(F.gelu(self.fc1(self.ln(self.dw(x).permute(0, 2, 3, 1)))))
        return x + y.permute(0, 3, 1, 2)


class TinyConvNeXt(nn.Module):
    """Patchify stem, two stages of 7x7 depthwise blocks (48 and 96 channels), a downsampling layer, a head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 48, 4, stride=4), LayerNorm2d(48))
        self.stage1 = nn.Sequential(ConvNeXtBlock(48), ConvNeXtBlock(48))
        self.down = nn.Sequential(LayerNorm2d(48), nn.Conv2d(48, 96, 2, stride=2))
        self.stage2 = nn.Sequential(ConvNeXtBlock(96), ConvNeXtBlock(96))
        self.norm, self.head = nn.LayerNorm(96), nn.Linear(96, 10)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(self.norm(x.mean(dim=(2, 3))))


class Fire(nn.Module):
    def __init__(self, cin, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1, self.e3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(x)), F.relu(self.e3(x))], 1)


class TinySqueezeNet(nn.Module):
    """SqueezeNet 1.1's layout with fewer fire modules: ceil-mode max pools, 1x1 classifier, adaptive pool."""

    def __init__(self):
        super().__init__()
        pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
        self.features = nn.Sequential(nn.Conv2d(3, 64, 3, stride=2), nn.ReLU(), pool(), Fire(64, 16, 64),
                                      Fire(128, 16, 64), pool(), Fire(128, 32, 128), Fire(256, 32, 128), pool(),
                                      Fire(256, 48, 192))
        self.classifier = nn.Conv2d(384, 10, 1)

    def forward(self, x):
        return torch.flatten(F.adaptive_avg_pool2d(F.relu(self.classifier(self.features(x))), 1), 1)


class SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(x, 1)))))


class InvertedResidual(nn.Module):
    def __init__(self, cin, expand, cout, k, stride, se, act):
        super().__init__()
        layers = []
        if expand != cin:
            layers += [nn.Conv2d(cin, expand, 1, bias=False), nn.BatchNorm2d(expand), act()]
        layers += [nn.Conv2d(expand, expand, k, stride, k // 2, groups=expand, bias=False), nn.BatchNorm2d(expand), act()]
        if se:
            layers.append(SqueezeExcite(expand))
        layers += [nn.Conv2d(expand, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block, self.residual = nn.Sequential(*layers), stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class TinyMobileNetV3(nn.Module):
    """MobileNetV3-Small's first blocks: hardswish, squeeze-excite, 3x3 and 5x5 depthwise convolutions."""

    def __init__(self):
        super().__init__()
        hs, relu = nn.Hardswish, nn.ReLU
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), hs(),
            InvertedResidual(16, 16, 16, 3, 2, True, relu), InvertedResidual(16, 72, 24, 3, 2, False, relu),
            InvertedResidual(24, 88, 24, 3, 1, False, relu), InvertedResidual(24, 96, 40, 5, 2, True, hs),
            InvertedResidual(40, 240, 40, 5, 1, True, hs), nn.Conv2d(40, 288, 1, bias=False), nn.BatchNorm2d(288), hs())
        self.head = nn.Linear(288, 10)
        for m in self.modules():  # non-trivial running statistics, as a trained model has
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def models():
    """name -> (module, example inputs); the fixtures' models first, then the convolution-heavy ones."""
    torch.manual_seed(20261125)
    ids = torch.randint(0, 50, (2, 8))
    cases = {"mlp": (export_pt2.TinyMLP(), (torch.randn(4, 16),)),
             "cnn": (export_pt2.SmallCNN(), (torch.randn(2, 3, 16, 16),)),
             "transformer": (export_pt2.TinyTransformerBlock(), (ids,)),
             "unet": (export_pt2.TinyUNet(), (torch.randn(1, 3, 16, 16),)),
             "ranker": (export_pt2.TinyRanker(), (torch.randn(2, 8, 16),)),
             "convnext": (TinyConvNeXt(), (torch.randn(1, 3, 128, 128),)),
             "squeezenet": (TinySqueezeNet(), (torch.randn(1, 3, 96, 96),)),
             "mobilenetv3": (TinyMobileNetV3(), (torch.randn(1, 3, 96, 96),))}
    return cases


def median_ms(f, n=30):
    for _ in range(3):
        f()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def time_torch(cases, out: Path, threads: int) -> dict:
    torch.set_num_threads(threads)
    result = {"torch": torch.__version__, "threads": threads, "models": {}}
    with torch.no_grad():
        for name, (model, inputs) in cases.items():
            model = model.eval()
            try:
                compiled = torch.compile(model)
                t0 = time.perf_counter()
                compiled(*inputs)
                compile_s = time.perf_counter() - t0
                result["models"][name] = {"eager_ms": median_ms(lambda: model(*inputs)),
                                          "compiled_ms": median_ms(lambda: compiled(*inputs)), "compile_s": compile_s}
            except Exception as e:  # noqa: BLE001 - one model's failure must not lose the others' figures
                result["models"][name] = {"error": repr(e)[:500]}
            print(name, result["models"][name], file=sys.stderr, flush=True)
            (out / "torch.json").write_text(json.dumps(result, indent=1))
    return result


def time_kiln(kiln: str, cases, out: Path) -> dict:
    """Imports each archive and times the imported graphs in one `kiln bench`; name -> compiled median ms."""
    graphs = []
    for name in cases:
        r = subprocess.run(shlex.split(kiln) + ["import", str(out / f"{name}.pt2"), "-o", str(out / name)],
                           capture_output=True, text=True)
        print(name, "import:", r.returncode, (r.stdout + r.stderr).strip()[-400:], file=sys.stderr, flush=True)
        if r.returncode == 0:
            graphs.append(str(out / name / f"{name}.kir"))
    r = subprocess.run(shlex.split(kiln) + ["bench", *graphs, "--caches", "warm", "--repetitions", "10",
                                            "--json", str(out / "kiln.json")], capture_output=True, text=True)
    print("kiln bench:", r.returncode, r.stdout[-3000:], r.stderr[-2000:], file=sys.stderr, flush=True)
    times = {}
    if (out / "kiln.json").exists():
        for b in json.loads((out / "kiln.json").read_text())["benchmarks"]:
            if b.get("aggregate_name") == "median" and "/compiled/" in b["name"]:
                times[b["name"].split("/compiled/")[0]] = b["real_time"]
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--kiln", help="how to run kiln (a command line), e.g. build/kiln")
    p.add_argument("--only", nargs="*", help="these models only")
    p.add_argument("--compile-only", action="store_true", help="only compile each model with torch.compile (fills "
                   "Inductor's caches, e.g. unpinned before a pinned run, so compiling on 2 cores takes no minutes)")
    a = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    a.out.mkdir(parents=True, exist_ok=True)
    cases = {k: v for k, v in models().items() if not a.only or k in a.only}
    if a.compile_only:  # at the timed run's thread count: Inductor's C++ kernels fix their OpenMP thread count
        torch.set_num_threads(a.threads)
        with torch.no_grad():
            for name, (model, inputs) in cases.items():
                torch.compile(model.eval())(*inputs)
                print("compiled", name, file=sys.stderr, flush=True)
        return 0
    for name, (model, inputs) in cases.items():
        export_pt2.export_model(model, inputs, a.out, name)
    kiln = time_kiln(a.kiln, cases, a.out) if a.kiln else {}
    torch_times = time_torch(cases, a.out, a.threads)["models"]
    ratios = []
    print("| model | kiln compiled ms | torch.compile ms | torch eager ms | torch.compile / kiln |")
    print("| --- | --- | --- | --- | --- |")
    for name in cases:
        k, t = kiln.get(name), torch_times.get(name, {})
        ratio = t["compiled_ms"] / k if k and "compiled_ms" in t else None
        if ratio:
            ratios.append(ratio)
        fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else "-"  # noqa: E731
        print(f"| {name} | {fmt(k)} | {fmt(t.get('compiled_ms'))} | {fmt(t.get('eager_ms'))} | {fmt(ratio)} |")
    if ratios:
        print(f"geomean torch.compile / kiln over {len(ratios)} models: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
