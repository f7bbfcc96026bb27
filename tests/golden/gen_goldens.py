#!/usr/bin/env python3
"""Generates kiln's golden files: inputs, PyTorch's outputs and PyTorch's gradients for every op in
src/ops/ops.def (except random ops and backward helpers), for tests/test_golden.cpp.

    CUDA_VISIBLE_DEVICES= python3 tests/golden/gen_goldens.py --out tests/golden   # needs torch + numpy
    python3 tests/golden/gen_goldens.py --check                                    # no torch needed

The op list comes from ops.def, so an op added there without a case generator here fails loudly. Each case
is a dict of kiln schema arguments (ATen names) plus the torch call that gives the reference result. The
layout of manifest.json is described in docs/golden-tests.md.
"""
import argparse
import hashlib
import json
import math
import random
import re
import shutil
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPS_DEF = REPO / "src" / "ops" / "ops.def"
SEED = 20260111
SKIPPED_KINDS = ("Random", "Backward")  # random ops have no reference values; helpers are tested via VJPs
MAX_TOTAL_BYTES = 4 * 1024 * 1024

torch = None  # imported in main(): --check runs without torch
np = None

# ---------------------------------------------------------------------------------------------------------
# ops.def and schema parsing (no torch needed)
# ---------------------------------------------------------------------------------------------------------

_ROW = re.compile(r'^KILN_OP\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*([DN])\s*,\s*"((?:[^"\\]|\\.)*)"\s*[,)]')


@dataclass
class Arg:
    name: str
    type: str  # Tensor, Tensor[], Tensor?[], Scalar, int, float, bool, int[], ScalarType, str
    optional: bool
    kwarg_only: bool
    mutated: bool
    has_default: bool


@dataclass
class Op:
    name: str
    family: str
    kind: str
    differentiable: bool
    schema: str
    args: list = field(default_factory=list)

    def arg(self, name):
        for a in self.args:
            if a.name == name:
                return a
        return None


def split_top_level(text):
    """Splits on commas that are not inside brackets or quotes."""
    parts, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_schema(schema):
    m = re.match(r"^(\w+)\((.*)\)\s*->\s*(.+)$", schema)
    if not m:
        raise ValueError(f"malformed schema: {schema}")
    args, kwarg_only = [], False
    for part in split_top_level(m.group(2)):
        if part == "*":
            kwarg_only = True
            continue
        decl, _, default = part.partition("=")
        type_str, name = decl.strip().rsplit(" ", 1)
        mutated = "!" in type_str
        type_str = re.sub(r"\(\w+!?\)", "", type_str)
        optional = False
        if type_str.endswith("?"):
            optional, type_str = True, type_str[:-1]
        if type_str == "Tensor?[]":
            type_str = "Tensor?[]"
        args.append(Arg(name, type_str, optional, kwarg_only, mutated, bool(default.strip())))
    return args


def parse_ops_def(path=OPS_DEF):
    ops = []
    for line in Path(path).read_text().splitlines():
        m = _ROW.match(line.strip())
        if m:
            name, family, kind, flags, schema = m.groups()
            schema = schema.replace('\\"', '"')
            op = Op(name, family, kind, flags == "D", schema, parse_schema(schema))
            ops.append(op)
    if not ops:
        raise SystemExit(f"no KILN_OP rows found in {path}")
    return ops


def tested_ops(ops):
    return [op for op in ops if op.kind not in SKIPPED_KINDS]


# ---------------------------------------------------------------------------------------------------------
# case generators: GENERATORS[op] is a function(ctx) yielding Case objects
# ---------------------------------------------------------------------------------------------------------

GENERATORS = {}


def gen(*names):
    def register(fn):
        for n in names:
            if n in GENERATORS:
                raise SystemExit(f"two case generators for op '{n}'")
            GENERATORS[n] = fn
        return fn
    return register


@dataclass
class Case:
    kw: dict                # kiln schema argument name -> value (tensor, list, number, list of ints, dtype, str, None)
    fn: object              # torch reference: fn(**kw) -> tensor or list of tensors
    note: str = ""
    grad: bool = True       # record gradients (when the op is differentiable and inputs are f32/f64)
    nograd: tuple = ()      # argument names PyTorch does not differentiate
    expect_error: bool = False


EDGE_VALUES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e30, -1e30, 1e-30, -1e-30, 1.0, -1.0, 0.5, -0.5, 2.5,
               -2.5, 3.0, 100.0, -7.25]
