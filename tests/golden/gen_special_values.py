#!/usr/bin/env python3
"""Records PyTorch's answers for every pointwise op of src/ops/ops.def on special values (+-0, +-inf, NaN,
denormals, the dtype's extremes, the edges of each op's domain), for tests/test_numerics.cpp.

    CUDA_VISIBLE_DEVICES= python3 tests/golden/gen_special_values.py --out tests/golden/special_values.json
    python3 tests/golden/gen_special_values.py --check        # no torch needed: the op walk and the variants

The ops come from walking ops.def (kind Pointwise, and the Composite rows of the pointwise family), so a new
op is covered without editing this file; an op that cannot be called with its schema defaults needs an entry
in ATTR_VARIANTS, and the script fails until it has one. Every op runs on every dtype; a dtype PyTorch refuses
is recorded as an error. Unary ops run on the dtype's special-value list, binary ops on every pair of a
shorter list, ternary ops on every triple of a shorter one still.

PyTorch's CPU kernels compute the vectorised body of a loop and its scalar tail with different code (Sleef or
hand-written vector math, std:: functions for the tail), and the two sometimes disagree on special values.
Each case is therefore run twice: as one contiguous tensor padded to a multiple of 64 elements (every element
in the vector body) and element by element (1-element tensors: the scalar path). `out` holds the vector
answers; `scalar` lists the elements whose scalar answer differs. The file format is described in
docs/golden-tests.md ("Special values").
"""
import argparse
import itertools
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_goldens  # noqa: E402  (ops.def parsing)

torch = None

DTYPES = ["f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool"]
PAD = 64  # a multiple of every CPU vector width, twice over

# Attribute variants: extra calls for ops whose non-tensor arguments change the computation, and the calls
# for ops that cannot run with their schema defaults (clamp, to). Values are kiln schema arguments.
ATTR_VARIANTS = {
    "add": [{}, {"alpha": 2}, {"alpha": -0.5}],
    "sub": [{}, {"alpha": 2}],
    "div": [{}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}],
    "gelu": [{}, {"approximate": "tanh"}],
    "round": [{}, {"decimals": 2}, {"decimals": -1}],
    "clamp": [{"min": -1.5, "max": 2.0}, {"min": 0.0}, {"max": -0.0}, {"min": 1, "max": -1}],
    "to": [{"dtype": d} for d in DTYPES],
    "addcmul": [{}, {"value": -2}],
}
# Tensor arguments of a fixed dtype (where's condition is a mask).
ARG_DTYPE = {("where", "condition"): "bool"}


def pointwise_ops():
    ops = gen_goldens.parse_ops_def()
    return [op for op in ops if op.kind == "Pointwise" or (op.family == "pointwise" and op.kind == "Composite")]


def tensor_args(op):
    return [a for a in op.args if a.type == "Tensor"]


def variants(op):
    return ATTR_VARIANTS.get(op.name, [{}])


# ---- special values -------------------------------------------------------------------------------------

def float_values(dt, arity):
    fi = torch.finfo(gen_goldens.tdt(dt))
    tiny, sub, big = fi.tiny, fi.smallest_normal * fi.eps, fi.max
    if arity == 1:
        vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -7.25, 100.0, math.inf, -math.inf, math.nan,
                sub, -sub, tiny, -tiny, big, -big, 1e-30, 1e30, -1e30, 0.75, 1.5707963267948966, 3.141592653589793,
                20.0, -20.0, 88.5, 89.0, -104.0, 710.0, -746.0, 1e10, 300.0, -129.0, 65504.0, 70000.0,
                2147483648.0, 3e9, -3e9, 9.3e18, 1e20, 0.49999997, 1.0000001]
    elif arity == 2:
        vals = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, 7.0, math.inf, -math.inf, math.nan, sub, -sub, big, -big]
    else:
        vals = [0.0, -0.0, 1.0, -2.5, 0.5, math.inf, -math.inf, math.nan]
    out, seen = [], set()
    for v in vals:
        t = torch.tensor([v], dtype=torch.float64).to(gen_goldens.tdt(dt))
        key = bits(t)[0]
        if key not in seen:  # values that round to the same element in this dtype are kept once
            seen.add(key)
            out.append(t)
    return torch.cat(out)


def int_values(dt, arity):
    if dt == "bool":
        return torch.tensor([False, True])
    info = torch.iinfo(gen_goldens.tdt(dt))
    vals = [0, 1, -1, 2, -2, 7, -7, 100, info.min, info.max, info.min + 1, info.max - 1]
    if arity == 3:
        vals = [0, 1, -1, 7, info.min, info.max]
    elif arity == 2:  # no -1: PyTorch's integer division of the minimum by -1 traps (SIGFPE)
        vals = [0, 1, -2, 2, 7, -7, info.min, info.max]
    out = []
    for v in vals:
        if info.min <= v <= info.max and v not in out:
            out.append(v)
    return torch.tensor(out, dtype=gen_goldens.tdt(dt))


def special_values(dt, arity):
    return int_values(dt, arity) if dt in ("i64", "i32", "i16", "i8", "u8", "bool") else float_values(dt, arity)


# ---- encoding: each element as the hex digits of its bits (exact for NaN payloads and signed zeros) ------

BITS_VIEW = {"f32": "i32", "f64": "i64", "f16": "i16", "bf16": "i16"}
WIDTH = {"f32": 8, "f64": 16, "f16": 4, "bf16": 4, "i64": 16, "i32": 8, "i16": 4, "i8": 2, "u8": 2, "bool": 2}


