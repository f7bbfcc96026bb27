#!/usr/bin/env python3
"""Exports a PyTorch model to a torch.export archive (.pt2) that `kiln import` reads, with the inputs it was
run on and PyTorch's outputs for them, so the imported graph can be checked against PyTorch (docs/import.md).

    # your own model: a Python expression for the module and one input spec per forward argument
    python3 tools/export_pt2.py --model 'mypkg.models:make_model()' --input f32:1,3,32,32 --out out/ --name net
    # kiln's committed CI fixtures (tests/fixtures/pt2/), with random weights (all, or those named)
    python3 tools/export_pt2.py --fixtures --out tests/fixtures/pt2
    python3 tools/export_pt2.py --fixtures unet ranker --out tests/fixtures/pt2
    python3 tools/export_pt2.py --fixtures scatter_ops pool3d bag_ops fold_ir --out tests/fixtures/pt2
    # the Core ATen op list (ops tagged torch.Tag.core) behind `kiln ops --coverage`
    python3 tools/export_pt2.py --core-aten-ops src/import/core_aten_ops.txt

For a model named NAME it writes NAME.pt2 (exported, decomposed to Core ATen unless --no-decompose, saved by
torch.export.save), NAME.inputs/<input>.npy (one per user input, named after the exported graph's
placeholder, as `kiln run --inputs` wants them) and NAME.expected/output_<k>.npy (the eager module's
outputs). Needs torch (>= 2.6) and nothing else: .npy files are written by hand.
"""
import argparse
import importlib
import sys
from pathlib import Path

import torch

NPY_DTYPES = {torch.float32: "<f4", torch.float64: "<f8", torch.float16: "<f2", torch.int64: "<i8",
              torch.int32: "<i4", torch.int16: "<i2", torch.int8: "|i1", torch.uint8: "|u1", torch.bool: "|b1",
              torch.bfloat16: "<u2"}  # bf16 as raw bits, as kiln writes it (src/core/npy.h)


def write_npy(path: Path, t: torch.Tensor) -> None:
    t = t.detach().cpu().contiguous()
    descr = NPY_DTYPES[t.dtype]
    shape = ",".join(str(s) for s in t.shape) + ("," if t.dim() == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, shape)
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
    data = raw.numpy().tobytes() if hasattr(raw, "numpy") else bytes(raw.untyped_storage())
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data)


def export_model(model, example_inputs, out: Path, name: str, decompose: bool = True) -> Path:
    """Exports `model` on `example_inputs`, saves NAME.pt2 and the inputs and expected outputs beside it."""
    model = model.eval()
    with torch.no_grad():
        ep = torch.export.export(model, tuple(example_inputs))
        if decompose:
            ep = ep.run_decompositions()
        expected = model(*example_inputs)
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"{name}.pt2"
    torch.export.save(ep, str(archive))
    inputs_dir, expected_dir = out / f"{name}.inputs", out / f"{name}.expected"
    inputs_dir.mkdir(exist_ok=True)
    expected_dir.mkdir(exist_ok=True)
    user_inputs = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    for input_name, value in zip(user_inputs, example_inputs):
        write_npy(inputs_dir / f"{input_name}.npy", value)
    outputs = expected if isinstance(expected, (tuple, list)) else (expected,)
    for k, value in enumerate(outputs):
        write_npy(expected_dir / f"output_{k}.npy", value)
    return archive


# ------------------------------------------------------------------------------------------ CI fixtures


class TinyMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=-1)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.conv2, self.bn2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), torch.nn.BatchNorm2d(16)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(16, 10)
        for bn in (self.bn1, self.bn2):  # non-trivial running statistics, as a trained model has
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(x.mean(dim=(2, 3)), 1))


class TinyTransformerBlock(torch.nn.Module):
    """Token embedding (padding_idx 0, as BERT's), pre-norm self-attention and a GELU feed-forward."""

    def __init__(self, vocab=50, d=32, heads=2, ff=64):
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(vocab, d, padding_idx=0)
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ff1, self.ff2 = torch.nn.Linear(d, ff), torch.nn.Linear(ff, d)

    def forward(self, ids):
        x = self.embed(ids)
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))