DTYPE_NAMES = ["bool", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"]


def tdt(name):
    return {"bool": torch.bool, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
            "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
            "f64": torch.float64}[name]


def dt_name(dtype):
    for n in DTYPE_NAMES:
        if tdt(n) == dtype:
            return n
    raise ValueError(f"dtype {dtype} has no kiln name")


class Ctx:
    """Random inputs drawn from one seeded stream."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.g = torch.Generator().manual_seed(seed)

    def randint(self, lo, hi):
        return self.rng.randint(lo, hi)

    def choice(self, xs):
        return self.rng.choice(xs)

    def shape(self, max_numel=48, min_ndim=1, max_ndim=4, zero=False):
        nd = self.rng.randint(min_ndim, max_ndim)
        dims = [self.rng.choice([1, 2, 3, 4, 5]) for _ in range(nd)]
        while math.prod(dims) > max_numel:
            dims[dims.index(max(dims))] -= 1
        if zero and nd:
            dims[self.rng.randrange(nd)] = 0
        return dims

    def bshape(self, shape):
        """A shape that broadcasts with `shape` (some leading dims dropped, some dims set to 1)."""
        out = list(shape[self.rng.randint(0, len(shape)):]) if shape else []
        for i in range(len(out)):
            if self.rng.random() < 0.4:
                out[i] = 1
        return out

    def bpair(self, zero=False):
        a = self.shape(zero=zero)
        b = self.bshape(a)
        return (a, b) if self.rng.random() < 0.5 else (b, a)

    def t(self, shape, dtype="f32", lo=-3.0, hi=3.0):
        """Uniform floats in [lo, hi), small ints, or random bools, as dtype."""
        if dtype == "bool":
            return torch.rand(shape, generator=self.g, dtype=torch.float64) < 0.5
        if dtype in ("u8",):
            return torch.randint(0, 11, shape, generator=self.g).to(tdt(dtype))
        if dtype in ("i8", "i16", "i32", "i64"):
            return torch.randint(int(max(lo, -100)), int(min(hi, 100)) + 1, shape, generator=self.g).to(tdt(dtype))
        x = torch.rand(shape, generator=self.g, dtype=torch.float64) * (hi - lo) + lo
        return x.to(tdt(dtype))

    def ints(self, shape, lo, hi, dtype="i64"):
        """Integers in [lo, hi]."""
        return torch.randint(lo, hi + 1, shape, generator=self.g).to(tdt(dtype))

    def edge(self, dtype="f32", shape=None):
        x = torch.tensor(EDGE_VALUES, dtype=torch.float64).to(tdt(dtype))
        return x.reshape(shape) if shape else x

    def perm(self, n):
        return torch.randperm(n, generator=self.g)


def aten(name, overload="default"):
    return getattr(getattr(torch.ops.aten, name), overload)


# ---- unary pointwise -----------------------------------------------------------------------------------

UNARY_DOMAIN = {"log": (0.1, 4), "log2": (0.1, 4), "log1p": (-0.9, 4), "sqrt": (0.1, 4), "rsqrt": (0.1, 4),
                "asin": (-0.95, 0.95), "acos": (-0.95, 0.95), "reciprocal": (0.2, 3), "tan": (-1.2, 1.2)}
UNARY_FLOAT = ["abs", "neg", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan",
               "tanh", "asin", "acos", "atan", "sinh", "cosh", "sigmoid", "relu", "gelu", "silu", "erf", "floor",
               "ceil", "round", "trunc", "sign", "reciprocal"]


def unary_fn(op):
    if op == "gelu":
        return lambda self, approximate="none": torch.nn.functional.gelu(self, approximate=approximate)
    if op == "round":
        return lambda self, decimals=0: torch.round(self, decimals=decimals)
    f = torch.nn.functional.silu if op == "silu" else getattr(torch, op)
    return lambda self: f(self)


def unary_cases(ctx, op, int_dtypes, grad=True):
    fn = unary_fn(op)
    lo, hi = UNARY_DOMAIN.get(op, (-3, 3))
    yield Case({"self": ctx.t(ctx.shape(), "f32", lo, hi)}, fn, "f32 random", grad=grad)
    yield Case({"self": ctx.t(ctx.shape(max_ndim=3), "f64", lo, hi)}, fn, "f64 random", grad=grad)
    yield Case({"self": ctx.t(ctx.shape(zero=True), "f64", lo, hi)}, fn, "0-size", grad=grad)
    yield Case({"self": ctx.t([], "f32", lo, hi)}, fn, "0-dim", grad=grad)
    for dt in ("f32", "f64", "f16"):
        yield Case({"self": ctx.edge(dt)}, fn, f"edge values {dt}", grad=False)
    yield Case({"self": ctx.t(ctx.shape(), "f16", lo, hi)}, fn, "f16")
    yield Case({"self": ctx.t(ctx.shape(), "bf16", lo, hi)}, fn, "bf16")
    for dt in int_dtypes:
        yield Case({"self": ctx.t(ctx.shape(), dt, -5, 5)}, fn, dt)


@gen(*UNARY_FLOAT)
def gen_unary_float(ctx, op):
    yield from unary_cases(ctx, op, ["i32", "i64", "u8", "bool"])
    fn = unary_fn(op)
    if op == "gelu":
        for dt in ("f32", "f64"):
            yield Case({"self": ctx.t(ctx.shape(), dt), "approximate": "tanh"}, fn, f"tanh approximation {dt}")
        yield Case({"self": ctx.edge("f32"), "approximate": "tanh"}, fn, "tanh approximation edge", grad=False)
    if op == "round":
        for dt, d in (("f32", 1), ("f64", 2), ("f64", -1), ("f32", -2)):
            yield Case({"self": ctx.t(ctx.shape(), dt, -300, 300), "decimals": d}, fn, f"decimals={d}")
        yield Case({"self": torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997], dtype=torch.float32)}, fn,
                   "ties to even")
    if op == "sign":
        yield Case({"self": torch.tensor([-0.0, 0.0, math.nan], dtype=torch.float64)}, fn, "signed zero and nan",
                   grad=False)


@gen("logical_not", "isnan", "isinf")
def gen_unary_predicate(ctx, op):
    yield from unary_cases(ctx, op, ["i32", "u8", "bool"], grad=False)


# ---- binary pointwise ----------------------------------------------------------------------------------

BINARY_ATEN = {"add": ("add", "Tensor"), "sub": ("sub", "Tensor"), "mul": ("mul", "Tensor"),
               "div": ("div", "Tensor_mode"), "remainder": ("remainder", "Tensor"),
               "pow": ("pow", "Tensor_Tensor"), "maximum": ("maximum", "default"),
               "minimum": ("minimum", "default"), "atan2": ("atan2", "default"), "eq": ("eq", "Tensor"),
               "ne": ("ne", "Tensor"), "lt": ("lt", "Tensor"), "le": ("le", "Tensor"), "gt": ("gt", "Tensor"),
               "ge": ("ge", "Tensor"), "logical_and": ("logical_and", "default"),
               "logical_or": ("logical_or", "default"), "logical_xor": ("logical_xor", "default"),
               "bitwise_and": ("bitwise_and", "Tensor"), "bitwise_or": ("bitwise_or", "Tensor"),
               "bitwise_xor": ("bitwise_xor", "Tensor")}
ARITH = ["add", "sub", "mul", "div", "remainder", "pow", "maximum", "minimum", "atan2"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]


def binary_fn(op):
    name, overload = BINARY_ATEN[op]
    f = aten(name, overload)
    if op in ("add", "sub"):
        return lambda self, other, alpha=1: f(self, other, alpha=alpha)
    if op == "div":
        return lambda self, other, rounding_mode=None: f(self, other, rounding_mode=rounding_mode)
    exponent = op == "pow"
    return (lambda self, exponent: f(self, exponent)) if exponent else (lambda self, other: f(self, other))


def binary_kw(op, a, b, **extra):
    return {"self": a, ("exponent" if op == "pow" else "other"): b, **extra}


@gen(*ARITH)
def gen_arith(ctx, op):
    fn = binary_fn(op)
    kw = lambda a, b, **e: binary_kw(op, a, b, **e)
    pos = op == "pow"  # positive bases keep pow's gradient finite
    lo = 0.2 if pos else -3
    nz = op in ("div", "remainder")  # keep divisors away from 0 in random cases
    def rhs(shape, dt):
        x = ctx.t(shape, dt, 0.3, 3) if nz else ctx.t(shape, dt, -2 if pos else -3, 2 if pos else 3)
        if nz and dt not in ("u8", "bool"):
            x = x * (ctx.t(shape, "bool").to(x.dtype) * 2 - 1) if x.dtype != torch.bool else x
        return x
    for dt in ("f32", "f64"):
        a, b = ctx.bpair()
        yield Case(kw(ctx.t(a, dt, lo, 3), rhs(b, dt)), fn, f"{dt} broadcast {a} {b}")
    a, b = ctx.bpair(zero=True)
    yield Case(kw(ctx.t(a, "f64", lo, 3), rhs(b, "f64")), fn, f"0-size broadcast {a} {b}")
    yield Case(kw(ctx.t([3, 1], "f32", lo, 3), rhs([1, 4], "f32")), fn, "outer broadcast")
    # numbers (wrapped) on either side
    yield Case(kw(ctx.t(ctx.shape(), "f32", lo, 3), 2.5), fn, "f32 tensor, float number")
    yield Case(kw(ctx.t(ctx.shape(), "f16", lo, 3), 3), fn, "f16 tensor, int number")
    yield Case(kw(ctx.t(ctx.shape(), "i32", 1, 5), 1.5), fn, "i32 tensor, float number (promotes to f32)")
    yield Case(kw(2.0 if op != "pow" else 1.5, rhs(ctx.shape(), "f64")), fn, "float number, f64 tensor")
    yield Case(kw(3, rhs(ctx.shape(), "f32")), fn, "int number, f32 tensor")
    # mixed dtypes and 0-dim tensors
    yield Case(kw(ctx.t(ctx.shape(), "f32", lo, 3), rhs([], "f64")), fn, "f32 tensor, 0-dim f64 tensor")
    yield Case(kw(ctx.t([], "f32", lo, 3), rhs([4], "f64")), fn, "0-dim f32, 1-d f64")
    yield Case(kw(ctx.t([2, 3], "f16", lo, 3), rhs([3], "bf16")), fn, "f16 with bf16 -> f32")
    yield Case(kw(ctx.t([2, 3], "i64", 1, 6), rhs([3], "f32")), fn, "i64 with f32")
    yield Case(kw(ctx.t(ctx.shape(), "f16", lo, 3), rhs(ctx.shape(max_ndim=1), "f16")), fn, "f16")
    yield Case(kw(ctx.t([4, 3], "bf16", lo, 3), rhs([3], "bf16")), fn, "bf16")
    # integers (values chosen so nothing overflows)
    if op != "atan2":
        ia = ctx.ints([3, 4], 0 if pos else -9, 4 if pos else 9, "i32")
        ib = ctx.ints([4], 0, 3, "i64") if pos else ctx.ints([4], 1, 4, "i64") * torch.tensor([1, -1, 1, -1])
        yield Case(kw(ia, ib), fn, "i32 with i64")
        yield Case(kw(ctx.ints([5], 0, 9, "u8"), ctx.ints([5], 1, 3, "i8")), fn, "u8 with i8 -> i16")
    else:
        yield Case(kw(ctx.ints([3, 4], -9, 9, "i32"), ctx.ints([4], -3, 3, "i64")), fn, "integers -> f32")
    yield Case(kw(ctx.t([4], "bool"), ctx.t([4], "bool")), fn, "bool with bool")
    # edge values: every pair
    for dt in ("f32", "f64", "f16"):
        yield Case(kw(ctx.edge(dt, [18, 1]), ctx.edge(dt, [1, 18])), fn, f"edge values {dt}", grad=False)
    # op-specific semantics
    if op in ("add", "sub"):
        yield Case(kw(ctx.t([2, 3], "f32"), ctx.t([3], "f32"), alpha=2), fn, "int alpha")
        yield Case(kw(ctx.t([2, 3], "f64"), ctx.t([2, 3], "f64"), alpha=-0.5), fn, "float alpha")
        yield Case(kw(ctx.ints([4], -9, 9, "i32"), ctx.ints([4], -9, 9, "i32"), alpha=3), fn, "i32 int alpha")
        yield Case(kw(ctx.ints([4], -9, 9, "i32"), ctx.ints([4], -9, 9, "i32"), alpha=0.5), fn,
                   "float alpha with integer tensors", expect_error=True)
        yield Case(kw(ctx.t([2, 3], "f32"), ctx.t([4], "f32")), fn, "shapes do not broadcast", expect_error=True)
    if op == "sub":
        yield Case(kw(ctx.t([3], "bool"), ctx.t([3], "bool")), fn, "bool - bool", expect_error=True)
    if op == "div":
        for mode in ("trunc", "floor"):
            yield Case(kw(ctx.t(ctx.shape(), "f32", -9, 9), rhs([1], "f32"), rounding_mode=mode), fn, f"{mode} f32")
            yield Case(kw(ctx.ints([6], -9, 9, "i64"), torch.tensor([2, -2, 3, -3, 4, -4]), rounding_mode=mode),
                       fn, f"{mode} integers")
            yield Case(kw(ctx.edge("f64", [18, 1]), ctx.edge("f64", [1, 18]), rounding_mode=mode), fn,
                       f"{mode} edge values", grad=False)
        yield Case(kw(ctx.ints([4], -9, 9, "i32"), ctx.ints([4], 1, 4, "i32")), fn, "true division of integers")
        yield Case(kw(ctx.ints([2], 1, 9, "i64"), torch.tensor([0, 1]), rounding_mode="trunc"), fn,
                   "integer division by zero", expect_error=True)
    if op == "remainder":
        yield Case(kw(ctx.ints([8], -9, 9, "i64"), torch.tensor([3, -3, 4, -4, 5, -5, 7, -7])), fn,
                   "integer remainder takes the divisor's sign")
        yield Case(kw(ctx.ints([2], 1, 9, "i64"), torch.tensor([0, 1])), fn, "integer remainder by zero",
                   expect_error=True)
    if op == "pow":
        yield Case(kw(ctx.ints([4], -4, 4, "i64"), torch.tensor([-1, 0, 1, 2])), fn,
                   "integer to a negative integer tensor power (no error, unlike a number exponent)")
        yield Case(kw(ctx.t([5], "f64", -3, 3), torch.tensor([0.0, 1.0, 2.0, 3.0, -1.0], dtype=torch.float64)), fn,
                   "negative bases, integral exponents")
        yield Case(kw(ctx.t([2, 3], "f32", 0.2, 3), 2), fn, "square")
        yield Case(kw(ctx.t([2, 3], "f32", 0.2, 3), 0.5), fn, "sqrt exponent")
    if op in ("maximum", "minimum"):
        v = torch.tensor([[-1.0, 0.0, 1.0, 1.0], [2.0, -1.0, 0.0, 3.0]], dtype=torch.float64)
        yield Case(kw(v, torch.tensor([1.0, 0.0, 1.0, -2.0], dtype=torch.float64)), fn, "ties split the gradient")
    if op == "atan2":
        z = torch.tensor([0.0, -0.0, 1.0, -1.0], dtype=torch.float64)
        yield Case(kw(z.reshape(4, 1), z.reshape(1, 4)), fn, "signed zeros", grad=False)


@gen(*COMPARE, *LOGICAL, *BITWISE)
def gen_binary_nondiff(ctx, op):
    fn = binary_fn(op)
    kw = lambda a, b: {"self": a, "other": b}
    if op in BITWISE:
        for dt in ("i32", "i64", "u8", "i8", "bool"):
            a, b = ctx.bpair()
            yield Case(kw(ctx.t(a, dt, -50, 50), ctx.t(b, dt, -50, 50)), fn, f"{dt} broadcast {a} {b}")
        yield Case(kw(ctx.ints([5], -50, 50, "i16"), ctx.ints([5], 0, 9, "u8")), fn, "i16 with u8")
        yield Case(kw(ctx.ints([5], -50, 50, "i32"), 6), fn, "int number")
        yield Case(kw(7, ctx.ints([5], -50, 50, "i64")), fn, "int number first")
        yield Case(kw(ctx.t([2, 0], "i32"), ctx.t([2, 1], "i32")), fn, "0-size")
        yield Case(kw(ctx.t([3], "f32"), ctx.t([3], "f32")), fn, "floats", expect_error=True)
        return
    for dt in ("f32", "f64", "i32", "bool", "f16", "bf16"):
        a, b = ctx.bpair()
        if op in LOGICAL:
            yield Case(kw(ctx.t(a, dt, -1, 1) if dt == "bool" else ctx.ints(a, -1, 1, "i64").to(tdt(dt)),
                          ctx.ints(b, -1, 1, "i64").to(tdt(dt))), fn, f"{dt} broadcast {a} {b}")
        else:  # small integer-valued data so that ties occur
            yield Case(kw(ctx.ints(a, -2, 2, "i64").to(tdt(dt)), ctx.ints(b, -2, 2, "i64").to(tdt(dt))), fn,
                       f"{dt} broadcast {a} {b}")
    a, b = ctx.bpair(zero=True)
    yield Case(kw(ctx.t(a, "f32"), ctx.t(b, "f32")), fn, "0-size")
    yield Case(kw(ctx.ints([6], -2, 2, "i32"), ctx.ints([6], -2, 2, "i64").to(torch.float32)), fn, "i32 with f32")
    yield Case(kw(ctx.ints([6], 0, 3, "u8"), ctx.ints([6], -2, 2, "i8")), fn, "u8 with i8")
    yield Case(kw(ctx.t([5], "f32"), 0.5), fn, "float number")
    yield Case(kw(ctx.ints([5], -2, 2, "i32"), 1), fn, "int number")
    yield Case(kw(ctx.ints([5], -2, 2, "i32"), 0.5), fn, "float number with integer tensor")
    for dt in ("f32", "f64"):
        yield Case(kw(ctx.edge(dt, [18, 1]), ctx.edge(dt, [1, 18])), fn, f"edge values {dt}")


# ---- ternary pointwise ---------------------------------------------------------------------------------

@gen("where")
def gen_where(ctx, op):
    fn = lambda condition, self, other: aten("where", "self")(condition, self, other)
    for dt in ("f32", "f64"):
        a, b = ctx.bpair()
        c = ctx.bshape(a)
        yield Case({"condition": ctx.t(c, "bool"), "self": ctx.t(a, dt), "other": ctx.t(b, dt)}, fn,
                   f"{dt} broadcast {c} {a} {b}")
    yield Case({"condition": ctx.t([2, 0], "bool"), "self": ctx.t([2, 1], "f64"), "other": ctx.t([0], "f64")}, fn,
               "0-size")
    yield Case({"condition": ctx.t([3, 4], "bool"), "self": ctx.t([3, 4], "f32"), "other": 0.0}, fn, "float number")
    yield Case({"condition": ctx.t([3, 4], "bool"), "self": 1, "other": ctx.t([4], "f64")}, fn, "int number")
    yield Case({"condition": ctx.t([5], "bool"), "self": ctx.t([5], "f32"), "other": ctx.t([5], "f64")}, fn,
               "f32 with f64")
    yield Case({"condition": ctx.t([5], "bool"), "self": ctx.t([5], "i32"), "other": ctx.t([5], "f16")}, fn,
               "i32 with f16")
    yield Case({"condition": ctx.t([5], "bool"), "self": ctx.t([5], "bf16"), "other": ctx.t([5], "bf16")}, fn, "bf16")
    yield Case({"condition": ctx.t([18], "bool"), "self": ctx.edge("f32"), "other": ctx.edge("f32").flip(0)}, fn,
               "edge values (nan in the unselected branch)")
    yield Case({"condition": ctx.ints([4], 0, 1, "u8"), "self": ctx.t([4], "f32"), "other": ctx.t([4], "f32")}, fn,
               "u8 condition (deprecated but accepted)")


@gen("clamp")
def gen_clamp(ctx, op):
    fn = lambda self, min=None, max=None: torch.clamp(self, min=min, max=max)
    yield Case({"self": ctx.t(ctx.shape(), "f32"), "min": -1.0, "max": 1.5}, fn, "f32 both bounds")
    yield Case({"self": ctx.t(ctx.shape(), "f64"), "min": 0.5}, fn, "f64 min only")
    yield Case({"self": ctx.t(ctx.shape(), "f64"), "max": 0}, fn, "int max only")
    yield Case({"self": ctx.t(ctx.shape(zero=True), "f64"), "min": 0.0}, fn, "0-size")
    yield Case({"self": ctx.t([6], "f32"), "min": 1.0, "max": -1.0}, fn, "min > max gives max")
    yield Case({"self": ctx.ints([6], -9, 9, "i32"), "min": -2, "max": 3}, fn, "i32 int bounds")
    yield Case({"self": ctx.ints([6], -9, 9, "i64"), "min": -2.5}, fn, "int tensor, float bound")
    yield Case({"self": ctx.t([6], "f16"), "min": -1, "max": 1}, fn, "f16")
    yield Case({"self": ctx.t([6], "bf16"), "min": -1, "max": 1}, fn, "bf16")
    yield Case({"self": ctx.edge("f32"), "min": -2.0, "max": 2.0}, fn, "edge values", grad=False)
    yield Case({"self": ctx.t([4], "f64"), "min": math.nan}, fn, "nan bound", grad=False)
    yield Case({"self": ctx.t([4], "f32")}, fn, "no bounds", expect_error=True)


@gen("lerp")
def gen_lerp(ctx, op):
    fn = lambda self, end, weight: torch.lerp(self, end, weight)
    for dt in ("f32", "f64"):
        a, b = ctx.bpair()
        w = ctx.bshape(a)
        yield Case({"self": ctx.t(a, dt), "end": ctx.t(a, dt), "weight": ctx.t(w, dt, 0, 1)}, fn, f"{dt} tensor weight")
    yield Case({"self": ctx.t([3, 1], "f64"), "end": ctx.t([1, 4], "f64"), "weight": 0.75}, fn, "number weight")
    yield Case({"self": ctx.t([5], "f32"), "end": ctx.t([5], "f32"), "weight": ctx.t([5], "f32", -1, 2)}, fn,
               "weights outside [0, 1]")
    yield Case({"self": ctx.t([5], "f16"), "end": ctx.t([5], "f16"), "weight": 0.3}, fn, "f16")
    yield Case({"self": ctx.t([5], "f32"), "end": ctx.t([5], "f64"), "weight": 0.5}, fn, "dtype mismatch",
               expect_error=True)
    yield Case({"self": ctx.edge("f32"), "end": ctx.edge("f32").flip(0), "weight": 0.25}, fn, "edge values",
               grad=False)


@gen("addcmul")
def gen_addcmul(ctx, op):
    fn = lambda self, tensor1, tensor2, value=1: torch.addcmul(self, tensor1, tensor2, value=value)
    for dt in ("f32", "f64"):
        a, b = ctx.bpair()
        yield Case({"self": ctx.t(ctx.bshape(a), dt), "tensor1": ctx.t(a, dt), "tensor2": ctx.t(b, dt)}, fn,
                   f"{dt} broadcast")
    yield Case({"self": ctx.t([2, 3], "f64"), "tensor1": ctx.t([2, 3], "f64"), "tensor2": ctx.t([3], "f64"),
                "value": -0.5}, fn, "float value")
    yield Case({"self": ctx.ints([4], -5, 5, "i64"), "tensor1": ctx.ints([4], -5, 5, "i64"),
                "tensor2": ctx.ints([4], -5, 5, "i64"), "value": 2}, fn, "i64 int value")
    yield Case({"self": ctx.t([4], "f16"), "tensor1": ctx.t([4], "f16"), "tensor2": ctx.t([4], "f16")}, fn, "f16")
    yield Case({"self": ctx.t([0, 2], "f32"), "tensor1": ctx.t([2], "f32"), "tensor2": ctx.t([1], "f32")}, fn,
               "0-size")


# ---- reductions ----------------------------------------------------------------------------------------

@gen("sum", "mean")
def gen_sum_mean(ctx, op):
    f = aten(op, "dim_IntList" if op == "sum" else "dim")
    fn = lambda self, dim=None, keepdim=False, dtype=None: f(self, dim, keepdim, dtype=dtype)
    yield Case({"self": ctx.t([3, 4], "f32")}, fn, "all dims")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim": [1], "keepdim": True}, fn, "dim 1 keepdim")
    yield Case({"self": ctx.t([2, 3, 4], "f32"), "dim": [0, -1]}, fn, "dims 0 and -1")
    yield Case({"self": ctx.t([2, 3], "f64"), "dim": []}, fn, "empty dim list reduces all")
    yield Case({"self": ctx.t([], "f64"), "dim": [0]}, fn, "0-dim input")
    yield Case({"self": ctx.t([2, 0, 3], "f64"), "dim": [1]}, fn, "reduce a 0-size dim")
    yield Case({"self": ctx.t([2, 0, 3], "f32"), "dim": [2], "keepdim": True}, fn, "0-size, reduce another dim")
    yield Case({"self": ctx.t([3, 5], "f32"), "dtype": torch.float64}, fn, "dtype=f64")
    yield Case({"self": ctx.t([4, 5], "f16", -1, 1), "dim": [1]}, fn, "f16")
    yield Case({"self": ctx.t([4, 5], "bf16", -1, 1)}, fn, "bf16")
    yield Case({"self": ctx.ints([3, 4], -9, 9, "i32"), "dim": [0]}, fn, "i32 input")
    yield Case({"self": ctx.t([3, 4], "bool"), "dim": [1]}, fn, "bool input")
    yield Case({"self": ctx.ints([3, 4], -9, 9, "i32"), "dtype": torch.float32}, fn, "i32 input, dtype=f32")
    yield Case({"self": ctx.edge("f32", [3, 6]), "dim": [1]}, fn, "edge values", grad=False)
    yield Case({"self": ctx.t([2, 3], "f32"), "dim": [2]}, fn, "dim out of range", expect_error=True)
    if op == "sum":
        yield Case({"self": ctx.t([3, 4], "f32"), "dtype": torch.int64}, fn, "dtype=i64 truncates")


@gen("prod")
def gen_prod(ctx, op):
    def fn(self, dim=None, keepdim=False, dtype=None):
        return torch.prod(self, dtype=dtype) if dim is None else torch.prod(self, dim, keepdim=keepdim, dtype=dtype)
    yield Case({"self": ctx.t([3, 4], "f32", 0.5, 1.5)}, fn, "all dims")
    yield Case({"self": ctx.t([2, 3, 4], "f64", -2, 2), "dim": 1, "keepdim": True}, fn, "dim 1 keepdim")
    yield Case({"self": ctx.t([3, 4], "f64"), "dim": -1}, fn, "dim -1")
    yield Case({"self": torch.tensor([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [2.0, -1.0, 0.5]], dtype=torch.float64),
                "dim": 1}, fn, "zeros: one and two per row (gradient special cases)")
    yield Case({"self": torch.tensor([1.5, 0.0, 2.0, -3.0], dtype=torch.float64)}, fn, "one zero, all dims")
    yield Case({"self": ctx.t([2, 0], "f64"), "dim": 1}, fn, "0-size gives 1")
    yield Case({"self": ctx.ints([3, 4], -3, 3, "i32"), "dim": 0}, fn, "i32 input gives i64")
    yield Case({"self": ctx.t([4], "bool")}, fn, "bool input")
    yield Case({"self": ctx.t([3, 4], "f32"), "dtype": torch.float64}, fn, "dtype=f64")
    yield Case({"self": ctx.t([6], "f16", 0.5, 1.5)}, fn, "f16")
    yield Case({"self": ctx.edge("f64", [3, 6]), "dim": 1}, fn, "edge values", grad=False)


@gen("amax", "amin")
def gen_amax(ctx, op):
    f = getattr(torch, op)
    fn = lambda self, dim=[], keepdim=False: f(self, dim, keepdim)
    yield Case({"self": ctx.t([3, 4], "f32")}, fn, "all dims (empty list)")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim": [1], "keepdim": True}, fn, "dim 1 keepdim")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim": [0, 2]}, fn, "two dims")
    yield Case({"self": ctx.ints([3, 4], -1, 1, "i64").to(torch.float64), "dim": [1]}, fn,
               "ties share the gradient evenly")
    yield Case({"self": ctx.ints([3, 4], -9, 9, "i32"), "dim": [0]}, fn, "i32")
    yield Case({"self": ctx.t([3, 4], "bool"), "dim": [1]}, fn, "bool")
    yield Case({"self": ctx.t([3, 4], "f16"), "dim": [1]}, fn, "f16")
    yield Case({"self": ctx.t([3, 4], "bf16")}, fn, "bf16")
    yield Case({"self": ctx.edge("f32", [3, 6]), "dim": [1]}, fn, "edge values (nan propagates)", grad=False)
    yield Case({"self": ctx.t([2, 0], "f32"), "dim": [0]}, fn, "0-size input, reducing a non-empty dim")
    yield Case({"self": ctx.t([2, 0], "f32"), "dim": [1]}, fn, "reduce a 0-size dim", expect_error=True)


@gen("argmax", "argmin")
def gen_argmax(ctx, op):
    f = getattr(torch, op)
    fn = lambda self, dim=None, keepdim=False: f(self, dim, keepdim)
    yield Case({"self": ctx.t([3, 4], "f32")}, fn, "all dims")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim": 1, "keepdim": True}, fn, "dim 1 keepdim")
    yield Case({"self": ctx.ints([4, 5], -1, 1, "i32"), "dim": -1}, fn, "ties pick the first index")
    yield Case({"self": ctx.edge("f32", [3, 6]), "dim": 1}, fn, "edge values (nan wins)")
    yield Case({"self": ctx.t([5], "f16")}, fn, "f16")
    yield Case({"self": ctx.t([3, 4], "bool"), "dim": 0}, fn, "bool")
    yield Case({"self": ctx.t([], "f32")}, fn, "0-dim")
    yield Case({"self": ctx.t([0, 3], "f32")}, fn, "0-size", expect_error=True)


@gen("var", "std")
def gen_var(ctx, op):
    f = getattr(torch, op)
    fn = lambda self, dim=None, correction=None, keepdim=False: f(self, dim, correction=correction, keepdim=keepdim)
    yield Case({"self": ctx.t([3, 4], "f32")}, fn, "all dims, default correction")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim": [1], "keepdim": True}, fn, "dim 1 keepdim")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim": [0, 2], "correction": 0}, fn, "correction 0")
    yield Case({"self": ctx.t([3, 5], "f64"), "dim": [1], "correction": 2}, fn, "correction 2")
    yield Case({"self": ctx.t([3, 5], "f32"), "dim": [1], "correction": 0.5}, fn, "float correction")
    yield Case({"self": ctx.t([3, 1], "f64"), "dim": [1]}, fn, "one element with correction 1 gives nan",
               grad=False)
    yield Case({"self": ctx.t([3, 0], "f64"), "dim": [1]}, fn, "0-size", grad=False)
    yield Case({"self": ctx.t([4, 3], "f16"), "dim": [0]}, fn, "f16")
    yield Case({"self": ctx.t([4, 3], "bf16"), "dim": [0]}, fn, "bf16")
    yield Case({"self": ctx.ints([4, 3], -5, 5, "i32"), "dim": [0]}, fn, "integer input", expect_error=True)
    yield Case({"self": ctx.edge("f64", [3, 6]), "dim": [1]}, fn, "edge values", grad=False)


@gen("logsumexp")
def gen_logsumexp(ctx, op):
    fn = lambda self, dim, keepdim=False: torch.logsumexp(self, dim, keepdim)
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": [1]}, fn, "f32")
    yield Case({"self": ctx.t([2, 3, 4], "f64", -50, 50), "dim": [0, 2], "keepdim": True}, fn, "f64 two dims")
    yield Case({"self": torch.tensor([[-math.inf, -math.inf], [math.inf, 1.0], [-math.inf, 0.0], [math.nan, 1.0]]),
                "dim": [1]}, fn, "infinities and nan", grad=False)
    yield Case({"self": ctx.t([3, 0], "f64"), "dim": [1]}, fn, "0-size gives -inf", grad=False)
    yield Case({"self": ctx.t([3, 4], "f16"), "dim": [1]}, fn, "f16")
    yield Case({"self": ctx.ints([3, 4], -5, 5, "i64"), "dim": [1]}, fn, "integer input")
    yield Case({"self": torch.tensor([1e30, 1e30], dtype=torch.float32), "dim": [0]}, fn,
               "huge values do not overflow")


@gen("any", "all")
def gen_any_all(ctx, op):
    f = aten(op, "dims")
    fn = lambda self, dim=None, keepdim=False: f(self, dim, keepdim)
    yield Case({"self": ctx.t([3, 4], "bool")}, fn, "bool all dims")
    yield Case({"self": ctx.t([2, 3, 4], "bool"), "dim": [1], "keepdim": True}, fn, "dim 1 keepdim")
    yield Case({"self": ctx.ints([3, 4], 0, 1, "i64").to(torch.float32), "dim": [0, 1]}, fn, "f32 two dims")
    yield Case({"self": ctx.ints([3, 4], 0, 2, "u8"), "dim": [1]}, fn, "u8 gives u8")
    yield Case({"self": ctx.ints([3, 4], 0, 1, "i32"), "dim": [1]}, fn, "i32")
    yield Case({"self": ctx.edge("f64", [3, 6]), "dim": [1]}, fn, "edge values (nan is true)")
    yield Case({"self": ctx.t([2, 0], "bool"), "dim": [1]}, fn, "0-size")
    yield Case({"self": ctx.t([2, 0], "f32")}, fn, "0-size all dims")


# ---- matrix products -----------------------------------------------------------------------------------

@gen("mm")
def gen_mm(ctx, op):
    fn = lambda self, mat2: torch.mm(self, mat2)
    for dt in ("f32", "f64"):
        n, k, m = ctx.randint(1, 5), ctx.randint(1, 5), ctx.randint(1, 5)
        yield Case({"self": ctx.t([n, k], dt), "mat2": ctx.t([k, m], dt)}, fn, f"{dt} [{n},{k}]x[{k},{m}]")
    yield Case({"self": ctx.t([3, 0], "f64"), "mat2": ctx.t([0, 2], "f64")}, fn, "k = 0 gives zeros")
    yield Case({"self": ctx.t([0, 3], "f32"), "mat2": ctx.t([3, 2], "f32")}, fn, "n = 0")
    yield Case({"self": ctx.ints([2, 3], -5, 5, "i64"), "mat2": ctx.ints([3, 2], -5, 5, "i64")}, fn, "i64")
    yield Case({"self": ctx.t([3, 4], "f16"), "mat2": ctx.t([4, 2], "f16")}, fn, "f16")
    yield Case({"self": ctx.t([3, 4], "bf16"), "mat2": ctx.t([4, 2], "bf16")}, fn, "bf16")
    yield Case({"self": ctx.edge("f64", [3, 6]), "mat2": ctx.t([6, 2], "f64")}, fn, "edge values", grad=False)
    yield Case({"self": ctx.t([2, 3], "f32"), "mat2": ctx.t([4, 2], "f32")}, fn, "inner sizes differ",
               expect_error=True)
    yield Case({"self": ctx.t([2, 3], "f32"), "mat2": ctx.t([3, 2], "f64")}, fn, "dtypes differ", expect_error=True)
    yield Case({"self": ctx.t([2, 3, 1], "f32"), "mat2": ctx.t([3, 2], "f32")}, fn, "3-d input", expect_error=True)


@gen("bmm")
def gen_bmm(ctx, op):
    fn = lambda self, mat2: torch.bmm(self, mat2)
    for dt in ("f32", "f64"):
        b, n, k, m = ctx.randint(1, 3), ctx.randint(1, 4), ctx.randint(1, 4), ctx.randint(1, 4)
        yield Case({"self": ctx.t([b, n, k], dt), "mat2": ctx.t([b, k, m], dt)}, fn, f"{dt} [{b},{n},{k}]x[{b},{k},{m}]")
    yield Case({"self": ctx.t([0, 2, 3], "f64"), "mat2": ctx.t([0, 3, 2], "f64")}, fn, "batch 0")
    yield Case({"self": ctx.t([2, 2, 0], "f64"), "mat2": ctx.t([2, 0, 3], "f64")}, fn, "k = 0")
    yield Case({"self": ctx.t([2, 3, 4], "f16"), "mat2": ctx.t([2, 4, 2], "f16")}, fn, "f16")
    yield Case({"self": ctx.t([2, 2, 3], "f32"), "mat2": ctx.t([3, 3, 2], "f32")}, fn, "batch sizes differ",
               expect_error=True)


@gen("addmm")
def gen_addmm(ctx, op):
    fn = lambda self, mat1, mat2, beta=1, alpha=1: torch.addmm(self, mat1, mat2, beta=beta, alpha=alpha)
    yield Case({"self": ctx.t([3, 2], "f32"), "mat1": ctx.t([3, 4], "f32"), "mat2": ctx.t([4, 2], "f32")}, fn, "f32")
    yield Case({"self": ctx.t([2], "f64"), "mat1": ctx.t([3, 4], "f64"), "mat2": ctx.t([4, 2], "f64"), "beta": 0.5,
                "alpha": 2}, fn, "broadcast bias, beta and alpha")
    yield Case({"self": ctx.t([1, 1], "f64"), "mat1": ctx.t([2, 3], "f64"), "mat2": ctx.t([3, 2], "f64"),
                "alpha": -1.5}, fn, "[1,1] bias")
    yield Case({"self": torch.full([2, 2], math.nan), "mat1": ctx.t([2, 3]), "mat2": ctx.t([3, 2]), "beta": 0}, fn,
               "beta = 0 ignores nan in self", grad=False)
    yield Case({"self": ctx.t([2, 2], "f64"), "mat1": ctx.t([2, 0], "f64"), "mat2": ctx.t([0, 2], "f64")}, fn, "k = 0")
    yield Case({"self": ctx.t([2], "f16"), "mat1": ctx.t([3, 4], "f16"), "mat2": ctx.t([4, 2], "f16")}, fn, "f16")
    yield Case({"self": ctx.t([3], "f32"), "mat1": ctx.t([3, 4], "f32"), "mat2": ctx.t([4, 2], "f32")}, fn,
               "bias does not broadcast", expect_error=True)


@gen("matmul")
def gen_matmul(ctx, op):
    fn = lambda self, other: torch.matmul(self, other)
    shapes = [([4], [4], "dot"), ([3, 4], [4], "matrix-vector"), ([4], [4, 2], "vector-matrix"),
              ([3, 4], [4, 2], "matrix-matrix"), ([2, 1, 3, 2], [3, 2, 2], "batched broadcast"),
              ([2, 3, 4], [4], "batched matrix-vector"), ([4], [2, 4, 3], "vector-batched matrix"),
              ([0, 3], [3, 2], "0-size"), ([2, 3, 0], [0, 2], "k = 0")]
    for i, (a, b, note) in enumerate(shapes):
        dt = "f64" if i % 2 else "f32"
        yield Case({"self": ctx.t(a, dt), "other": ctx.t(b, dt)}, fn, f"{note} {dt}")
    yield Case({"self": ctx.t([3, 4], "f16"), "other": ctx.t([4, 2], "f16")}, fn, "f16")
    yield Case({"self": ctx.ints([3, 4], -4, 4, "i64"), "other": ctx.ints([4], -4, 4, "i64")}, fn, "i64")
    yield Case({"self": ctx.t([], "f32"), "other": ctx.t([3], "f32")}, fn, "0-dim operand", expect_error=True)
    yield Case({"self": ctx.t([2, 3], "f32"), "other": ctx.t([2, 3], "f32")}, fn, "sizes differ", expect_error=True)


@gen("linear")
def gen_linear(ctx, op):
    fn = lambda input, weight, bias=None: torch.nn.functional.linear(input, weight, bias)
    yield Case({"input": ctx.t([3, 4], "f32"), "weight": ctx.t([2, 4], "f32"), "bias": ctx.t([2], "f32")}, fn, "f32")
    yield Case({"input": ctx.t([2, 3, 4], "f64"), "weight": ctx.t([5, 4], "f64"), "bias": ctx.t([5], "f64")}, fn,
               "3-d input")
    yield Case({"input": ctx.t([4], "f64"), "weight": ctx.t([3, 4], "f64")}, fn, "1-d input, no bias")
    yield Case({"input": ctx.t([3, 4], "f64"), "weight": ctx.t([2, 4], "f64"), "bias": ctx.t([], "f64")}, fn,
               "0-dim bias")
    yield Case({"input": ctx.t([0, 4], "f32"), "weight": ctx.t([2, 4], "f32"), "bias": ctx.t([2], "f32")}, fn,
               "0 rows")
    yield Case({"input": ctx.t([3, 4], "f16"), "weight": ctx.t([2, 4], "f16"), "bias": ctx.t([2], "f16")}, fn, "f16")
    yield Case({"input": ctx.t([3, 4], "f32"), "weight": ctx.t([2, 3], "f32")}, fn, "in_features differ",
               expect_error=True)


# ---- views ---------------------------------------------------------------------------------------------

@gen("view", "reshape")
def gen_view(ctx, op):
    f = getattr(torch.Tensor, op)
    fn = (lambda self, size: f(self, size)) if op == "view" else (lambda self, shape: f(self, shape))
    key = "size" if op == "view" else "shape"
    yield Case({"self": ctx.t([2, 6], "f32"), key: [3, 4]}, fn, "f32")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), key: [-1, 4]}, fn, "inferred dim")
    yield Case({"self": ctx.t([1], "f64"), key: []}, fn, "to 0-dim")
    yield Case({"self": ctx.t([], "f64"), key: [1, 1]}, fn, "from 0-dim")
    yield Case({"self": ctx.t([0, 3], "f32"), key: [3, 0, 1]}, fn, "0-size")
    yield Case({"self": ctx.ints([2, 3], -5, 5, "i32"), key: [6]}, fn, "i32")
    yield Case({"self": ctx.t([2, 3], "bf16"), key: [3, 2]}, fn, "bf16")
    yield Case({"self": ctx.t([2, 3], "f32"), key: [4, 2]}, fn, "numel differs", expect_error=True)
    yield Case({"self": ctx.t([2, 3], "f32"), key: [-1, -1]}, fn, "two inferred dims", expect_error=True)


@gen("permute")
def gen_permute(ctx, op):
    fn = lambda self, dims: torch.permute(self, dims)
    yield Case({"self": ctx.t([2, 3, 4], "f32"), "dims": [2, 0, 1]}, fn, "f32")
    yield Case({"self": ctx.t([2, 1, 3], "f64"), "dims": [-1, 0, -2]}, fn, "negative dims")
    yield Case({"self": ctx.t([], "f64"), "dims": []}, fn, "0-dim")
    yield Case({"self": ctx.t([2, 0], "f32"), "dims": [1, 0]}, fn, "0-size")
    yield Case({"self": ctx.t([2, 3], "f32"), "dims": [0, 0]}, fn, "repeated dim", expect_error=True)
    yield Case({"self": ctx.t([2, 3], "f32"), "dims": [0]}, fn, "too few dims", expect_error=True)


@gen("transpose")
def gen_transpose(ctx, op):
    fn = lambda self, dim0, dim1: torch.transpose(self, dim0, dim1)
    yield Case({"self": ctx.t([2, 3], "f32"), "dim0": 0, "dim1": 1}, fn, "f32")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim0": -1, "dim1": 0}, fn, "negative dim")
    yield Case({"self": ctx.t([3], "f64"), "dim0": 0, "dim1": 0}, fn, "same dim")
    yield Case({"self": ctx.t([], "f64"), "dim0": 0, "dim1": -1}, fn, "0-dim")
    yield Case({"self": ctx.t([2, 3], "f32"), "dim0": 0, "dim1": 2}, fn, "dim out of range", expect_error=True)


@gen("expand")
def gen_expand(ctx, op):
    fn = lambda self, size: self.expand(size)
    yield Case({"self": ctx.t([3, 1], "f32"), "size": [2, 3, 4]}, fn, "new leading dim")
    yield Case({"self": ctx.t([1, 4], "f64"), "size": [-1, 4]}, fn, "-1 keeps a size")
    yield Case({"self": ctx.t([1, 4], "f64"), "size": [3, -1]}, fn, "-1 and expand")
    yield Case({"self": ctx.t([], "f64"), "size": [2, 2]}, fn, "0-dim")
    yield Case({"self": ctx.t([1], "f64"), "size": [0]}, fn, "to 0-size")
    yield Case({"self": ctx.t([3], "f32"), "size": [2, 4]}, fn, "size mismatch", expect_error=True)


@gen("slice")
def gen_slice(ctx, op):
    f = aten("slice", "Tensor")
    fn = lambda self, dim=0, start=None, end=None, step=1: f(self, dim, start, end, step)
    yield Case({"self": ctx.t([5, 3], "f32"), "dim": 0, "start": 1, "end": 4}, fn, "f32")
    yield Case({"self": ctx.t([3, 7], "f64"), "dim": 1, "start": -5, "end": None, "step": 2}, fn, "negative start, step 2")
    yield Case({"self": ctx.t([6], "f64"), "start": 2, "end": 100}, fn, "end past the size clamps")
    yield Case({"self": ctx.t([6], "f64"), "start": 4, "end": 2}, fn, "start > end gives 0 elements")
    yield Case({"self": ctx.t([6], "f64"), "start": -100, "end": -1, "step": 3}, fn, "negative bounds")
    yield Case({"self": ctx.t([6], "f32"), "step": 0}, fn, "step 0", expect_error=True)


@gen("select")
def gen_select(ctx, op):
    fn = lambda self, dim, index: torch.select(self, dim, index)
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": 1, "index": 2}, fn, "f32")
    yield Case({"self": ctx.t([3, 4, 2], "f64"), "dim": -1, "index": -1}, fn, "negative index")
    yield Case({"self": ctx.t([3], "f64"), "dim": 0, "index": 0}, fn, "to 0-dim")
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": 0, "index": 3}, fn, "index out of range", expect_error=True)


@gen("squeeze")
def gen_squeeze(ctx, op):
    fn = lambda self, dim=None: torch.squeeze(self) if dim is None else torch.squeeze(self, tuple(dim))
    yield Case({"self": ctx.t([1, 3, 1, 2], "f32")}, fn, "all size-1 dims")
    yield Case({"self": ctx.t([1, 3, 1, 2], "f64"), "dim": [0]}, fn, "one dim")
    yield Case({"self": ctx.t([1, 3, 1, 2], "f64"), "dim": [0, -2, 1]}, fn, "several dims, one not size 1")
    yield Case({"self": ctx.t([1], "f64")}, fn, "to 0-dim")
    yield Case({"self": ctx.t([], "f64"), "dim": [0]}, fn, "0-dim")
    yield Case({"self": ctx.t([1, 0], "f32")}, fn, "0-size")
    yield Case({"self": ctx.t([2, 3], "f32"), "dim": [2]}, fn, "dim out of range", expect_error=True)


@gen("unsqueeze")
def gen_unsqueeze(ctx, op):
    fn = lambda self, dim: torch.unsqueeze(self, dim)
    yield Case({"self": ctx.t([2, 3], "f32"), "dim": 1}, fn, "f32")
    yield Case({"self": ctx.t([2, 3], "f64"), "dim": -1}, fn, "dim -1 appends")
    yield Case({"self": ctx.t([2, 3], "f64"), "dim": 2}, fn, "dim = ndim")
    yield Case({"self": ctx.t([], "f64"), "dim": 0}, fn, "0-dim")
    yield Case({"self": ctx.t([2, 3], "f32"), "dim": 3}, fn, "dim out of range", expect_error=True)


@gen("as_strided")
def gen_as_strided(ctx, op):
    fn = lambda self, size, stride, storage_offset=None: torch.as_strided(self, size, stride, storage_offset)
    yield Case({"self": ctx.t([8], "f32"), "size": [2, 2], "stride": [1, 2], "storage_offset": 1}, fn, "transposed window")
    yield Case({"self": ctx.t([3, 4], "f64"), "size": [3, 3], "stride": [1, 1]}, fn, "overlapping windows")
    yield Case({"self": ctx.t([6], "f64"), "size": [4], "stride": [0]}, fn, "stride 0")
    yield Case({"self": ctx.t([6], "f64"), "size": [0, 3], "stride": [3, 1]}, fn, "0-size")
    yield Case({"self": ctx.t([4], "f32"), "size": [3], "stride": [2]}, fn, "out of bounds", expect_error=True)


@gen("diagonal")
def gen_diagonal(ctx, op):
    fn = lambda self, offset=0, dim1=0, dim2=1: torch.diagonal(self, offset, dim1, dim2)
    yield Case({"self": ctx.t([3, 4], "f32")}, fn, "main diagonal")
    yield Case({"self": ctx.t([3, 4], "f64"), "offset": 1}, fn, "offset 1")
    yield Case({"self": ctx.t([3, 4], "f64"), "offset": -2}, fn, "offset -2")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "offset": 0, "dim1": 2, "dim2": 1}, fn, "dims 2, 1")
    yield Case({"self": ctx.t([3, 4], "f64"), "offset": 5}, fn, "offset past the end gives 0 elements")
    yield Case({"self": ctx.t([3, 4], "f32"), "dim1": 1, "dim2": 1}, fn, "same dims", expect_error=True)


@gen("narrow")
def gen_narrow(ctx, op):
    fn = lambda self, dim, start, length: torch.narrow(self, dim, start, length)
    yield Case({"self": ctx.t([5, 3], "f32"), "dim": 0, "start": 1, "length": 3}, fn, "f32")
    yield Case({"self": ctx.t([3, 5], "f64"), "dim": -1, "start": -2, "length": 2}, fn, "negative start")
    yield Case({"self": ctx.t([3, 5], "f64"), "dim": 1, "start": 5, "length": 0}, fn, "length 0 at the end")
    yield Case({"self": ctx.t([3, 5], "f32"), "dim": 1, "start": 3, "length": 3}, fn, "past the end",
               expect_error=True)


@gen("flatten")
def gen_flatten(ctx, op):
    fn = lambda self, start_dim=0, end_dim=-1: torch.flatten(self, start_dim, end_dim)
    yield Case({"self": ctx.t([2, 3, 4], "f32")}, fn, "all dims")
    yield Case({"self": ctx.t([2, 3, 4, 1], "f64"), "start_dim": 1, "end_dim": 2}, fn, "middle dims")
    yield Case({"self": ctx.t([], "f64")}, fn, "0-dim gives [1]")
    yield Case({"self": ctx.t([2, 0, 3], "f64"), "start_dim": 1}, fn, "0-size")
    yield Case({"self": ctx.t([2, 3], "f32"), "start_dim": 1, "end_dim": 0}, fn, "start after end", expect_error=True)


@gen("split")
def gen_split(ctx, op):
    fn = lambda self, split_size, dim=0: list(torch.split(self, split_size, dim))
    yield Case({"self": ctx.t([5, 2], "f32"), "split_size": 2}, fn, "uneven")
    yield Case({"self": ctx.t([2, 6], "f64"), "split_size": 3, "dim": -1}, fn, "even, dim -1")
    yield Case({"self": ctx.t([3], "f64"), "split_size": 5}, fn, "larger than the dim")
    yield Case({"self": ctx.t([0, 2], "f64"), "split_size": 2}, fn, "0-size")


@gen("chunk")
def gen_chunk(ctx, op):
    fn = lambda self, chunks, dim=0: list(torch.chunk(self, chunks, dim))
    yield Case({"self": ctx.t([5, 2], "f32"), "chunks": 3}, fn, "5 into 3")
    yield Case({"self": ctx.t([2, 6], "f64"), "chunks": 4, "dim": 1}, fn, "6 into 4 gives 3 chunks")
    yield Case({"self": ctx.t([2], "f64"), "chunks": 5}, fn, "more chunks than elements")
    yield Case({"self": ctx.t([3], "f32"), "chunks": 0}, fn, "0 chunks", expect_error=True)


# ---- copies and conversions ----------------------------------------------------------------------------

@gen("contiguous", "clone")
def gen_copy(ctx, op):
    fn = (lambda self: self.contiguous()) if op == "contiguous" else (lambda self: torch.clone(self))
    yield Case({"self": ctx.t(ctx.shape(), "f32")}, fn, "f32")
    yield Case({"self": ctx.t(ctx.shape(zero=True), "f64")}, fn, "0-size")
    yield Case({"self": ctx.t([], "f64")}, fn, "0-dim")
    yield Case({"self": ctx.edge("f16")}, fn, "edge values f16")
    yield Case({"self": ctx.t([3], "bool")}, fn, "bool")
    yield Case({"self": ctx.t([3], "bf16")}, fn, "bf16")


@gen("detach")
def gen_detach(ctx, op):
    # The manifest's detach cases reuse clone's files (detach returns its input's values, without history).
    fn = lambda self: self.detach()
    yield Case({"self": ctx.t(ctx.shape(), "f32")}, fn, "f32")
    yield Case({"self": ctx.t([], "f64")}, fn, "0-dim")


@gen("to")
def gen_to(ctx, op):
    fn = lambda self, dtype: self.to(dtype)
    yield Case({"self": ctx.t([2, 3], "f32"), "dtype": torch.float64}, fn, "f32 -> f64")
    yield Case({"self": ctx.t([2, 3], "f64"), "dtype": torch.float32}, fn, "f64 -> f32 rounds")
    yield Case({"self": ctx.t([2, 3], "f32"), "dtype": torch.float32}, fn, "same dtype")
    yield Case({"self": ctx.t([8], "f32", -9, 9), "dtype": torch.int32}, fn, "f32 -> i32 truncates")
    yield Case({"self": ctx.t([8], "f64", 0, 200), "dtype": torch.uint8}, fn, "f64 -> u8")
    yield Case({"self": ctx.t([8], "f32", -9, 9), "dtype": torch.int64}, fn, "f32 -> i64")
    yield Case({"self": torch.tensor([0.0, -0.0, 0.5, math.nan, -math.inf, 2.0]), "dtype": torch.bool}, fn,
               "f32 -> bool")
    yield Case({"self": torch.tensor([1e5, -1e5, 65519.0, 65520.0, 1e-8, 3.14159, math.nan]), "dtype": torch.float16},
               fn, "f32 -> f16 overflow and rounding")
    yield Case({"self": ctx.edge("f32"), "dtype": torch.bfloat16}, fn, "f32 -> bf16")
    yield Case({"self": ctx.edge("f64"), "dtype": torch.float32}, fn, "f64 -> f32 edge values")
    yield Case({"self": ctx.ints([6], -300, 300, "i64"), "dtype": torch.int8}, fn, "i64 -> i8 wraps")
    yield Case({"self": ctx.ints([6], -9, 9, "i64"), "dtype": torch.float32}, fn, "i64 -> f32")
    yield Case({"self": ctx.t([6], "bool"), "dtype": torch.float16}, fn, "bool -> f16")
    yield Case({"self": ctx.t([6], "f16"), "dtype": torch.bfloat16}, fn, "f16 -> bf16")
    yield Case({"self": ctx.t([6], "bf16"), "dtype": torch.float64}, fn, "bf16 -> f64")
    yield Case({"self": ctx.ints([6], -9, 9, "i16"), "dtype": torch.uint8}, fn, "i16 -> u8 wraps")
    yield Case({"self": ctx.t([0, 2], "f32"), "dtype": torch.float64}, fn, "0-size")


# ---- data movement -------------------------------------------------------------------------------------

@gen("cat", "stack")
def gen_cat_stack(ctx, op):
    f = getattr(torch, op)
    fn = lambda tensors, dim=0: f(tensors, dim)
    if op == "cat":
        yield Case({"tensors": [ctx.t([2, 3], "f32"), ctx.t([2, 1], "f32"), ctx.t([2, 2], "f32")], "dim": 1}, fn,
                   "f32 dim 1")
        yield Case({"tensors": [ctx.t([1, 2, 2], "f64"), ctx.t([3, 2, 2], "f64")], "dim": -3}, fn, "negative dim")
        yield Case({"tensors": [ctx.t([2, 3], "f64"), ctx.t([0], "f64"), ctx.t([1, 3], "f64")]}, fn,
                   "legacy empty 1-d tensor is skipped")
        yield Case({"tensors": [ctx.t([2, 0], "f64"), ctx.t([2, 2], "f64")], "dim": 1}, fn, "0-size part")
        yield Case({"tensors": [ctx.t([2], "f32"), ctx.t([3], "f64")]}, fn, "f32 with f64 promotes")
        yield Case({"tensors": [ctx.ints([2], -9, 9, "i32"), ctx.t([3], "f16")]}, fn, "i32 with f16")
        yield Case({"tensors": [ctx.t([2], "bool"), ctx.ints([2], 0, 9, "u8")]}, fn, "bool with u8")
        yield Case({"tensors": [ctx.t([2, 2], "bf16"), ctx.t([1, 2], "bf16")]}, fn, "bf16")
        yield Case({"tensors": [ctx.t([2, 3], "f32"), ctx.t([2, 2], "f32")]}, fn, "sizes differ off the cat dim",
                   expect_error=True)
        yield Case({"tensors": [ctx.t([], "f32"), ctx.t([], "f32")]}, fn, "0-dim inputs", expect_error=True)
    else:
        yield Case({"tensors": [ctx.t([2, 3], "f32"), ctx.t([2, 3], "f32")]}, fn, "f32 dim 0")
        yield Case({"tensors": [ctx.t([2], "f64"), ctx.t([2], "f64"), ctx.t([2], "f64")], "dim": -1}, fn, "dim -1")
        yield Case({"tensors": [ctx.t([], "f64"), ctx.t([], "f64")]}, fn, "0-dim inputs")
        yield Case({"tensors": [ctx.t([0, 2], "f64")], "dim": 2}, fn, "0-size, dim = ndim")
        yield Case({"tensors": [ctx.t([2], "f32"), ctx.ints([2], -5, 5, "i64")], "dim": 1}, fn, "f32 with i64")
        yield Case({"tensors": [ctx.t([2, 3], "f32"), ctx.t([3, 2], "f32")]}, fn, "shapes differ", expect_error=True)


@gen("repeat")
def gen_repeat(ctx, op):
    fn = lambda self, repeats: self.repeat(repeats)
    yield Case({"self": ctx.t([2, 3], "f32"), "repeats": [2, 1]}, fn, "f32")
    yield Case({"self": ctx.t([2, 3], "f64"), "repeats": [2, 1, 2]}, fn, "extra leading dim")
    yield Case({"self": ctx.t([], "f64"), "repeats": [3]}, fn, "0-dim")
    yield Case({"self": ctx.t([2], "f64"), "repeats": [0, 2]}, fn, "repeat 0")
    yield Case({"self": ctx.ints([2], -5, 5, "i32"), "repeats": [3]}, fn, "i32")
    yield Case({"self": ctx.t([2, 3], "f32"), "repeats": [2]}, fn, "fewer repeats than dims", expect_error=True)


@gen("flip")
def gen_flip(ctx, op):
    fn = lambda self, dims: torch.flip(self, dims)
    yield Case({"self": ctx.t([2, 3, 4], "f32"), "dims": [0, 2]}, fn, "f32")
    yield Case({"self": ctx.t([2, 3], "f64"), "dims": [-1]}, fn, "negative dim")
    yield Case({"self": ctx.t([2, 3], "f64"), "dims": []}, fn, "no dims")
    yield Case({"self": ctx.t([0, 3], "f64"), "dims": [1]}, fn, "0-size")
    yield Case({"self": ctx.t([3], "bool"), "dims": [0]}, fn, "bool")
    yield Case({"self": ctx.t([2, 3], "f32"), "dims": [0, 0]}, fn, "repeated dim", expect_error=True)


@gen("roll")
def gen_roll(ctx, op):
    fn = lambda self, shifts, dims=[]: torch.roll(self, shifts, dims)
    yield Case({"self": ctx.t([2, 3], "f32"), "shifts": [1]}, fn, "no dims rolls the flattened tensor")
    yield Case({"self": ctx.t([3, 4], "f64"), "shifts": [-1, 6], "dims": [0, 1]}, fn, "two dims, large shift")
    yield Case({"self": ctx.t([3, 4], "f64"), "shifts": [2], "dims": [-1]}, fn, "negative dim")
    yield Case({"self": ctx.t([0, 4], "f64"), "shifts": [1], "dims": [1]}, fn, "0-size")
    yield Case({"self": ctx.t([3, 4], "f32"), "shifts": [1, 2], "dims": [0]}, fn, "shifts and dims differ in length",
               expect_error=True)


@gen("tril", "triu")
def gen_tri(ctx, op):
    f = getattr(torch, op)
    fn = lambda self, diagonal=0: f(self, diagonal)
    yield Case({"self": ctx.t([3, 4], "f32")}, fn, "f32")
    yield Case({"self": ctx.t([2, 3, 3], "f64"), "diagonal": 1}, fn, "batched, diagonal 1")
    yield Case({"self": ctx.t([4, 3], "f64"), "diagonal": -2}, fn, "diagonal -2")
    yield Case({"self": ctx.t([3, 4], "f64"), "diagonal": 10}, fn, "diagonal past the end")
    yield Case({"self": ctx.ints([3, 3], -5, 5, "i32")}, fn, "i32")
    yield Case({"self": ctx.t([3, 3], "bool")}, fn, "bool")
    yield Case({"self": ctx.t([0, 3], "f32")}, fn, "0-size")
    yield Case({"self": ctx.t([3], "f32")}, fn, "1-d input", expect_error=True)


@gen("pad")
def gen_pad(ctx, op):
    fn = lambda self, pad, mode="constant", value=None: torch.nn.functional.pad(self, pad, mode=mode, value=value)
    yield Case({"self": ctx.t([2, 3], "f32"), "pad": [1, 2]}, fn, "constant zeros, last dim")
    yield Case({"self": ctx.t([2, 3], "f64"), "pad": [1, 0, 0, 2], "value": 1.5}, fn, "constant value, two dims")
    yield Case({"self": ctx.t([2, 4], "f64"), "pad": [-1, 1]}, fn, "negative pad crops")
    yield Case({"self": ctx.ints([2, 3], -5, 5, "i64"), "pad": [1, 1], "value": 7.0}, fn, "i64 constant")
    for mode, shape, pad in (("reflect", [1, 2, 4], [2, 1]), ("reflect", [1, 3, 3], [1, 1, 2, 0]),
                             ("replicate", [1, 2, 3], [2, 1]), ("replicate", [1, 2, 2, 2], [1, 0, 1, 2]),
                             ("circular", [1, 2, 4], [1, 2]), ("circular", [1, 1, 3, 3], [1, 1, 2, 0])):
        yield Case({"self": ctx.t(shape, "f64"), "pad": pad, "mode": mode}, fn, f"{mode} {shape} {pad}")
    yield Case({"self": ctx.t([1, 2, 3], "f32"), "pad": [3, 0], "mode": "reflect"}, fn, "reflect pad >= size",
               expect_error=True)
    yield Case({"self": ctx.t([2, 3], "f32"), "pad": [1, 1, 1]}, fn, "odd pad length", expect_error=True)


@gen("index_select")
def gen_index_select(ctx, op):
    fn = lambda self, dim, index: torch.index_select(self, dim, index)
    yield Case({"self": ctx.t([4, 3], "f32"), "dim": 0, "index": torch.tensor([3, 0, 3, 1])}, fn, "repeated indices")
    yield Case({"self": ctx.t([2, 5], "f64"), "dim": -1, "index": torch.tensor([4, 1], dtype=torch.int32)}, fn,
               "i32 index")
    yield Case({"self": ctx.t([2, 5], "f64"), "dim": 1, "index": torch.tensor(2)}, fn, "0-dim index")
    yield Case({"self": ctx.t([3, 2], "f64"), "dim": 0, "index": torch.zeros(0, dtype=torch.int64)}, fn, "empty index")
    yield Case({"self": ctx.t([3, 2], "f32"), "dim": 0, "index": torch.tensor([3])}, fn, "index out of range",
               expect_error=True)
    yield Case({"self": ctx.t([3, 2], "f32"), "dim": 0, "index": torch.tensor([0.0])}, fn, "float index",
               expect_error=True)


@gen("gather")
def gen_gather(ctx, op):
    fn = lambda self, dim, index: torch.gather(self, dim, index)
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": 1, "index": ctx.ints([3, 2], 0, 3)}, fn, "dim 1")
    yield Case({"self": ctx.t([3, 4], "f64"), "dim": 0, "index": ctx.ints([5, 2], 0, 2)}, fn,
               "index larger on the gather dim, smaller elsewhere")
    yield Case({"self": ctx.t([3, 4, 2], "f64"), "dim": -1, "index": ctx.ints([2, 4, 3], 0, 1)}, fn, "dim -1")
    yield Case({"self": ctx.t([3], "f64"), "dim": 0, "index": torch.zeros(0, dtype=torch.int64)}, fn, "empty index")
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": 1, "index": torch.tensor([[4]])}, fn, "index out of range",
               expect_error=True)


def unique_scatter_index(ctx, index_shape, dim, size):
    """Index with distinct targets along `dim` (duplicate targets make scatter's result unspecified)."""
    full = list(index_shape)
    full[dim] = size
    perm = torch.rand(full, generator=ctx.g).argsort(dim)
    return perm.narrow(dim, 0, index_shape[dim]).contiguous()


@gen("scatter", "scatter_add")
def gen_scatter(ctx, op):
    f = getattr(torch, op)
    fn = lambda self, dim, index, src: f(self, dim, index, src)
    unique = op == "scatter"
    def index(shape, dim, size):
        return unique_scatter_index(ctx, shape, dim, size) if unique else ctx.ints(shape, 0, size - 1)
    yield Case({"self": ctx.t([3, 5], "f32"), "dim": 1, "index": index([3, 3], 1, 5), "src": ctx.t([3, 3], "f32")},
               fn, "dim 1")
    yield Case({"self": ctx.t([4, 3], "f64"), "dim": 0, "index": index([2, 2], 0, 4), "src": ctx.t([3, 3], "f64")},
               fn, "src larger than index", grad=False)  # PyTorch's own backward rejects this case
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim": -1, "index": index([2, 2, 3], 2, 4),
                "src": ctx.t([2, 2, 3], "f64")}, fn, "dim -1")
    yield Case({"self": ctx.ints([5], -5, 5, "i64"), "dim": 0, "index": index([3], 0, 5),
                "src": ctx.ints([3], -5, 5, "i64")}, fn, "i64")
    yield Case({"self": ctx.t([3], "f64"), "dim": 0, "index": torch.zeros(0, dtype=torch.int64),
                "src": ctx.t([0], "f64")}, fn, "empty index")
    yield Case({"self": ctx.t([3], "f32"), "dim": 0, "index": torch.tensor([3]), "src": ctx.t([1], "f32")}, fn,
               "index out of range", expect_error=True)
    yield Case({"self": ctx.t([3], "f32"), "dim": 0, "index": torch.tensor([1]), "src": ctx.t([1], "f64")}, fn,
               "src dtype differs", expect_error=True)
    if not unique:
        yield Case({"self": torch.zeros(3, dtype=torch.float64), "dim": 0, "index": torch.tensor([0, 2, 0, 0, 2]),
                    "src": ctx.t([5], "f64")}, fn, "duplicate targets accumulate")