def bits(t):
    dt = gen_goldens.dt_name(t.dtype)
    if dt in BITS_VIEW:
        raw = t.contiguous().view(gen_goldens.tdt(BITS_VIEW[dt])).tolist()
    elif dt == "bool":
        raw = [int(v) for v in t.tolist()]
    else:
        raw = t.tolist()
    mask = (1 << (4 * WIDTH[dt])) - 1
    return [format(v & mask, "0{}x".format(WIDTH[dt])) for v in raw]


def encode(t):
    return "".join(bits(t.reshape(-1)))


# ---- running one case -------------------------------------------------------------------------------------

def call(op, tensors, attrs):
    """aten.<op> with the tensors positionally (schema order) and the attributes by name."""
    kwargs = {}
    for k, v in attrs.items():
        kwargs[k] = gen_goldens.tdt(v) if k == "dtype" else v
    return getattr(torch.ops.aten, op.name)(*tensors, **kwargs)


def first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def run_case(op, dt, attrs):
    targs = tensor_args(op)
    arity = len(targs)
    lists = []
    for a in targs:
        adt = ARG_DTYPE.get((op.name, a.name), dt)
        lists.append((adt, special_values(adt, arity)))
    grid = list(itertools.product(*[range(len(v)) for _, v in lists]))
    n = len(grid)
    cols = [vals[torch.tensor([g[i] for g in grid], dtype=torch.long)] for i, (_, vals) in enumerate(lists)]
    case = {"op": op.name, "dtype": dt, "attrs": attrs, "input_dtypes": [d for d, _ in lists],
            "inputs": [encode(v) for _, v in lists]}
    padded_n = -(-n // PAD) * PAD
    padded = [c.repeat(padded_n // n + 1)[:padded_n].contiguous() for c in cols]
    try:
        out = call(op, padded, attrs)
        vector = out[:n]
    except Exception as e:  # noqa: BLE001  (PyTorch refuses: the whole case, or some elements, fail)
        vector, vector_error = None, first_line(e)
    scalar, errors = [], []
    for i in range(n):
        try:
            scalar.append(call(op, [c[i:i + 1].clone() for c in cols], attrs))
        except Exception as e:  # noqa: BLE001
            scalar.append(None)
            errors.append((i, first_line(e)))
    if vector is None and len(errors) == n:
        case["error"] = errors[0][1]
        return case
    ok = [s for s in scalar if s is not None]
    out_dt = gen_goldens.dt_name((vector if vector is not None else ok[0]).dtype)
    case["out_dtype"] = out_dt
    if vector is None:  # some elements raise (integer division by zero): the scalar answers are the reference
        case["vector_error"] = vector_error
        zero = torch.zeros(1, dtype=gen_goldens.tdt(out_dt))
        vector = torch.cat([s.reshape(1) if s is not None else zero for s in scalar])
    case["out"] = encode(vector)
    vb = bits(vector)
    case["scalar"] = {str(i): bits(s.reshape(1))[0] for i, s in enumerate(scalar)
                      if s is not None and bits(s.reshape(1))[0] != vb[i]}
    case["error_elements"] = [i for i, _ in errors]
    return case


def check():
    ops = pointwise_ops()
    names = {op.name for op in ops}
    unknown = set(ATTR_VARIANTS) - names
    if unknown:
        raise SystemExit(f"ATTR_VARIANTS names ops that are not pointwise rows of ops.def: {sorted(unknown)}")
    for op in ops:
        if not tensor_args(op):
            raise SystemExit(f"{op.name}: a pointwise op without tensor arguments")
        for v in variants(op):
            for k in v:
                if op.arg(k) is None:
                    raise SystemExit(f"{op.name}: variant argument '{k}' is not in its schema {op.schema}")
    print(f"ok: {len(ops)} pointwise ops: {' '.join(sorted(names))}")
    return ops


def main():
    global torch
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    ops = check()
    if args.check:
        return
    import torch as _torch
    torch = _torch
    gen_goldens.torch = torch
    torch.set_num_threads(1)
    cases, failed = [], []
    for op in ops:
        for attrs in variants(op):
            answered = 0
            for dt in DTYPES:
                try:
                    case = run_case(op, dt, attrs)
                except Exception as e:  # noqa: BLE001  (a bug here: report it, keep the other cases)
                    failed.append(f"{op.name} {attrs} {dt}: generator error: {first_line(e)}")
                    continue
                answered += "error" not in case
                cases.append(case)
            if not answered:
                failed.append(f"{op.name} {attrs}: PyTorch refused every dtype; add a variant to ATTR_VARIANTS")
    extras = reductions_of_signed_zeros()
    doc = {"torch_version": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "pad": PAD, "cases": cases, "reductions": extras}
    text = json.dumps(doc, separators=(",", ":"), sort_keys=False)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(args.out)
    differing = sum(1 for c in cases if c.get("scalar"))
    print(f"{len(cases)} cases ({sum('error' in c for c in cases)} refused by PyTorch), {differing} with vector/"
          f"scalar differences, {len(text)} bytes -> {args.out}")
    for c in cases:
        if c.get("scalar"):
            print(f"  vector != scalar: {c['op']} {c['attrs']} {c['dtype']}: {len(c['scalar'])} elements")
    if failed:
        raise SystemExit("\n".join(failed))


def reductions_of_signed_zeros():
    """amax/amin over rows holding both zeros, in either order and at either length (vector or scalar path)."""
    out = []
    for dt in ("f32", "f64"):
        for order in ([0.0, -0.0], [-0.0, 0.0]):
            for length in (2, 64):
                x = torch.tensor((order * length)[:length], dtype=gen_goldens.tdt(dt))
                out.append({"dtype": dt, "row": encode(x), "amax": encode(torch.amax(x)), "amin": encode(torch.amin(x)),
                            "maximum": encode(torch.maximum(x[0::2], x[1::2])),
                            "minimum": encode(torch.minimum(x[0::2], x[1::2]))})
    return out


if __name__ == "__main__":
    main()