class TinyUNet(torch.nn.Module):
    """Down (conv, max pool), up (transposed convolution, nearest upsampling), bilinear resize to another size."""

    def __init__(self):
        super().__init__()
        self.down1, self.down2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1)
        self.up = torch.nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.head = torch.nn.Conv2d(4, 2, 1)

    def forward(self, x):
        x = torch.relu(self.down2(torch.nn.functional.max_pool2d(torch.relu(self.down1(x)), 2)))
        x = torch.nn.functional.interpolate(torch.relu(self.up(x)), scale_factor=2.0, mode="nearest")
        return torch.nn.functional.interpolate(self.head(x), size=(20, 12), mode="bilinear", align_corners=False)


class TinyRanker(torch.nn.Module):
    """A 1-D convolution over the sequence, causal scaled-dot-product attention, a running sum, top-k and sort."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.conv = torch.nn.Conv1d(d, d, 3, padding=1)
        self.qkv, self.score = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, 1)

    def forward(self, x):
        b, s, d = x.shape
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in self.qkv(x).split(d, -1))
        att = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = torch.cumsum(att.transpose(1, 2).reshape(b, s, d), dim=1)
        scores = self.score(x).squeeze(-1)
        top_values, top_indices = torch.topk(scores, 3, dim=-1)
        return x, top_values, top_indices, torch.sort(scores, dim=-1, descending=True).values


class ScatterOps(torch.nn.Module):
    """Assignments into a strided slice and one index (slice_scatter, select_scatter), masked_scatter and
    scatter_reduce (sum onto zeros, mean leaving self out)."""

    def forward(self, x, src, index):
        y = x.clone()
        y[:, 1:7:2] = src[:, :3]
        y[:, 0] = src[:, 3]
        z = x.masked_scatter(x > 0.5, src)
        s = torch.zeros(4, 8).scatter_reduce(1, index, src, "sum")
        m = x.scatter_reduce(1, index, src, "mean", include_self=False)
        return y, z, s, m


class Tiny3D(torch.nn.Module):
    """A video-style stem: a 3-D convolution, instance norm, 3-D max and average pools, adaptive pooling."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm = torch.nn.Conv3d(2, 4, 3, padding=1), torch.nn.InstanceNorm3d(4, affine=True)
        torch.nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        torch.nn.init.uniform_(self.norm.bias, -0.5, 0.5)

    def forward(self, x):
        x = torch.relu(self.norm(self.conv(x)))
        a = torch.nn.functional.max_pool3d(x, (2, 3, 3), stride=2, padding=1)
        b = torch.nn.functional.avg_pool3d(x, 3, stride=2, padding=1, count_include_pad=False)
        c = torch.nn.functional.adaptive_avg_pool3d(x, (3, 2, 2))
        return a, b, c, torch.nn.functional.avg_pool3d(x, 2)


class BagDistanceSample(torch.nn.Module):
    """EmbeddingBag (sum with per-sample weights; mean with padding_idx, an empty bag), cdist, pdist,
    nn.Fold (col2im) and grid_sample (bilinear with zeros padding, nearest with border padding)."""

    def __init__(self):
        super().__init__()
        self.bag_sum = torch.nn.EmbeddingBag(20, 6, mode="sum")
        self.bag_mean = torch.nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0)
        self.fold = torch.nn.Fold(output_size=(7, 5), kernel_size=(2, 3), stride=(2, 1), padding=(1, 1))

    def forward(self, ids, offsets, weights, pts, cols, img, grid):
        sample = torch.nn.functional.grid_sample
        return (self.bag_sum(ids, offsets, per_sample_weights=weights), self.bag_mean(ids, offsets),
                torch.cdist(pts, pts[:3]), torch.cdist(pts, pts[:3], p=1.0), torch.nn.functional.pdist(pts),
                self.fold(cols), sample(img, grid, mode="bilinear", padding_mode="zeros", align_corners=False),
                sample(img, grid, mode="nearest", padding_mode="border", align_corners=True))


class FoldIR(torch.nn.Module):
    """ATen ops that run_decompositions() would decompose, called directly and exported without decomposing:
    col2im (nn.Fold's op) and select_scatter."""

    def forward(self, cols, x, src):
        return (torch.ops.aten.col2im(cols, [7, 5], [2, 3], [1, 1], [1, 1], [2, 1]),
                torch.ops.aten.select_scatter(x, src, 1, -1))