@gen("index")
def gen_index(ctx, op):
    fn = lambda self, indices: aten("index", "Tensor")(self, indices)
    yield Case({"self": ctx.t([4, 3], "f32"), "indices": [torch.tensor([3, 0, 3, -1])]}, fn,
               "one index tensor, repeats and negatives")
    yield Case({"self": ctx.t([4, 3], "f64"), "indices": [None, torch.tensor([[2, 0], [1, 1]])]}, fn,
               "x[:, idx] with 2-d idx")
    yield Case({"self": ctx.t([4, 3, 2], "f64"), "indices": [torch.tensor([[0], [3]]), torch.tensor([1, 2])]}, fn,
               "two broadcast index tensors")
    yield Case({"self": ctx.t([3, 4, 2], "f64"), "indices": [torch.tensor([0, 2]), None, torch.tensor([1, 0])]}, fn,
               "non-adjacent advanced indices move to the front")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "indices": [None, torch.tensor([0, 2]), torch.tensor([1, 3])]}, fn,
               "adjacent advanced indices stay in place")
    yield Case({"self": ctx.t([3, 4], "f64"), "indices": [ctx.t([3, 4], "bool")]}, fn, "bool mask")
    yield Case({"self": ctx.t([3, 4], "f64"), "indices": [torch.tensor([True, False, True])]}, fn, "bool mask, dim 0")
    yield Case({"self": ctx.t([3, 4], "f64"), "indices": [torch.tensor([0, 1], dtype=torch.int32)]}, fn, "i32 index")
    yield Case({"self": ctx.t([3, 4], "f64"), "indices": [torch.zeros(0, dtype=torch.int64)]}, fn, "empty index")
    yield Case({"self": ctx.t([3, 4], "f32"), "indices": [torch.tensor([3])]}, fn, "index out of range",
               expect_error=True)
    yield Case({"self": ctx.t([3, 4], "f32"), "indices": [torch.tensor([0]), torch.tensor([0]), torch.tensor([0])]},
               fn, "too many indices", expect_error=True)


@gen("index_put")
def gen_index_put(ctx, op):
    fn = lambda self, indices, values, accumulate=False: aten("index_put", "default")(self, indices, values, accumulate)
    yield Case({"self": ctx.t([4, 3], "f32"), "indices": [torch.tensor([2, 0])], "values": ctx.t([2, 3], "f32")}, fn,
               "rows")
    yield Case({"self": ctx.t([4, 3], "f64"), "indices": [torch.tensor([1, -1]), torch.tensor([2, 0])],
                "values": ctx.t([], "f64")}, fn, "points, 0-dim value broadcast")
    yield Case({"self": ctx.t([4, 3], "f64"), "indices": [torch.tensor([1, 3, 1, 1])], "values": ctx.t([4, 3], "f64"),
                "accumulate": True}, fn, "accumulate with duplicates")
    yield Case({"self": ctx.t([3, 4], "f64"), "indices": [None, torch.tensor([0, 3])], "values": ctx.t([3, 1], "f64")},
               fn, "x[:, idx] = v")
    yield Case({"self": ctx.t([3, 4], "f64"), "indices": [ctx.t([3, 4], "bool")], "values": ctx.t([1], "f64")}, fn,
               "bool mask")
    yield Case({"self": ctx.ints([5], -5, 5, "i32"), "indices": [torch.tensor([0, 4])],
                "values": ctx.ints([2], -5, 5, "i32"), "accumulate": True}, fn, "i32 accumulate")
    yield Case({"self": ctx.t([3], "f32"), "indices": [torch.tensor([3])], "values": ctx.t([1], "f32")}, fn,
               "index out of range", expect_error=True)
    yield Case({"self": ctx.t([3], "f32"), "indices": [torch.tensor([0, 1])], "values": ctx.t([3], "f32")}, fn,
               "values do not broadcast", expect_error=True)