def write_fixtures(out: Path, only=()) -> None:
    torch.manual_seed(20261125)
    ids = torch.randint(0, 50, (2, 8))
    ids[0, -2:] = 0  # padding tokens
    cases = {"mlp": (TinyMLP(), (torch.randn(4, 16),)),
             "cnn": (SmallCNN(), (torch.randn(2, 3, 16, 16),)),
             "transformer": (TinyTransformerBlock(), (ids,))}
    torch.manual_seed(20261126)  # the fixtures added later draw from their own seed
    cases["unet"] = (TinyUNet(), (torch.randn(1, 3, 16, 16),))
    cases["ranker"] = (TinyRanker(), (torch.randn(2, 8, 16),))
    torch.manual_seed(20261127)
    cases["scatter_ops"] = (ScatterOps(), (torch.rand(4, 8), torch.randn(4, 8), torch.randint(0, 8, (4, 8))))
    cases["pool3d"] = (Tiny3D(), (torch.randn(1, 2, 6, 8, 8),))
    ids = torch.randint(0, 20, (10,))
    ids[[1, 5]] = 0  # padding_idx of bag_mean
    cases["bag_ops"] = (BagDistanceSample(), (ids, torch.tensor([0, 3, 3, 7]), torch.rand(10), torch.randn(5, 4),
                                              torch.randn(1, 12, 20), torch.randn(1, 2, 5, 6),
                                              torch.rand(1, 3, 4, 2) * 2.4 - 1.2))
    cases["fold_ir"] = (FoldIR(), (torch.randn(2, 12, 20), torch.randn(2, 3, 4), torch.randn(2, 4)))
    for name, (model, inputs) in cases.items():
        if not only or name in only:
            print("wrote", export_model(model, inputs, out, name, decompose=not name.endswith("_ir")))


def write_core_aten_ops(path: Path) -> None:
    """One `name.overload` per line: every aten operator overload tagged torch.Tag.core."""
    names = set()
    for packet_name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, packet_name)
        if not hasattr(packet, "overloads"):
            continue
        for overload in packet.overloads():
            if torch.Tag.core in getattr(packet, overload).tags:
                names.add(f"{packet_name}.{overload}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# Core ATen operator overloads (torch.Tag.core) of PyTorch {torch.__version__}, written by\n"
                    "# tools/export_pt2.py --core-aten-ops; read by `kiln ops --coverage`.\n"
                    + "".join(f"{n}\n" for n in sorted(names)))
    print(f"wrote {len(names)} ops to {path}")


def parse_input(spec: str) -> torch.Tensor:
    dtype_name, _, shape = spec.partition(":")
    dtype = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64, "bf16": torch.bfloat16}[dtype_name]
    sizes = [int(s) for s in shape.split(",") if s]
    return torch.randint(0, 10, sizes) if dtype == torch.int64 else torch.randn(sizes, dtype=dtype)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="'module:expression' giving an nn.Module, e.g. 'torchvision.models:resnet18()'")
    p.add_argument("--input", action="append", default=[], help="one per forward argument: DTYPE:D0,D1,... "
                   "(f32, f64, i64, bf16), filled with random values")
    p.add_argument("--name", default="model")
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--no-decompose", action="store_true", help="save the export IR, not Core ATen")
    p.add_argument("--fixtures", nargs="*", metavar="NAME", help="write kiln's CI fixtures (all, or those named) "
                   "to --out")
    p.add_argument("--core-aten-ops", type=Path, metavar="FILE", help="write the Core ATen op list to FILE")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.core_aten_ops:
        write_core_aten_ops(a.core_aten_ops)
    if a.fixtures is not None:
        write_fixtures(a.out, a.fixtures)
    if a.model:
        torch.manual_seed(a.seed)
        module_name, _, expr = a.model.partition(":")
        model = eval(expr, vars(importlib.import_module(module_name)))
        print("wrote", export_model(model, [parse_input(s) for s in a.input], a.out, a.name, not a.no_decompose))
    if not (a.core_aten_ops or a.fixtures is not None or a.model):
        p.error("nothing to do: give --model, --fixtures or --core-aten-ops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