@gen("embedding")
def gen_embedding(ctx, op):
    fn = lambda weight, indices, padding_idx=-1: aten("embedding", "default")(weight, indices, padding_idx)
    yield Case({"weight": ctx.t([5, 3], "f32"), "indices": torch.tensor([[0, 4], [4, 2]])}, fn, "2-d indices")
    yield Case({"weight": ctx.t([5, 3], "f64"), "indices": torch.tensor([1, 0, 1, 3]), "padding_idx": 1}, fn,
               "padding_idx rows get no gradient")
    yield Case({"weight": ctx.t([5, 2], "f64"), "indices": torch.tensor(3)}, fn, "0-dim index")
    yield Case({"weight": ctx.t([5, 2], "f64"), "indices": torch.tensor([1, 2], dtype=torch.int32)}, fn, "i32 indices")
    yield Case({"weight": ctx.t([5, 2], "f32"), "indices": torch.tensor([5])}, fn, "index out of range",
               expect_error=True)


# ---- creation ------------------------------------------------------------------------------------------

@gen("full")
def gen_full(ctx, op):
    fn = lambda size, fill_value, dtype=None: torch.full(size, fill_value, dtype=dtype)
    yield Case({"size": [2, 3], "fill_value": 1.5}, fn, "float fill gives f32")
    yield Case({"size": [3], "fill_value": 7}, fn, "int fill gives i64")
    yield Case({"size": [2], "fill_value": True}, fn, "bool fill gives bool")
    yield Case({"size": [], "fill_value": -0.0, "dtype": torch.float64}, fn, "0-dim f64")
    yield Case({"size": [0, 3], "fill_value": 2}, fn, "0-size")
    yield Case({"size": [2, 2], "fill_value": 2.75, "dtype": torch.int32}, fn, "float fill into i32")
    yield Case({"size": [2], "fill_value": math.inf, "dtype": torch.float16}, fn, "inf f16")
    yield Case({"size": [2], "fill_value": 1e30, "dtype": torch.bfloat16}, fn, "huge bf16")
    yield Case({"size": [-1], "fill_value": 1.0}, fn, "negative size", expect_error=True)


@gen("zeros", "ones")
def gen_zeros(ctx, op):
    f = getattr(torch, op)
    fn = lambda size, dtype=None: f(size, dtype=dtype)
    yield Case({"size": [2, 3]}, fn, "default f32")
    yield Case({"size": [], "dtype": torch.int32}, fn, "0-dim i32")
    yield Case({"size": [0, 2], "dtype": torch.float64}, fn, "0-size")
    yield Case({"size": [3], "dtype": torch.bool}, fn, "bool")
    yield Case({"size": [3], "dtype": torch.bfloat16}, fn, "bf16")


@gen("arange")
def gen_arange(ctx, op):
    fn = lambda start, end, step=1, dtype=None: torch.arange(start, end, step, dtype=dtype)
    yield Case({"start": 0, "end": 5}, fn, "ints give i64")
    yield Case({"start": 0.0, "end": 1.0, "step": 0.1}, fn, "float step gives f32 (length from double math)")
    yield Case({"start": 5, "end": -3, "step": -2}, fn, "negative step")
    yield Case({"start": -1.5, "end": 2, "step": 0.5, "dtype": torch.float64}, fn, "f64")
    yield Case({"start": 0, "end": 3.5, "step": 1, "dtype": torch.int32}, fn, "i32 from a float end")
    yield Case({"start": 1, "end": 1}, fn, "empty")
    yield Case({"start": 0, "end": 10, "step": 3, "dtype": torch.float16}, fn, "f16")
    yield Case({"start": 0, "end": 5, "step": 0}, fn, "step 0", expect_error=True)
    yield Case({"start": 0, "end": 5, "step": -1}, fn, "step with the wrong sign", expect_error=True)


@gen("linspace")
def gen_linspace(ctx, op):
    fn = lambda start, end, steps, dtype=None: torch.linspace(start, end, steps, dtype=dtype)
    yield Case({"start": 0, "end": 1, "steps": 5}, fn, "f32 default")
    yield Case({"start": -2.5, "end": 7.25, "steps": 13, "dtype": torch.float64}, fn, "f64")
    yield Case({"start": 3, "end": 3, "steps": 1}, fn, "one step")
    yield Case({"start": 0, "end": 1, "steps": 0}, fn, "zero steps")
    yield Case({"start": 0, "end": 10, "steps": 4, "dtype": torch.int64}, fn, "i64 truncates")
    yield Case({"start": 10, "end": -10, "steps": 7, "dtype": torch.int32}, fn, "decreasing i32")
    yield Case({"start": 0, "end": 1, "steps": 6, "dtype": torch.float16}, fn, "f16")
    yield Case({"start": 0, "end": 1, "steps": -1}, fn, "negative steps", expect_error=True)


@gen("eye")
def gen_eye(ctx, op):
    fn = lambda n, m=None, dtype=None: torch.eye(n, dtype=dtype) if m is None else torch.eye(n, m, dtype=dtype)
    yield Case({"n": 3}, fn, "square f32")
    yield Case({"n": 2, "m": 4, "dtype": torch.float64}, fn, "wide f64")
    yield Case({"n": 4, "m": 2, "dtype": torch.bool}, fn, "tall bool")
    yield Case({"n": 0}, fn, "0 x 0")
    yield Case({"n": 3, "dtype": torch.int64}, fn, "i64")
    yield Case({"n": -1}, fn, "negative n", expect_error=True)


@gen("full_like", "zeros_like", "ones_like")
def gen_like(ctx, op):
    if op == "full_like":
        fn = lambda self, fill_value, dtype=None: torch.full_like(self, fill_value, dtype=dtype)
        extra = lambda v: {"fill_value": v}
    else:
        f = getattr(torch, op)
        fn = lambda self, dtype=None: f(self, dtype=dtype)
        extra = lambda v: {}
    yield Case({"self": ctx.t([2, 3], "f32"), **extra(2.5)}, fn, "f32")
    yield Case({"self": ctx.ints([3], -5, 5, "i32"), **extra(2.75)}, fn, "i32 keeps its dtype")
    yield Case({"self": ctx.t([2], "f64"), **extra(-1), "dtype": torch.float16}, fn, "dtype override")
    yield Case({"self": ctx.t([0, 2], "bool"), **extra(True)}, fn, "0-size bool")
    yield Case({"self": ctx.t([], "bf16"), **extra(1e30)}, fn, "0-dim bf16")


# ---- nn ------------------------------------------------------------------------------------------------

@gen("softmax", "log_softmax")
def gen_softmax(ctx, op):
    f = getattr(torch, op)
    fn = lambda self, dim, dtype=None: f(self, dim, dtype=dtype)
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": -1}, fn, "f32 last dim")
    yield Case({"self": ctx.t([2, 3, 4], "f64", -20, 20), "dim": 1}, fn, "f64 middle dim")
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": 0, "dtype": torch.float64}, fn, "dtype=f64")
    yield Case({"self": ctx.t([], "f64"), "dim": 0}, fn, "0-dim")
    yield Case({"self": ctx.t([0, 3], "f64"), "dim": 1}, fn, "0-size")
    yield Case({"self": torch.tensor([[-math.inf, 0.0, 1.0], [-math.inf, -math.inf, -math.inf],
                                      [1e30, 0.0, -1e30], [math.inf, 0.0, 1.0], [math.nan, 0.0, 1.0]]), "dim": 1},
               fn, "infinities, all -inf row and nan", grad=False)
    yield Case({"self": ctx.t([3, 4], "f16"), "dim": 1}, fn, "f16")
    yield Case({"self": ctx.t([3, 4], "bf16"), "dim": 1}, fn, "bf16")
    yield Case({"self": ctx.t([3, 4], "f16"), "dim": 1, "dtype": torch.float32}, fn, "f16 with dtype=f32")
    yield Case({"self": ctx.ints([3, 4], -5, 5, "i64"), "dim": 1}, fn, "integer input", expect_error=True)


@gen("layer_norm")
def gen_layer_norm(ctx, op):
    fn = lambda input, normalized_shape, weight=None, bias=None, eps=1e-5: torch.nn.functional.layer_norm(
        input, normalized_shape, weight, bias, eps)
    yield Case({"input": ctx.t([3, 4], "f32"), "normalized_shape": [4], "weight": ctx.t([4], "f32"),
                "bias": ctx.t([4], "f32")}, fn, "f32 affine")
    yield Case({"input": ctx.t([2, 3, 4], "f64"), "normalized_shape": [3, 4], "weight": ctx.t([3, 4], "f64")}, fn,
               "f64 two dims, weight only")
    yield Case({"input": ctx.t([2, 5], "f64"), "normalized_shape": [5], "eps": 0.1}, fn, "no affine, eps 0.1")
    yield Case({"input": ctx.t([0, 4], "f64"), "normalized_shape": [4], "weight": ctx.t([4], "f64"),
                "bias": ctx.t([4], "f64")}, fn, "0 rows")
    yield Case({"input": torch.full([2, 3], 2.0, dtype=torch.float64), "normalized_shape": [3]}, fn,
               "constant rows")
    yield Case({"input": ctx.t([3, 4], "f16"), "normalized_shape": [4], "weight": ctx.t([4], "f16"),
                "bias": ctx.t([4], "f16")}, fn, "f16")
    yield Case({"input": ctx.t([3, 4], "bf16"), "normalized_shape": [4]}, fn, "bf16")
    yield Case({"input": ctx.t([3, 4], "f32"), "normalized_shape": [3]}, fn, "shape mismatch", expect_error=True)


@gen("rms_norm")
def gen_rms_norm(ctx, op):
    fn = lambda input, normalized_shape, weight=None, eps=None: torch.nn.functional.rms_norm(
        input, normalized_shape, weight, eps)
    yield Case({"input": ctx.t([3, 4], "f32"), "normalized_shape": [4], "weight": ctx.t([4], "f32")}, fn,
               "f32 weight, default eps")
    yield Case({"input": ctx.t([2, 3, 4], "f64"), "normalized_shape": [3, 4], "eps": 1e-3}, fn, "f64 two dims")
    yield Case({"input": ctx.t([0, 4], "f64"), "normalized_shape": [4]}, fn, "0 rows")
    yield Case({"input": torch.zeros(2, 3, dtype=torch.float64), "normalized_shape": [3]}, fn, "zero rows use eps")
    yield Case({"input": ctx.t([3, 4], "f16"), "normalized_shape": [4], "weight": ctx.t([4], "f16")}, fn, "f16")
    yield Case({"input": ctx.t([3, 4], "f32"), "normalized_shape": [3]}, fn, "shape mismatch", expect_error=True)


@gen("dropout")
def gen_dropout(ctx, op):
    fn = lambda input, p, train: torch.dropout(input, p, train)
    yield Case({"input": ctx.t([3, 4], "f32"), "p": 0.5, "train": False}, fn, "eval is the identity")
    yield Case({"input": ctx.t([3, 4], "f64"), "p": 0.0, "train": True}, fn, "p = 0 keeps everything")
    yield Case({"input": ctx.t([3, 4], "f64"), "p": 1.0, "train": True}, fn, "p = 1 zeroes everything")
    yield Case({"input": ctx.t([3, 4], "f32"), "p": 1.5, "train": True}, fn, "p > 1", expect_error=True)


REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@gen("mse_loss")
def gen_mse_loss(ctx, op):
    fn = lambda self, target, reduction=1: aten("mse_loss", "default")(self, target, reduction)
    for r in (0, 1, 2):
        dt = "f64" if r else "f32"
        yield Case({"self": ctx.t([3, 4], dt), "target": ctx.t([3, 4], dt), "reduction": r}, fn, REDUCTIONS[r])
    yield Case({"self": ctx.t([0, 3], "f64"), "target": ctx.t([0, 3], "f64")}, fn, "0-size mean is nan", grad=False)
    yield Case({"self": ctx.t([3, 4], "f16"), "target": ctx.t([3, 4], "f16")}, fn, "f16")


@gen("nll_loss")
def gen_nll_loss(ctx, op):
    # kiln's nll_loss is torch.nn.functional.nll_loss (ATen's nll_loss_nd: also [N, C, d1, ...] inputs)
    fn = lambda self, target, weight=None, reduction=1, ignore_index=-100: aten("nll_loss_nd", "default")(
        self, target, weight, reduction, ignore_index)
    ng = ("weight",)
    for r in (0, 1, 2):
        dt = "f64" if r != 1 else "f32"
        yield Case({"self": ctx.t([4, 3], dt), "target": ctx.ints([4], 0, 2), "reduction": r}, fn, REDUCTIONS[r],
                   nograd=ng)
    yield Case({"self": ctx.t([5, 3], "f64"), "target": torch.tensor([0, 2, 1, 2, 1]), "weight": ctx.t([3], "f64", 0.1, 2),
                "reduction": 1}, fn, "weighted mean", nograd=ng)
    yield Case({"self": ctx.t([4, 3], "f64"), "target": torch.tensor([0, -100, 2, 1])}, fn, "default ignore_index",
               nograd=ng)
    yield Case({"self": ctx.t([4, 3], "f64"), "target": torch.tensor([1, 1, 2, 0]), "weight": ctx.t([3], "f64", 0.1, 2),
                "ignore_index": 1, "reduction": 0}, fn, "ignore_index 1, weighted, none", nograd=ng)
    yield Case({"self": ctx.t([3], "f64"), "target": torch.tensor(2)}, fn, "1-d input, 0-dim target", nograd=ng)
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "target": ctx.ints([2, 4], 0, 2), "reduction": 2}, fn,
               "k-dim input [N, C, d]", nograd=ng)
    yield Case({"self": ctx.t([2, 3], "f64"), "target": torch.tensor([-100, -100])}, fn, "all ignored: mean is nan",
               nograd=ng, grad=False)
    yield Case({"self": ctx.t([2, 3], "f32"), "target": torch.tensor([0, 3])}, fn, "target out of range",
               expect_error=True)


@gen("cross_entropy")
def gen_cross_entropy(ctx, op):
    fn = lambda self, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0: aten(
        "cross_entropy_loss", "default")(self, target, weight, reduction, ignore_index, label_smoothing)
    ng = ("weight",)
    for r in (0, 1, 2):
        dt = "f64" if r != 1 else "f32"
        yield Case({"self": ctx.t([4, 3], dt), "target": ctx.ints([4], 0, 2), "reduction": r}, fn,
                   f"class indices, {REDUCTIONS[r]}", nograd=ng)
    yield Case({"self": ctx.t([5, 3], "f64"), "target": torch.tensor([0, 2, -100, 2, 1]),
                "weight": ctx.t([3], "f64", 0.1, 2)}, fn, "weighted, one ignored", nograd=ng)
    yield Case({"self": ctx.t([4, 3], "f64"), "target": ctx.ints([4], 0, 2), "label_smoothing": 0.1}, fn,
               "label smoothing", nograd=ng)
    yield Case({"self": ctx.t([4, 3], "f64"), "target": torch.tensor([0, 1, 1, 2]), "weight": ctx.t([3], "f64", 0.1, 2),
                "label_smoothing": 0.2, "ignore_index": 1, "reduction": 2}, fn, "smoothing, weight, ignore_index",
               nograd=ng)
    yield Case({"self": ctx.t([4, 3], "f64"), "target": torch.softmax(ctx.t([4, 3], "f64"), 1)}, fn,
               "probability targets", nograd=ng)
    yield Case({"self": ctx.t([4, 3], "f32"), "target": torch.softmax(ctx.t([4, 3], "f32"), 1), "reduction": 0,
                "label_smoothing": 0.1}, fn, "probability targets, smoothing, none", nograd=ng)
    yield Case({"self": ctx.t([2, 3, 2], "f64"), "target": ctx.ints([2, 2], 0, 2)}, fn, "k-dim input", nograd=ng)
    yield Case({"self": ctx.t([3], "f64"), "target": torch.tensor(1)}, fn, "1-d input", nograd=ng)
    yield Case({"self": ctx.t([3, 4], "f16"), "target": ctx.ints([3], 0, 3)}, fn, "f16", nograd=ng)
    yield Case({"self": ctx.t([2, 3], "f32"), "target": torch.tensor([0, 5])}, fn, "target out of range",
               expect_error=True)


@gen("batch_norm")
def gen_batch_norm(ctx, op):
    def fn(input, weight, bias, running_mean, running_var, training, momentum, eps):
        return torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, False)
    ng = ("running_mean", "running_var")
    def kw(x, c, dt, affine, stats, training, momentum=0.1, eps=1e-5):
        return {"input": x, "weight": ctx.t([c], dt) if affine else None, "bias": ctx.t([c], dt) if affine else None,
                "running_mean": ctx.t([c], dt) if stats else None,
                "running_var": ctx.t([c], dt, 0.5, 2) if stats else None, "training": training,
                "momentum": momentum, "eps": eps}
    yield Case(kw(ctx.t([4, 3], "f32"), 3, "f32", True, False, True), fn, "training, affine, [N, C]", nograd=ng)
    yield Case(kw(ctx.t([2, 3, 2, 2], "f64"), 3, "f64", True, True, True), fn, "training with running stats, 4-d",
               nograd=ng)
    yield Case(kw(ctx.t([2, 3, 4], "f64"), 3, "f64", False, True, False), fn, "eval uses running stats", nograd=ng)
    yield Case(kw(ctx.t([3, 2, 2], "f64"), 2, "f64", True, True, False, eps=0.1), fn, "eval, affine, eps 0.1",
               nograd=ng)
    yield Case(kw(ctx.t([5, 2], "f64"), 2, "f64", False, False, True), fn, "training, no affine", nograd=ng)
    yield Case(kw(ctx.t([4, 3], "f32"), 3, "f32", True, False, False), fn, "eval without running stats",
               expect_error=True)


@gen("conv2d")
def gen_conv2d(ctx, op):
    fn = lambda input, weight, bias=None, stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=1: \
        torch.nn.functional.conv2d(input, weight, bias, stride, padding, dilation, groups)
    yield Case({"input": ctx.t([1, 2, 4, 4], "f32"), "weight": ctx.t([3, 2, 3, 3], "f32"), "bias": ctx.t([3], "f32")},
               fn, "f32 3x3")
    yield Case({"input": ctx.t([2, 2, 5, 4], "f64"), "weight": ctx.t([2, 2, 2, 3], "f64"), "stride": [2, 1],
                "padding": [1, 2]}, fn, "stride and padding, no bias")
    yield Case({"input": ctx.t([1, 4, 5, 5], "f64"), "weight": ctx.t([2, 2, 2, 2], "f64"), "bias": ctx.t([2], "f64"),
                "dilation": [2, 1], "groups": 2}, fn, "dilation, groups 2")
    yield Case({"input": ctx.t([2, 3, 3], "f64"), "weight": ctx.t([1, 2, 1, 2], "f64")}, fn, "unbatched input")
    yield Case({"input": ctx.t([0, 2, 3, 3], "f64"), "weight": ctx.t([1, 2, 2, 2], "f64")}, fn, "batch 0")
    yield Case({"input": ctx.t([1, 2, 4, 4], "f16"), "weight": ctx.t([3, 2, 3, 3], "f16")}, fn, "f16")
    yield Case({"input": ctx.t([1, 2, 2, 2], "f32"), "weight": ctx.t([1, 2, 3, 3], "f32")}, fn, "kernel larger than input",
               expect_error=True)
    yield Case({"input": ctx.t([1, 3, 4, 4], "f32"), "weight": ctx.t([1, 2, 3, 3], "f32")}, fn, "channels differ",
               expect_error=True)


@gen("max_pool2d")
def gen_max_pool2d(ctx, op):
    fn = lambda self, kernel_size, stride=[], padding=[0, 0], dilation=[1, 1], ceil_mode=False: aten(
        "max_pool2d", "default")(self, kernel_size, stride, padding, dilation, ceil_mode)
    yield Case({"self": ctx.t([1, 2, 4, 4], "f32"), "kernel_size": [2, 2]}, fn, "f32 2x2, stride = kernel")
    yield Case({"self": ctx.t([1, 2, 5, 5], "f64"), "kernel_size": [3, 2], "stride": [2, 1], "padding": [1, 1]}, fn,
               "padding")
    yield Case({"self": ctx.t([1, 1, 5, 5], "f64"), "kernel_size": [2, 2], "stride": [2, 2], "ceil_mode": True}, fn,
               "ceil_mode")
    yield Case({"self": ctx.t([1, 1, 6, 5], "f64"), "kernel_size": [2, 2], "stride": [1, 1], "dilation": [2, 2]}, fn,
               "dilation")
    yield Case({"self": ctx.t([2, 4, 4], "f64"), "kernel_size": [2, 2]}, fn, "unbatched")
    yield Case({"self": torch.tensor([[[[1.0, math.nan], [0.0, 2.0]], [[-math.inf, -math.inf], [-math.inf, 5.0]]]]),
                "kernel_size": [2, 2]}, fn, "nan and -inf", grad=False)
    yield Case({"self": ctx.t([1, 1, 4, 4], "f16"), "kernel_size": [2, 2]}, fn, "f16")
    yield Case({"self": ctx.t([1, 1, 4, 4], "f32"), "kernel_size": [2, 2], "padding": [2, 2]}, fn,
               "padding larger than half the kernel", expect_error=True)


@gen("avg_pool2d")
def gen_avg_pool2d(ctx, op):
    fn = lambda self, kernel_size, stride=[], padding=[0, 0], ceil_mode=False, count_include_pad=True, \
        divisor_override=None: aten("avg_pool2d", "default")(self, kernel_size, stride, padding, ceil_mode,
                                                             count_include_pad, divisor_override)
    yield Case({"self": ctx.t([1, 2, 4, 4], "f32"), "kernel_size": [2, 2]}, fn, "f32 2x2")
    yield Case({"self": ctx.t([1, 2, 5, 5], "f64"), "kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}, fn,
               "padding counted")
    yield Case({"self": ctx.t([1, 2, 5, 5], "f64"), "kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1],
                "count_include_pad": False}, fn, "padding not counted")
    yield Case({"self": ctx.t([1, 1, 5, 5], "f64"), "kernel_size": [2, 2], "stride": [2, 2], "ceil_mode": True}, fn,
               "ceil_mode")
    yield Case({"self": ctx.t([1, 1, 4, 4], "f64"), "kernel_size": [2, 2], "divisor_override": 3}, fn,
               "divisor_override")
    yield Case({"self": ctx.t([2, 4, 4], "f64"), "kernel_size": [2, 2], "stride": [1, 1]}, fn, "unbatched")
    yield Case({"self": ctx.t([1, 1, 4, 4], "f16"), "kernel_size": [2, 2]}, fn, "f16")
    yield Case({"self": ctx.t([1, 1, 4, 4], "f32"), "kernel_size": [2, 2], "divisor_override": 0}, fn,
               "divisor_override 0", expect_error=True)


# ---- scans, sorts, general convolution, resampling -------------------------------------------------------

@gen("cumsum")
def gen_cumsum(ctx, op):
    fn = lambda self, dim, dtype=None: torch.cumsum(self, dim, dtype=dtype)
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": 1}, fn, "f32 dim 1")
    yield Case({"self": ctx.t([2, 3, 4], "f64"), "dim": -3}, fn, "f64 negative dim")
    yield Case({"self": ctx.t([6], "f16", -1, 1), "dim": 0}, fn, "f16")
    yield Case({"self": ctx.t([6], "bf16", -1, 1), "dim": 0}, fn, "bf16")
    yield Case({"self": ctx.ints([3, 4], -5, 5, "i32"), "dim": 0}, fn, "i32 sums to i64")
    yield Case({"self": ctx.t([2, 4], "bool"), "dim": 1}, fn, "bool sums to i64")
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": 1, "dtype": torch.float64}, fn, "dtype=f64")
    yield Case({"self": ctx.t([], "f32"), "dim": 0}, fn, "0-dim")
    yield Case({"self": ctx.t([0, 3], "f32"), "dim": 0}, fn, "0-size")
    yield Case({"self": ctx.edge("f32", [3, 6]), "dim": 1}, fn, "edge values", grad=False)
    yield Case({"self": ctx.t([3, 4], "f32"), "dim": 2}, fn, "dim out of range", expect_error=True)


@gen("argsort")
def gen_argsort(ctx, op):
    fn = lambda self, dim=-1, descending=False: torch.argsort(self, dim=dim, descending=descending, stable=True)
    yield Case({"self": ctx.t([3, 5], "f32")}, fn, "f32 last dim")
    yield Case({"self": ctx.t([4, 3], "f64"), "dim": 0, "descending": True}, fn, "f64 dim 0 descending")
    yield Case({"self": ctx.ints([2, 8], -2, 2, "i64"), "dim": 1}, fn, "ties keep their order (stable)")
    yield Case({"self": ctx.ints([2, 8], -2, 2, "i32"), "dim": 1, "descending": True}, fn, "ties, descending")
    yield Case({"self": ctx.edge("f32", [2, 9]), "dim": 1}, fn, "edge values (nan last)")
    yield Case({"self": ctx.edge("f64", [2, 9]), "dim": 1, "descending": True}, fn, "edge values descending (nan first)")
    yield Case({"self": ctx.t([6], "f16")}, fn, "f16")
    yield Case({"self": ctx.t([], "f32")}, fn, "0-dim")
    yield Case({"self": ctx.t([0, 3], "f32"), "dim": 0}, fn, "0-size")
    yield Case({"self": ctx.t([3], "f32"), "dim": 1}, fn, "dim out of range", expect_error=True)


@gen("convolution")
def gen_convolution(ctx, op):
    fn = lambda input, weight, bias, stride, padding, dilation, transposed, output_padding, groups: aten("convolution")(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)

    def conv(x, w, b, stride, padding, dilation, transposed=False, output_padding=None, groups=1):
        return {"input": x, "weight": w, "bias": b, "stride": stride, "padding": padding, "dilation": dilation,
                "transposed": transposed, "output_padding": output_padding or [0] * len(stride), "groups": groups}
    yield Case(conv(ctx.t([2, 3, 7], "f32"), ctx.t([4, 3, 3], "f32"), ctx.t([4], "f32"), [1], [1], [1]), fn, "1-D")
    yield Case(conv(ctx.t([1, 4, 9], "f64"), ctx.t([4, 2, 2], "f64"), None, [2], [0], [2], groups=2), fn,
               "1-D strided, dilated, groups 2")
    yield Case(conv(ctx.t([1, 2, 5, 4], "f32"), ctx.t([3, 2, 3, 3], "f32"), ctx.t([3], "f32"), [1, 1], [1, 1], [1, 1]),
               fn, "2-D")
    yield Case(conv(ctx.t([2, 2, 4, 5, 4], "f32"), ctx.t([3, 2, 3, 2, 2], "f32"), ctx.t([3], "f32"), [1, 1, 1],
                    [1, 0, 1], [1, 1, 1]), fn, "3-D")
    yield Case(conv(ctx.t([1, 4, 7, 5, 5], "f64"), ctx.t([4, 2, 3, 3, 1], "f64"), None, [2, 1, 2], [1, 1, 0], [2, 1, 1],
                    groups=2), fn, "3-D strided, dilated, groups 2")
    yield Case(conv(ctx.t([1, 3, 4, 4], "f32"), ctx.t([3, 2, 3, 3], "f32"), ctx.t([2], "f32"), [2, 2], [1, 1], [1, 1],
                    True, [1, 1]), fn, "transposed 2-D, stride 2, output_padding 1")
    yield Case(conv(ctx.t([2, 4, 3, 5], "f64"), ctx.t([4, 1, 2, 3], "f64"), None, [1, 2], [0, 1], [2, 1], True,
                    [0, 0], groups=2), fn, "transposed 2-D, grouped and dilated")
    yield Case(conv(ctx.t([1, 2, 6], "f32"), ctx.t([2, 3, 4], "f32"), ctx.t([3], "f32"), [2], [1], [1], True, [0]), fn,
               "transposed 1-D")
    yield Case(conv(ctx.t([1, 2, 3, 4, 3], "f32"), ctx.t([2, 3, 2, 3, 2], "f32"), ctx.t([3], "f32"), [2, 1, 2],
                    [1, 1, 0], [1, 2, 1], True, [1, 0, 1]), fn, "transposed 3-D, strided, dilated, output_padding")
    yield Case(conv(ctx.t([1, 4, 2, 3, 2], "f64"), ctx.t([4, 1, 2, 2, 2], "f64"), None, [1, 2, 1], [0, 0, 1], [1, 1, 1],
                    True, [0, 1, 0], groups=2), fn, "transposed 3-D, grouped")
    yield Case(conv(ctx.t([1, 2, 4, 4], "f16"), ctx.t([3, 2, 3, 3], "f16"), None, [1], [1], [1]), fn,
               "f16, one value for every dim")
    yield Case(conv(ctx.t([1, 2, 4, 4], "f32"), ctx.t([2, 2, 3, 3], "f32"), None, [1, 1], [0, 0], [1, 1], True, [1, 1]),
               fn, "output_padding not below stride or dilation", expect_error=True)
    yield Case(conv(ctx.t([1, 2, 4], "f32"), ctx.t([3, 2, 3, 3], "f32"), None, [1, 1], [0, 0], [1, 1]), fn,
               "input rank differs from the weight's", expect_error=True)


@gen("upsample_nearest2d")
def gen_upsample_nearest2d(ctx, op):
    fn = lambda self, output_size, scales_h=None, scales_w=None: aten("upsample_nearest2d")(
        self, output_size, scales_h, scales_w)
    yield Case({"self": ctx.t([1, 2, 3, 4], "f32"), "output_size": [6, 8]}, fn, "f32 2x")
    yield Case({"self": ctx.t([2, 1, 5, 3], "f64"), "output_size": [3, 7]}, fn, "f64 down and up, non-integer ratios")
    yield Case({"self": ctx.t([1, 2, 3, 3], "f32"), "output_size": [4, 4], "scales_h": 1.5, "scales_w": 1.5}, fn,
               "scales 1.5")
    yield Case({"self": ctx.t([1, 1, 4, 4], "f16"), "output_size": [8, 6]}, fn, "f16")
    yield Case({"self": ctx.ints([1, 2, 2, 3], 0, 9, "u8"), "output_size": [4, 6]}, fn, "u8")
    yield Case({"self": ctx.t([0, 2, 2, 2], "f32"), "output_size": [4, 4]}, fn, "batch 0")
    yield Case({"self": ctx.t([1, 2, 3], "f32"), "output_size": [6, 6]}, fn, "3-D input", expect_error=True)
    yield Case({"self": ctx.t([1, 1, 3, 3], "f32"), "output_size": [0, 6]}, fn, "output size 0", expect_error=True)


@gen("upsample_bilinear2d")
def gen_upsample_bilinear2d(ctx, op):
    fn = lambda self, output_size, align_corners, scales_h=None, scales_w=None: aten("upsample_bilinear2d")(
        self, output_size, align_corners, scales_h, scales_w)
    yield Case({"self": ctx.t([1, 2, 3, 4], "f32"), "output_size": [6, 8], "align_corners": False}, fn, "f32 2x")
    yield Case({"self": ctx.t([2, 1, 5, 3], "f64"), "output_size": [3, 7], "align_corners": False}, fn,
               "f64 down and up")
    yield Case({"self": ctx.t([1, 2, 4, 3], "f64"), "output_size": [7, 5], "align_corners": True}, fn, "align_corners")
    yield Case({"self": ctx.t([1, 1, 3, 3], "f64"), "output_size": [1, 1], "align_corners": True}, fn,
               "align_corners to 1x1")
    yield Case({"self": ctx.t([1, 2, 3, 3], "f32"), "output_size": [4, 4], "align_corners": False, "scales_h": 1.5,
                "scales_w": 1.5}, fn, "scales 1.5")
    yield Case({"self": ctx.t([1, 1, 4, 4], "f16"), "output_size": [8, 6], "align_corners": False}, fn, "f16")
    yield Case({"self": ctx.t([1, 1, 4, 4], "bf16"), "output_size": [5, 7], "align_corners": True}, fn, "bf16")
    yield Case({"self": ctx.t([0, 2, 2, 2], "f32"), "output_size": [4, 4], "align_corners": False}, fn, "batch 0")
    yield Case({"self": ctx.t([1, 2, 3], "f32"), "output_size": [6, 6], "align_corners": False}, fn, "3-D input",
               expect_error=True)
    yield Case({"self": ctx.t([1, 1, 3, 3], "f32"), "output_size": [0, 6], "align_corners": False}, fn,
               "output size 0", expect_error=True)


# ---- in-place ------------------------------------------------------------------------------------------
# The reference clones `self` first: a leaf that requires grad cannot be written in place (the harness does
# the same with kiln's clone).

@gen("add_", "mul_")
def gen_add_mul_(ctx, op):
    if op == "add_":
        fn = lambda self, other, alpha=1: self.clone().add_(other, alpha=alpha)
    else:
        fn = lambda self, other: self.clone().mul_(other)
    extra = (lambda **e: e) if op == "add_" else (lambda **e: {})
    yield Case({"self": ctx.t([3, 4], "f32"), "other": ctx.t([4], "f32")}, fn, "f32 broadcast other")
    yield Case({"self": ctx.t([2, 3], "f64"), "other": ctx.t([2, 3], "f32"), **extra(alpha=-2)}, fn,
               "f32 other into f64 self")
    yield Case({"self": ctx.t([2, 3], "f64"), "other": 1.5}, fn, "number")
    yield Case({"self": ctx.ints([4], -5, 5, "i32"), "other": ctx.ints([4], -5, 5, "i64")}, fn, "i64 into i32")
    yield Case({"self": ctx.t([0, 3], "f64"), "other": ctx.t([3], "f64")}, fn, "0-size")
    yield Case({"self": ctx.t([4], "f16"), "other": ctx.t([4], "f32")}, fn, "f32 into f16")
    yield Case({"self": ctx.ints([4], -5, 5, "i32"), "other": ctx.t([4], "f32")}, fn, "float into int",
               expect_error=True)
    yield Case({"self": ctx.t([4], "f32"), "other": ctx.t([3, 4], "f32")}, fn, "other larger than self",
               expect_error=True)


@gen("copy_")
def gen_copy_(ctx, op):
    fn = lambda self, src: self.clone().copy_(src)
    yield Case({"self": ctx.t([3, 4], "f32"), "src": ctx.t([3, 4], "f32")}, fn, "f32")
    yield Case({"self": ctx.t([3, 4], "f64"), "src": ctx.t([4], "f64")}, fn, "broadcast src")
    yield Case({"self": ctx.t([2, 3], "f32"), "src": ctx.t([2, 3], "f64")}, fn, "f64 src into f32")
    yield Case({"self": ctx.ints([4], -5, 5, "i32"), "src": ctx.t([4], "f32", -9, 9)}, fn, "float src into i32 truncates")
    yield Case({"self": ctx.t([4], "f16"), "src": ctx.edge("f32")[:4]}, fn, "f32 src into f16")
    yield Case({"self": ctx.t([4], "bool"), "src": ctx.t([4], "f64")}, fn, "f64 into bool")
    yield Case({"self": ctx.t([4], "f32"), "src": ctx.t([3], "f32")}, fn, "src does not broadcast", expect_error=True)


@gen("fill_", "zero_")
def gen_fill_zero_(ctx, op):
    if op == "fill_":
        fn = lambda self, value: self.clone().fill_(value)
        v = lambda x: {"value": x}
    else:
        fn = lambda self: self.clone().zero_()
        v = lambda x: {}
    yield Case({"self": ctx.t([3, 4], "f32"), **v(1.5)}, fn, "f32")
    yield Case({"self": ctx.t([3], "f64"), **v(-2)}, fn, "f64 int value")
    yield Case({"self": ctx.ints([3], -5, 5, "i32"), **v(2.75)}, fn, "i32 float value truncates")
    yield Case({"self": ctx.t([3], "bool"), **v(True)}, fn, "bool")
    yield Case({"self": ctx.t([0, 2], "f64"), **v(3)}, fn, "0-size")
    yield Case({"self": ctx.t([2], "f16"), **v(1e5)}, fn, "f16 overflow")
    yield Case({"self": ctx.t([2], "bf16"), **v(math.pi)}, fn, "bf16")


# ---------------------------------------------------------------------------------------------------------
# running cases and writing files
# ---------------------------------------------------------------------------------------------------------

class Writer:
    def __init__(self, out_dir):
        self.out = Path(out_dir)
        self.data = self.out / "data"
        self.bytes = 0

    def tensor(self, name, t):
        """Saves `t` as data/<name>.npy; bf16 goes as f32 (exact). Returns the manifest reference."""
        t = t.detach().contiguous()
        dtype = dt_name(t.dtype)
        arr = (t.float() if t.dtype == torch.bfloat16 else t).numpy()
        path = self.data / f"{name}.npy"
        np.save(path, arr, allow_pickle=False)
        self.bytes += path.stat().st_size
        return {"tensor": f"{name}.npy", "dtype": dtype}


def encode_number(v):
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, float):
        if math.isnan(v):
            return {"float": "nan"}
        if math.isinf(v):
            return {"float": "inf" if v > 0 else "-inf"}
        return {"float": v}
    raise TypeError(f"not a number: {v!r}")


class ArgEncoder:
    """Turns one case's kiln arguments into manifest JSON, saving tensors; numbers flat tensor inputs."""

    def __init__(self, writer, prefix):
        self.w = writer
        self.prefix = prefix
        self.flat = []  # (flat index, kiln arg name, tensor or None)

    def tensor_ref(self, t, arg_name):
        k = len(self.flat)
        self.flat.append((k, arg_name, t if isinstance(t, torch.Tensor) else None))
        if t is None:
            return {"none": True}
        if isinstance(t, torch.Tensor):
            return self.w.tensor(f"{self.prefix}.in{k}", t)
        return encode_number(t)

    def encode(self, a, v):
        if a.type == "Tensor":
            return self.tensor_ref(v, a.name)
        if v is None:
            return {"none": True}
        if a.type in ("Tensor[]", "Tensor?[]"):
            return {"tensor_list": [self.tensor_ref(t, a.name) for t in v]}
        if a.type == "Scalar":
            return encode_number(v)
        if a.type == "int":
            assert isinstance(v, int) and not isinstance(v, bool), f"{a.name}: expected an int, got {v!r}"
            return {"int": v}
        if a.type == "float":
            return encode_number(float(v))
        if a.type == "bool":
            assert isinstance(v, bool), f"{a.name}: expected a bool, got {v!r}"
            return {"bool": v}
        if a.type == "int[]":
            return {"ints": [int(x) for x in v]}
        if a.type == "ScalarType":
            return {"dtype": dt_name(v)}
        if a.type == "str":
            return {"str": v}
        raise TypeError(f"unknown schema type {a.type}")


def as_list(out):
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out]


def is_dtype_gap(msg):
    """PyTorch's message for an op with no kernel for the input dtype (recorded as an error case too)."""
    return "not implemented for" in msg


TENSOR_TYPES = ("Tensor", "Tensor[]", "Tensor?[]")


def copy_inputs(kw):
    """Fresh copies of a case's inputs (in-place references and repeated calls must not see each other's writes)."""
    def copy(v):
        if isinstance(v, torch.Tensor):
            return v.detach().clone()
        if isinstance(v, list):
            return [copy(x) for x in v]
        return v
    return {k: copy(v) for k, v in kw.items()}


def differentiable_inputs(op, case, kw):
    """Flat input index -> floating tensor in `kw` that PyTorch differentiates. Flat indices count every Tensor
    schema argument (given or not) and every element of a Tensor[] argument, in schema order."""
    leaves, k = {}, 0
    for a in op.args:
        if a.type not in TENSOR_TYPES:
            continue
        if a.name not in kw:
            k += a.type == "Tensor"
            continue
        items = [kw[a.name]] if a.type == "Tensor" else kw[a.name]
        for t in items:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and a.name not in case.nograd:
                leaves[k] = t
            k += 1
    return leaves


def run_case(op, case, case_id, writer, ctx):
    """Returns (manifest entry, None) or (None, reason the case was dropped)."""
    unknown = set(case.kw) - {a.name for a in op.args}
    if unknown:
        raise ValueError(f"arguments {sorted(unknown)} are not in the schema {op.schema}")
    enc = ArgEncoder(writer, case_id)
    args, kwargs, positional = [], {}, True
    for a in op.args:
        if a.name not in case.kw:
            positional = False
            if a.type == "Tensor":
                enc.flat.append((len(enc.flat), a.name, None))  # kiln counts a defaulted Tensor? slot too
            continue
        j = enc.encode(a, case.kw[a.name])
        if positional and not a.kwarg_only:
            args.append(j)
        else:
            positional = False
            kwargs[a.name] = j
    entry = {"id": case_id, "op": op.name, "args": args, "kwargs": kwargs, "note": case.note}
    main = next((t for _, _, t in enc.flat if t is not None), None)
    try:
        with torch.no_grad():
            out = as_list(case.fn(**copy_inputs(case.kw)))
    except (RuntimeError, IndexError, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        entry["dtype"] = dt_name(main.dtype) if main is not None else "-"
        entry["error"] = msg
        if not case.expect_error:
            entry["note"] += " (PyTorch has no kernel for this dtype)" if is_dtype_gap(msg) else " (PyTorch raises)"
        return entry, None
    if case.expect_error:
        return None, "expected PyTorch to raise, but it returned a result"
    entry["dtype"] = dt_name(main.dtype if main is not None else out[0].dtype)
    entry["outputs"] = [writer.tensor(f"{case_id}.out{i}", o)["tensor"] for i, o in enumerate(out)]
    entry["output_dtypes"] = [dt_name(o.dtype) for o in out]
    # gradients: differentiable op, f32/f64 inputs and floating outputs
    kw = copy_inputs(case.kw)
    leaves = differentiable_inputs(op, case, kw)
    if not (op.differentiable and case.grad and leaves and all(o.is_floating_point() for o in out)
            and all(t.dtype in (torch.float32, torch.float64) for t in leaves.values())):
        return entry, None
    for t in leaves.values():
        t.requires_grad_(True)
    with torch.enable_grad():
        out = as_list(case.fn(**kw))
    if not all(o.requires_grad for o in out):
        return entry, None
    gouts = [ctx.t(list(o.shape), dt_name(o.dtype)) for o in out]
    grads = torch.autograd.grad(out, list(leaves.values()), gouts, allow_unused=True, materialize_grads=True)
    entry["grad_output"] = [writer.tensor(f"{case_id}.gout{i}", g)["tensor"] for i, g in enumerate(gouts)]
    entry["grads"] = {str(k): writer.tensor(f"{case_id}.grad{k}", g)["tensor"] for k, g in zip(leaves, grads)}
    return entry, None


def probe_wrapped_numbers():
    """torch.ops.aten turns a Python number given for a Tensor argument into a wrapped number, as kiln does."""
    a = aten("add", "Tensor")(torch.ones(2, dtype=torch.float16), 2.5)
    b = aten("add", "Tensor")(2.5, torch.ones(2, dtype=torch.int32))
    ok = a.dtype == torch.float16 and b.dtype == torch.float32
    return ok, f"f16 + 2.5 -> {a.dtype}, 2.5 + i32 -> {b.dtype}"


def generate(out_dir, ops, only=None):
    out = Path(out_dir)
    if (out / "data").exists():
        shutil.rmtree(out / "data")
    (out / "data").mkdir(parents=True)
    writer = Writer(out)
    ok, probe = probe_wrapped_numbers()
    if not ok:
        raise SystemExit(f"torch.ops.aten does not treat numbers as wrapped numbers here ({probe})")
    cases, dropped, report = [], [], []
    for op in ops:
        if only and op.name not in only:
            continue
        # one stream per op, so adding a case to one op leaves every other op's inputs unchanged
        ctx = Ctx(SEED + int(hashlib.sha256(op.name.encode()).hexdigest()[:8], 16))
        n = 0
        for i, case in enumerate(GENERATORS[op.name](ctx, op.name)):
            case_id = f"{op.name}.{i}"
            try:
                entry, reason = run_case(op, case, case_id, writer, ctx)
            except SystemExit:
                raise
            except Exception as e:  # a bug in this script: report it, keep going
                entry, reason = None, f"generator error: {type(e).__name__}: {e}"
                report.append(traceback.format_exc())
            if entry:
                cases.append(entry)
                n += 1
            else:
                dropped.append({"id": case_id, "op": op.name, "note": case.note, "reason": reason})
                report.append(f"dropped {case_id} ({case.note}): {reason}")
        if n == 0:
            report.append(f"op {op.name} has no cases")
    manifest = {
        "generator": "tests/golden/gen_goldens.py",
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "seed": SEED,
        "skipped_kinds": list(SKIPPED_KINDS),
        "wrapped_number_probe": probe,
        "cases": cases,
        "dropped": dropped,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, allow_nan=False) + "\n")
    total = writer.bytes + (out / "manifest.json").stat().st_size
    summary = (f"{len(cases)} cases for {len({c['op'] for c in cases})} ops, {len(dropped)} dropped, "
               f"{total / 1024:.0f} KiB")
    report.insert(0, summary)
    if not torch.__version__.startswith("2.11"):
        report.insert(1, f"warning: the goldens are meant to come from PyTorch 2.11, this is {torch.__version__}")
    print("\n".join(report))
    if total > MAX_TOTAL_BYTES:
        raise SystemExit(f"goldens take {total} bytes, more than the {MAX_TOTAL_BYTES} budget")
    missing = [op.name for op in ops if (not only or op.name in only) and not any(c["op"] == op.name for c in cases)]
    if missing:
        raise SystemExit(f"ops without any case: {missing}")
    if dropped:
        raise SystemExit(f"{len(dropped)} cases were dropped (listed above and in the manifest): fix their generators")


class _Stub:
    """Stands in for torch in --check: every attribute, call, index and operator gives another stub."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __getitem__(self, key):
        return self

    def __iter__(self):
        return iter([])

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __lt__ = __neg__ = __call__


def check_case_arguments(ops):
    """Runs every generator against a stub torch: each case's argument names must be in the op's schema and
    every argument without a default must be given."""
    global torch
    saved, torch = torch, _Stub()
    problems = []
    try:
        for op in tested_ops(ops):
            names = {a.name for a in op.args}
            required = {a.name for a in op.args if not a.has_default}
            for i, case in enumerate(GENERATORS[op.name](Ctx(SEED), op.name)):
                if set(case.kw) - names:
                    problems.append(f"{op.name}.{i}: unknown arguments {sorted(set(case.kw) - names)}")
                if required - set(case.kw):
                    problems.append(f"{op.name}.{i}: missing arguments {sorted(required - set(case.kw))}")
    finally:
        torch = saved
    return problems


def check_coverage(ops):
    """Every tested op has a generator and every generator names a tested op."""
    names = {op.name for op in tested_ops(ops)}
    missing = sorted(names - set(GENERATORS))
    extra = sorted(set(GENERATORS) - names)
    problems = []
    if missing:
        problems.append(f"ops without a case generator: {missing}")
    if extra:
        problems.append(f"generators for ops that are not in ops.def (or are skipped kinds): {extra}")
    return problems


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="output directory (manifest.json and data/)")
    p.add_argument("--check", action="store_true", help="only check ops.def coverage (no torch needed)")
    p.add_argument("--ops", help="comma-separated subset of ops (for debugging)")
    a = p.parse_args(argv)
    ops = parse_ops_def()
    problems = check_coverage(ops)
    if problems:
        raise SystemExit("\n".join(problems))
    if a.check:
        problems = check_case_arguments(ops)
        if problems:
            raise SystemExit("\n".join(problems))
        print(f"ok: {len(tested_ops(ops))} ops have case generators "
              f"({len(ops) - len(tested_ops(ops))} skipped: {', '.join(SKIPPED_KINDS)})")
        return
    if not a.out:
        p.error("--out is required unless --check is given")
    global torch, np
    import numpy
    import torch as torch_module
    torch, np = torch_module, numpy
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)  # deterministic reductions
    generate(a.out, tested_ops(ops), set(a.ops.split(",")) if a.ops else None)


if __name__ == "__main__":
    main()
