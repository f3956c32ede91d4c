"""Generates the op oracle: PyTorch's results for every op of lathe/ops/ops.h on random data.

    python tests/oracle/gen_ops.py --out DIR

writes DIR/ops.safetensors holding, for each case NAME,
  NAME.in.<i>   the i-th input as a CONTIGUOUS base tensor
  NAME.out.<i>  torch's i-th output (made contiguous)
and under the metadata key "cases" a JSON list with one description per case:
  {"name", "op", "attrs": {...},
   "inputs": [{"views": [...]} or null (an undefined tensor)],
   "outputs": [{"strides": [...], "offset": n}],   # torch's layout of each output
   "rtol", "atol",        # for floating outputs; integer and bool outputs compare exactly
   "check_strides",       # views: Lathe must give torch's strides and offset
   "aliases"}             # the outputs share input 0's storage (default: check_strides)
Each input's "views" is the chain of view steps that turns the stored base into the tensor the
op sees, so Lathe gets the same non-contiguous layout as torch:
  {"view": "transpose", "dims": [d0, d1]}   {"view": "permute", "dims": [...]}
  {"view": "slice", "dim": d, "start": s, "end": e, "step": k}
  {"view": "expand", "size": [...]}        {"view": "select", "dim": d, "index": i}
  {"view": "channels_last"}                (x.contiguous(memory_format=torch.channels_last))
Ops named *_ (in place) also output the mutated base of input 0 after the op, and batch_norm in
training mode outputs the updated running_mean and running_var after y.

Everything is deterministic: each case seeds torch from a CRC of its name. The C++ side is
tests/oracle/test_ops_oracle.cpp; docs/oracle.md explains how to add a case.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import zlib

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

# Tolerances (rtol, atol) by kind of op; f64 cases use F64 whatever the kind.
EW = (1e-5, 1e-6)  # elementwise f32
ACC = (1e-4, 1e-4)  # conv, matmul, linear, norms, softmax, attention, reductions
F64 = (1e-10, 1e-10)

DTYPES = {
    "f32": torch.float32,
    "f64": torch.float64,
    "i64": torch.int64,
    "i32": torch.int32,
    "b8": torch.bool,
}


class In:
    """One op input: a contiguous base tensor and the view steps applied to it."""

    def __init__(self, base: torch.Tensor, views: list | None = None):
        self.base = base.contiguous()
        self.views = views or []


def apply_views(x: torch.Tensor, views: list) -> torch.Tensor:
    for v in views:
        kind = v["view"]
        if kind == "transpose":
            x = x.transpose(*v["dims"])
        elif kind == "permute":
            x = x.permute(*v["dims"])
        elif kind == "slice":
            idx = [slice(None)] * x.dim()
            idx[v["dim"]] = slice(v.get("start", 0), v.get("end"), v.get("step", 1))
            x = x[tuple(idx)]
        elif kind == "expand":
            x = x.expand(*v["size"])
        elif kind == "select":
            x = x.select(v["dim"], v["index"])
        elif kind == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        else:
            raise ValueError(f"unknown view {kind}")
    return x


# ---- random inputs (all use the global generator, seeded per case) ----


def randn(*shape, dtype="f32", scale=1.0):
    return torch.randn(shape, dtype=DTYPES[dtype]) * scale


def rand_pos(*shape, dtype="f32", lo=0.1, hi=3.0):
    return torch.rand(shape, dtype=DTYPES[dtype]) * (hi - lo) + lo


def randint(lo, hi, *shape, dtype="i64"):
    return torch.randint(lo, hi, shape, dtype=DTYPES[dtype])


def randbool(*shape):
    return torch.rand(shape) < 0.5


def n(t):  # contiguous input, no views
    return In(t)


def tr(shape, d0=-2, d1=-1, maker=randn, **kw):
    """An input of logical `shape` made by transposing dims d0, d1 of a contiguous base."""
    shape = list(shape)
    nd = len(shape)
    a, b = d0 % nd, d1 % nd
    base_shape = list(shape)
    base_shape[a], base_shape[b] = shape[b], shape[a]
    return In(maker(*base_shape, **kw), [{"view": "transpose", "dims": [a, b]}])


def sl(shape, dim, step=2, maker=randn, **kw):
    """An input of logical `shape` made by slicing a base with a step along dim."""
    base_shape = list(shape)
    base_shape[dim] = shape[dim] * step
    return In(maker(*base_shape, **kw), [{"view": "slice", "dim": dim, "start": 0, "step": step}])


def ex(base_shape, size, maker=randn, **kw):
    """An expanded input: a base with size-1 dims broadcast (stride 0) to `size`."""
    return In(maker(*base_shape, **kw), [{"view": "expand", "size": list(size)}])


def cl(shape, maker=randn, **kw):
    """A channels-last (NHWC memory) 4-d input."""
    return In(maker(*shape, **kw), [{"view": "channels_last"}])


class Oracle:
    def __init__(self):
        self.tensors: dict[str, torch.Tensor] = {}
        self.cases: list[dict] = []
        self.fns: dict[str, tuple] = {}  # name -> (torch fn, inplace), for test_gen_ops.py

    def seed(self, name: str):
        torch.manual_seed(zlib.crc32(name.encode()))

    def case(self, name, op, make_inputs, fn, attrs=None, tol=EW, check_strides=False,
             inplace=False, extra=None):
        """Adds one case. make_inputs() builds the inputs (after seeding), fn(*xs) runs torch."""
        assert re.fullmatch(r"[A-Za-z0-9_]+", name), name
        assert all(c["name"] != name for c in self.cases), f"duplicate case {name}"
        self.seed(name)
        ins = make_inputs() if callable(make_inputs) else make_inputs
        xs = []
        for i, inp in enumerate(ins):
            if inp is None:
                xs.append(None)
                continue
            self.tensors[f"{name}.in.{i}"] = inp.base.clone()
            # torch runs on a copy so in-place ops leave the stored input untouched.
            xs.append(apply_views(inp.base.clone(), inp.views))
        base0 = None
        if inplace:  # the base of input 0, output after the op to check the write-through
            base0 = xs[0] if xs[0]._base is None else xs[0]._base
        outs = fn(*xs)
        if isinstance(outs, torch.Tensor):
            outs = [outs]
        outs = list(outs)
        if inplace:
            outs.append(base0)
        out_desc = []
        floating = False
        all_f64 = True
        for j, o in enumerate(outs):
            self.tensors[f"{name}.out.{j}"] = o.detach().contiguous().clone()
            out_desc.append({"strides": list(o.stride()), "offset": o.storage_offset(),
                             "dtype": str(o.dtype).replace("torch.", "")})
            if o.is_floating_point():
                floating = True
                all_f64 = all_f64 and o.dtype == torch.float64
        rtol, atol = F64 if (floating and all_f64) else tol
        desc = {
            "name": name,
            "op": op,
            "attrs": attrs or {},
            "inputs": [None if inp is None else {"views": inp.views} for inp in ins],
            "outputs": out_desc,
            "rtol": rtol,
            "atol": atol,
            "check_strides": check_strides,
            "aliases": check_strides,
        }
        if extra:
            desc.update(extra)
        self.cases.append(desc)
        self.fns[name] = (fn, inplace)


def scalar_value(attrs):
    v = attrs["other"]
    return int(v) if attrs.get("scalar_int") else float(v)


# ---------------------------------------------------------------------------------------------
# Cases, grouped by op family.
# ---------------------------------------------------------------------------------------------

BINARY = {
    "add": lambda a, b, alpha=1: torch.add(a, b, alpha=alpha),
    "sub": lambda a, b, alpha=1: torch.sub(a, b, alpha=alpha),
    "mul": torch.mul,
    "div": torch.div,
    "pow": torch.pow,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}
COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}


def binary_cases(o: Oracle):
    # Layout and broadcasting variants, applied to every binary op on f32.
    layouts = {
        "same": lambda mk: [n(mk(3, 4)), n(mk(3, 4))],
        "bcast_row": lambda mk: [n(mk(3, 4)), n(mk(4))],
        "bcast_col": lambda mk: [n(mk(3, 1)), n(mk(1, 4))],
        "bcast_3d": lambda mk: [n(mk(2, 1, 4)), n(mk(3, 1))],
        "scalar0d": lambda mk: [n(mk(3, 4)), n(mk())],
        "both0d": lambda mk: [n(mk()), n(mk())],
        "transposed": lambda mk: [tr([4, 5], maker=mk), n(mk(4, 5))],
        "sliced": lambda mk: [sl([3, 4], 1, maker=mk), tr([3, 4], maker=mk)],
        "expanded": lambda mk: [ex([3, 1], [3, 4], maker=mk), sl([3, 4], 0, step=3, maker=mk)],
        "empty": lambda mk: [n(mk(0, 4)), n(mk(4))],
        "size1": lambda mk: [n(mk(1, 1)), n(mk(1))],
    }
    for opname, fn in BINARY.items():
        # pow needs a positive base to stay real.
        mk = (lambda *s: rand_pos(*s, lo=0.5, hi=2.0)) if opname == "pow" else randn
        for lname, lay in layouts.items():
            o.case(f"{opname}_{lname}", opname, lambda: lay(mk), fn)
    for opname in ("add", "sub"):
        o.case(f"{opname}_alpha", opname, lambda: [n(randn(3, 4)), n(randn(4))],
               lambda a, b, f=BINARY[opname]: f(a, b, alpha=2.5), {"alpha": 2.5})
        o.case(f"{opname}_alpha_i64", opname,
               lambda: [n(randint(-9, 9, 3, 4)), n(randint(-9, 9, 4))],
               lambda a, b, f=BINARY[opname]: f(a, b, alpha=3), {"alpha": 3})
    o.case("add_f64", "add", lambda: [n(randn(3, 4, dtype="f64")), tr([3, 4], dtype="f64")],
           torch.add)
    o.case("div_f64", "div", lambda: [n(randn(5, dtype="f64")), n(rand_pos(5, dtype="f64"))],
           torch.div)

    # Type promotion, as torch defines it.
    promo = [
        ("add", "f32_i64", lambda: [n(randn(3, 4)), n(randint(-5, 5, 4))]),
        ("add", "i32_i64", lambda: [n(randint(-5, 5, 3, 4, dtype="i32")), n(randint(-5, 5, 4))]),
        ("add", "i64_i64", lambda: [n(randint(-5, 5, 3, 4)), n(randint(-5, 5, 3, 4))]),
        ("add", "i32_i32", lambda: [n(randint(-5, 5, 6, dtype="i32")),
                                    n(randint(-5, 5, 6, dtype="i32"))]),
        ("add", "b8_i32", lambda: [n(randbool(3, 4)), n(randint(-5, 5, 3, 4, dtype="i32"))]),
        ("add", "b8_b8", lambda: [n(randbool(3, 4)), n(randbool(3, 4))]),
        ("add", "f32_f64", lambda: [n(randn(3, 4)), n(randn(4, dtype="f64"))]),
        ("add", "b8_f32", lambda: [n(randbool(3, 4)), n(randn(3, 4))]),
        ("sub", "i64_f32", lambda: [n(randint(-5, 5, 3, 4)), n(randn(3, 4))]),
        ("sub", "i64_i32", lambda: [n(randint(-5, 5, 3, 4)), n(randint(-5, 5, 3, 4, dtype="i32"))]),
        ("mul", "i64_i64", lambda: [n(randint(-5, 5, 3, 4)), n(randint(-5, 5, 3, 4))]),
        ("mul", "b8_b8", lambda: [n(randbool(3, 4)), n(randbool(3, 4))]),
        ("mul", "f32_b8", lambda: [n(randn(3, 4)), n(randbool(3, 4))]),
        ("div", "i64_i64", lambda: [n(randint(-9, 9, 3, 4)), n(randint(1, 5, 3, 4))]),
        ("div", "i32_f64", lambda: [n(randint(-9, 9, 3, 4, dtype="i32")),
                                    n(rand_pos(3, 4, dtype="f64"))]),
        ("pow", "i64_i64", lambda: [n(randint(-4, 4, 3, 4)), n(randint(0, 4, 3, 4))]),
        ("pow", "f32_i64", lambda: [n(randn(3, 4)), n(randint(0, 4, 3, 4))]),
        ("maximum", "i32_f32", lambda: [n(randint(-3, 3, 3, 4, dtype="i32")), n(randn(3, 4))]),
        ("minimum", "i64_i64", lambda: [n(randint(-9, 9, 3, 4)), n(randint(-9, 9, 4))]),
        ("maximum", "b8_b8", lambda: [n(randbool(3, 4)), n(randbool(3, 4))]),
    ]
    for opname, tag, mk in promo:
        o.case(f"{opname}_{tag}", opname, mk, BINARY[opname])


def scalar_cases(o: Oracle):
    # (op, tag, torch fn, input maker, scalar, scalar_int). scalar_int marks a Python int
    # scalar in torch (an integer tensor keeps its dtype); Lathe's C++ API takes a double.
    table = [
        ("add_scalar", "f32", torch.add, lambda: n(randn(3, 4)), 2.5, False),
        ("add_scalar", "transposed", torch.add, lambda: tr([3, 4]), -1.25, False),
        ("add_scalar", "i64_float", torch.add, lambda: n(randint(-5, 5, 3, 4)), 2.5, False),
        ("add_scalar", "i64_int", torch.add, lambda: n(randint(-5, 5, 3, 4)), 3, True),
        ("add_scalar", "b8_float", torch.add, lambda: n(randbool(3, 4)), 1.5, False),
        ("add_scalar", "f64", torch.add, lambda: n(randn(5, dtype="f64")), 0.1, False),
        ("sub_scalar", "sliced", torch.sub, lambda: sl([3, 4], 1), 0.75, False),
        ("sub_scalar", "i32_int", torch.sub, lambda: n(randint(-5, 5, 3, 4, dtype="i32")), 2,
         True),
        ("rsub_scalar", "f32", torch.rsub, lambda: n(randn(3, 4)), 2.5, False),
        ("rsub_scalar", "expanded", torch.rsub, lambda: ex([1, 4], [3, 4]), -1.0, False),
        ("mul_scalar", "f32", torch.mul, lambda: n(randn(3, 4)), -3.5, False),
        ("mul_scalar", "i64_int", torch.mul, lambda: n(randint(-5, 5, 3, 4)), 3, True),
        ("mul_scalar", "i64_float", torch.mul, lambda: n(randint(-5, 5, 3, 4)), 0.5, False),
        ("mul_scalar", "0d", torch.mul, lambda: n(randn()), 2.0, False),
        ("div_scalar", "f32", torch.div, lambda: n(randn(3, 4)), 3.0, False),
        ("div_scalar", "i64_int", torch.div, lambda: n(randint(-9, 9, 3, 4)), 2, True),  # -> f32
        ("div_scalar", "empty", torch.div, lambda: n(randn(0, 3)), 2.0, False),
        ("pow_scalar", "square", torch.pow, lambda: n(rand_pos(3, 4)), 2.0, False),
        ("pow_scalar", "sqrt", torch.pow, lambda: n(rand_pos(3, 4)), 0.5, False),
        ("pow_scalar", "cube_neg_base", torch.pow, lambda: n(randn(3, 4)), 3.0, False),
        ("pow_scalar", "neg_frac_transposed", torch.pow, lambda: tr([3, 4], maker=rand_pos), -1.5,
         False),
        ("pow_scalar", "i64_int", torch.pow, lambda: n(randint(-4, 4, 3, 4)), 2, True),
    ]
    for op, tag, fn, mk, v, is_int in table:
        attrs = {"other": v, "scalar_int": is_int}
        o.case(f"{op}_{tag}", op, lambda: [mk()],
               lambda x, fn=fn, attrs=attrs: fn(x, scalar_value(attrs)), attrs)


def compare_cases(o: Oracle):
    for opname, fn in COMPARE.items():
        # Integer-valued floats so that equality actually happens.
        o.case(f"{opname}_f32", opname,
               lambda: [n(randint(-2, 3, 3, 4).float()), n(randint(-2, 3, 4).float())], fn)
        o.case(f"{opname}_i64_f32", opname,
               lambda: [tr([3, 4], maker=lambda *s: randint(-2, 3, *s)),
                        n(randint(-2, 3, 3, 4).float())], fn)
        o.case(f"{opname}_scalar", f"{opname}_scalar",
               lambda: [sl([3, 4], 0, maker=lambda *s: randint(-2, 3, *s).float())],
               lambda x, fn=fn: fn(x, 1.0), {"other": 1.0})
        o.case(f"{opname}_scalar_i64", f"{opname}_scalar",
               lambda: [n(randint(-3, 3, 5))], lambda x, fn=fn: fn(x, 0.5), {"other": 0.5})
    o.case("eq_b8", "eq", lambda: [n(randbool(3, 4)), n(randbool(3, 4))], torch.eq)
    o.case("lt_empty", "lt", lambda: [n(randn(0, 4)), n(randn(1, 4))], torch.lt)
    o.case("logical_not_f32", "logical_not",
           lambda: [n(randint(-1, 2, 3, 4).float())], torch.logical_not)
    o.case("logical_not_b8", "logical_not", lambda: [tr([3, 4], maker=randbool)],
           torch.logical_not)
    o.case("logical_not_i64", "logical_not", lambda: [n(randint(-1, 2, 5))], torch.logical_not)
    o.case("where_same", "where", lambda: [n(randbool(3, 4)), n(randn(3, 4)), n(randn(3, 4))],
           torch.where)
    o.case("where_bcast", "where", lambda: [n(randbool(3, 1)), n(randn(1, 4)), n(randn(4))],
           torch.where)
    o.case("where_nc", "where",
           lambda: [tr([4, 3], maker=randbool), sl([4, 3], 1), ex([4, 1], [4, 3])], torch.where)
    o.case("where_promote", "where",
           lambda: [n(randbool(3, 4)), n(randint(-5, 5, 3, 4)), n(randn(3, 4))], torch.where)
    o.case("where_i64", "where",
           lambda: [n(randbool(6)), n(randint(-5, 5, 6)), n(randint(-5, 5, 6))], torch.where)
    o.case("where_scalar", "where_scalar", lambda: [n(randbool(3, 4)), n(randn(3, 4))],
           lambda c, a: torch.where(c, a, 2.5), {"other": 2.5})
    o.case("where_scalar_bcast", "where_scalar", lambda: [n(randbool(3, 1)), tr([3, 4])],
           lambda c, a: torch.where(c, a, -1.0), {"other": -1.0})


UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "erf": torch.erf,
    "relu": torch.relu,
    "relu6": F.relu6,
    "hardtanh": F.hardtanh,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "gelu": F.gelu,
    "silu": F.silu,
}
POSITIVE_ONLY = {"log", "sqrt", "rsqrt"}


def unary_cases(o: Oracle):
    for opname, fn in UNARY.items():
        mk = rand_pos if opname in POSITIVE_ONLY else (lambda *s: randn(*s, scale=4.0))
        o.case(f"{opname}_basic", opname, lambda: [n(mk(4, 5))], fn)
        o.case(f"{opname}_transposed", opname, lambda: [tr([3, 4, 5], 0, 2, maker=mk)], fn)
        o.case(f"{opname}_sliced", opname, lambda: [sl([3, 5], 1, step=3, maker=mk)], fn)
        o.case(f"{opname}_expanded", opname, lambda: [ex([1, 5], [4, 5], maker=mk)], fn)
        o.case(f"{opname}_0d", opname, lambda: [n(mk())], fn)
        o.case(f"{opname}_empty", opname, lambda: [n(mk(2, 0, 3))], fn)
        o.case(f"{opname}_f64", opname, lambda: [n(mk(7).double())], fn)
        o.case(f"{opname}_long", opname, lambda: [n(mk(1037))], fn)  # past any vector width
    # Integer inputs: abs/neg/relu keep the dtype, float math promotes to f32.
    for opname in ("neg", "abs", "relu", "exp", "sigmoid", "sqrt"):
        lo = 0 if opname == "sqrt" else -5
        o.case(f"{opname}_i64", opname, lambda: [n(randint(lo, 5, 3, 4))], UNARY[opname])
    o.case("abs_i32", "abs", lambda: [n(randint(-5, 5, 6, dtype="i32"))], torch.abs)
    o.case("hardtanh_range", "hardtanh", lambda: [n(randn(4, 5, scale=3.0))],
           lambda x: F.hardtanh(x, -2.0, 0.5), {"min_val": -2.0, "max_val": 0.5})
    o.case("gelu_tanh", "gelu", lambda: [n(randn(4, 5, scale=3.0))],
           lambda x: F.gelu(x, approximate="tanh"), {"approximate": "tanh"})
    o.case("gelu_tanh_nc", "gelu", lambda: [tr([6, 5], maker=lambda *s: randn(*s, scale=3.0))],
           lambda x: F.gelu(x, approximate="tanh"), {"approximate": "tanh"})
    o.case("gelu_none", "gelu", lambda: [n(randn(4, 5, scale=3.0))],
           lambda x: F.gelu(x, approximate="none"), {"approximate": "none"})
    o.case("clamp_both", "clamp", lambda: [n(randn(4, 5, scale=2.0))],
           lambda x: torch.clamp(x, -0.5, 1.0), {"min": -0.5, "max": 1.0})
    o.case("clamp_min", "clamp", lambda: [tr([4, 5])], lambda x: torch.clamp(x, min=0.25),
           {"min": 0.25})
    o.case("clamp_max", "clamp", lambda: [sl([4, 5], 0)], lambda x: torch.clamp(x, max=-0.1),
           {"max": -0.1})
    o.case("clamp_i64", "clamp", lambda: [n(randint(-9, 9, 10))],
           lambda x: torch.clamp(x, -3, 4), {"min": -3, "max": 4})


def inplace_cases(o: Oracle):
    o.case("add__basic", "add_", lambda: [n(randn(3, 4)), n(randn(3, 4))],
           lambda s, b: s.add_(b), inplace=True)
    o.case("add__bcast_alpha", "add_", lambda: [n(randn(3, 4)), n(randn(4))],
           lambda s, b: s.add_(b, alpha=-0.5), {"alpha": -0.5}, inplace=True)
    o.case("add__view_self", "add_", lambda: [tr([4, 3]), ex([4, 1], [4, 3])],
           lambda s, b: s.add_(b), inplace=True)
    o.case("add__sliced_self", "add_", lambda: [sl([3, 4], 1), n(randn(1))],
           lambda s, b: s.add_(b, alpha=2.0), {"alpha": 2.0}, inplace=True)
    o.case("add__i64_other", "add_", lambda: [n(randn(3, 4)), n(randint(-3, 3, 3, 4))],
           lambda s, b: s.add_(b), inplace=True)
    o.case("mul__basic", "mul_", lambda: [n(randn(3, 4))], lambda s: s.mul_(1.5),
           {"other": 1.5}, inplace=True)
    o.case("mul__transposed", "mul_", lambda: [tr([3, 4, 2], 0, 2)], lambda s: s.mul_(-2.0),
           {"other": -2.0}, inplace=True)
    o.case("relu__basic", "relu_", lambda: [n(randn(3, 4))], torch.relu_, inplace=True)
    o.case("relu__sliced", "relu_", lambda: [sl([4, 3], 0)], torch.relu_, inplace=True)
    o.case("copy__basic", "copy_", lambda: [n(randn(3, 4)), n(randn(3, 4))],
           lambda s, b: s.copy_(b), inplace=True)
    o.case("copy__bcast_into_view", "copy_", lambda: [tr([4, 3]), n(randn(3))],
           lambda s, b: s.copy_(b), inplace=True)
    o.case("copy__f64_into_sliced", "copy_", lambda: [sl([3, 4], 1), n(randn(3, 4, dtype="f64"))],
           lambda s, b: s.copy_(b), inplace=True)
    o.case("copy__i64_from_f32", "copy_", lambda: [n(randint(-3, 3, 5)), n(randn(5) * 4)],
           lambda s, b: s.copy_(b), inplace=True)
    o.case("fill__basic", "fill_", lambda: [n(randn(3, 4))], lambda s: s.fill_(-2.5),
           {"value": -2.5}, inplace=True)
    o.case("fill__transposed", "fill_", lambda: [tr([3, 4, 2], 0, 2)], lambda s: s.fill_(0.75),
           {"value": 0.75}, inplace=True)
    o.case("fill__i64", "fill_", lambda: [sl([4, 3], 0, maker=lambda *sh: randint(-5, 5, *sh))],
           lambda s: s.fill_(3), {"value": 3}, inplace=True)


def functional_cases(o: Oracle):
    """The out-of-place forms ir::functionalize rewrites writes into, and the scatter of a view."""
    # The registered op mul_scalar (mul_'s functional form); "mul_scalar" cases are mul(x, s).
    o.case("mul_scalar_op_basic", "mul_scalar_op", lambda: [n(randn(3, 4))], lambda x: x * 1.5,
           {"other": 1.5})
    o.case("mul_scalar_op_transposed_f64", "mul_scalar_op", lambda: [tr([3, 4], dtype="f64")],
           lambda x: x * -2.0, {"other": -2.0})
    o.case("fill_basic", "fill", lambda: [n(randn(3, 4))], lambda x: torch.full_like(x, -2.5),
           {"value": -2.5})
    o.case("fill_i64_sliced", "fill", lambda: [sl([4, 3], 0, maker=lambda *sh: randint(-5, 5, *sh))],
           lambda x: torch.full_like(x, 3), {"value": 3})
    o.case("copy_basic", "copy", lambda: [n(randn(3, 4)), n(randn(3, 4))],
           lambda s, b: b.clone())
    o.case("copy_bcast_f64_into_f32", "copy", lambda: [tr([4, 3]), n(randn(3, dtype="f64"))],
           lambda s, b: b.to(s.dtype).expand(s.shape).clone())
    o.case("copy_i64_from_f32", "copy", lambda: [n(randint(-3, 3, 5)), n(randn(5) * 4)],
           lambda s, b: b.to(s.dtype))

    def bn_functional(tag, x_shape, momentum=0.1, eps=1e-5):
        c = x_shape[1]

        def make():
            return [n(randn(*x_shape, scale=2.0) + 0.5), n(randn(c, scale=0.5)),
                    n(rand_pos(c, lo=0.5, hi=2.0)), n(randn(c)), n(randn(c))]

        def fn(x, rm, rv, w, b):
            rm, rv = rm.clone(), rv.clone()
            y = F.batch_norm(x, rm, rv, w, b, True, momentum, eps)
            return [y, rm, rv]

        o.case(f"batch_norm_functional_{tag}", "batch_norm_functional", make, fn,
               {"training": True, "momentum": momentum, "eps": eps}, tol=ACC)

    bn_functional("4d", [2, 3, 4, 5])
    bn_functional("2d", [4, 6], momentum=0.3)

    def scatter(tag, base, src_shape, size, stride, offset, dtype="f32"):
        o.case(f"as_strided_scatter_{tag}", "as_strided_scatter",
               lambda: [n(randn(*base, dtype=dtype)), n(randn(*src_shape, dtype=dtype))],
               lambda b, s: torch.as_strided_scatter(b, s, size, stride, offset),
               {"size": list(size), "stride": list(stride), "offset": offset})

    scatter("rows", [4, 5], [2, 5], (2, 5), (5, 1), 5)
    scatter("column", [4, 5], [4], (4,), (5,), 2)
    scatter("transposed_window", [3, 4], [4, 3], (4, 3), (1, 4), 0, dtype="f64")
    scatter("strided_3d", [2, 3, 4], [2, 2, 2], (2, 2, 2), (12, 8, 2), 1)
    scatter("empty", [3, 4], [0, 4], (0, 4), (4, 1), 0)


def matmul_cases(o: Oracle):
    shapes = [
        ("1d_1d", [7], [7]),
        ("1d_2d", [5], [5, 3]),
        ("2d_1d", [4, 5], [5]),
        ("2d_2d", [4, 5], [5, 3]),
        ("3d_3d", [2, 4, 5], [2, 5, 3]),
        ("3d_2d", [2, 4, 5], [5, 3]),
        ("2d_3d", [4, 5], [2, 5, 3]),
        ("bcast_4d", [2, 1, 3, 4], [5, 4, 6]),
        ("1d_3d", [5], [2, 5, 3]),
        ("3d_1d", [2, 4, 5], [5]),
        ("k0", [3, 0], [0, 4]),
        ("m0", [0, 5], [5, 4]),
        ("size1", [1, 1], [1, 1]),
        ("big", [37, 70], [70, 45]),
    ]
    for tag, sa, sb in shapes:
        o.case(f"matmul_{tag}", "matmul", lambda: [n(randn(*sa)), n(randn(*sb))], torch.matmul,
               tol=ACC)
    o.case("matmul_transposed", "matmul", lambda: [tr([4, 6]), tr([6, 3])], torch.matmul, tol=ACC)
    o.case("matmul_batch_transposed", "matmul", lambda: [tr([2, 4, 6], 0, 1), tr([2, 6, 3])],
           torch.matmul, tol=ACC)
    o.case("matmul_sliced", "matmul", lambda: [sl([4, 6], 1), sl([6, 3], 0)], torch.matmul,
           tol=ACC)
    o.case("matmul_expanded", "matmul", lambda: [ex([1, 4, 6], [3, 4, 6]), n(randn(3, 6, 2))],
           torch.matmul, tol=ACC)
    o.case("matmul_f64", "matmul", lambda: [n(randn(3, 4, 5, dtype="f64")),
                                            n(randn(5, 6, dtype="f64"))], torch.matmul)

    o.case("linear_bias", "linear", lambda: [n(randn(4, 6)), n(randn(5, 6)), n(randn(5))],
           F.linear, tol=ACC)
    o.case("linear_nobias", "linear", lambda: [n(randn(4, 6)), n(randn(5, 6)), None],
           F.linear, tol=ACC)
    o.case("linear_3d", "linear", lambda: [n(randn(2, 3, 6)), n(randn(5, 6)), n(randn(5))],
           F.linear, tol=ACC)
    o.case("linear_4d_nobias", "linear", lambda: [n(randn(2, 2, 3, 6)), n(randn(5, 6)), None],
           F.linear, tol=ACC)
    o.case("linear_1d", "linear", lambda: [n(randn(6)), n(randn(5, 6)), n(randn(5))],
           F.linear, tol=ACC)
    o.case("linear_weight_t", "linear", lambda: [n(randn(4, 6)), tr([5, 6]), n(randn(5))],
           F.linear, tol=ACC)
    o.case("linear_input_nc", "linear", lambda: [tr([3, 4, 6], 0, 1), n(randn(5, 6)), None],
           F.linear, tol=ACC)
    o.case("linear_batch0", "linear", lambda: [n(randn(0, 6)), n(randn(5, 6)), n(randn(5))],
           F.linear, tol=ACC)
    o.case("linear_f64", "linear", lambda: [n(randn(4, 6, dtype="f64")),
                                            n(randn(5, 6, dtype="f64")), n(randn(5, dtype="f64"))],
           F.linear)


def conv_attrs(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    return {"stride": list(stride), "padding": list(padding), "dilation": list(dilation),
            "groups": groups}


def conv_cases(o: Oracle):
    def conv(tag, x, w, b, **kw):
        attrs = conv_attrs(**kw)
        o.case(f"conv2d_{tag}", "conv2d", lambda: [x(), n(w()), None if b is None else n(b())],
               lambda x_, w_, b_: F.conv2d(x_, w_, b_, attrs["stride"], attrs["padding"],
                                           attrs["dilation"], attrs["groups"]),
               attrs, tol=ACC)

    conv("3x3_pad1", lambda: n(randn(2, 3, 8, 8)), lambda: randn(4, 3, 3, 3), lambda: randn(4),
         padding=(1, 1))
    conv("nobias", lambda: n(randn(2, 3, 8, 8)), lambda: randn(4, 3, 3, 3), None)
    conv("stride2", lambda: n(randn(1, 3, 9, 9)), lambda: randn(5, 3, 3, 3), lambda: randn(5),
         stride=(2, 2), padding=(1, 1))
    conv("asym", lambda: n(randn(1, 2, 7, 9)), lambda: randn(3, 2, 3, 2), lambda: randn(3),
         stride=(2, 1), padding=(1, 2))
    conv("dilation2", lambda: n(randn(1, 3, 10, 10)), lambda: randn(4, 3, 3, 3), lambda: randn(4),
         padding=(2, 2), dilation=(2, 2))
    conv("groups2", lambda: n(randn(2, 4, 6, 6)), lambda: randn(6, 2, 3, 3), lambda: randn(6),
         padding=(1, 1), groups=2)
    conv("depthwise", lambda: n(randn(2, 6, 7, 7)), lambda: randn(6, 1, 3, 3), lambda: randn(6),
         padding=(1, 1), groups=6)
    conv("depthwise_mult2_s2", lambda: n(randn(1, 4, 8, 8)), lambda: randn(8, 1, 5, 5),
         lambda: randn(8), stride=(2, 2), padding=(2, 2), groups=4)
    conv("1x1", lambda: n(randn(2, 8, 5, 5)), lambda: randn(16, 8, 1, 1), lambda: randn(16))
    conv("channels_last", lambda: cl([2, 3, 8, 8]), lambda: randn(4, 3, 3, 3), lambda: randn(4),
         padding=(1, 1))
    conv("channels_last_depthwise", lambda: cl([1, 8, 6, 6]), lambda: randn(8, 1, 3, 3), None,
         stride=(2, 2), padding=(1, 1), groups=8)
    conv("input_sliced", lambda: sl([1, 3, 6, 6], 3), lambda: randn(2, 3, 3, 3), lambda: randn(2))
    conv("input_transposed_hw", lambda: tr([1, 3, 7, 5]), lambda: randn(2, 3, 3, 3), None,
         padding=(1, 1))
    conv("batch1_size1", lambda: n(randn(1, 3, 1, 1)), lambda: randn(4, 3, 1, 1), lambda: randn(4))
    conv("kernel_eq_input", lambda: n(randn(2, 3, 5, 5)), lambda: randn(4, 3, 5, 5), None)
    conv("stem_7x7", lambda: n(randn(1, 3, 32, 32)), lambda: randn(16, 3, 7, 7), None,
         stride=(2, 2), padding=(3, 3))
    conv("batch0", lambda: n(randn(0, 3, 5, 5)), lambda: randn(4, 3, 3, 3), lambda: randn(4))
    conv("unbatched_3d", lambda: n(randn(3, 6, 6)), lambda: randn(4, 3, 3, 3), lambda: randn(4),
         padding=(1, 1))
    # Weight as a view too (e.g. a sliced parameter).
    o.case("conv2d_weight_nc", "conv2d",
           lambda: [n(randn(1, 4, 6, 6)), tr([5, 4, 3, 3], 0, 1), n(randn(5))],
           lambda x, w, b: F.conv2d(x, w, b), conv_attrs(), tol=ACC)


def pool_cases(o: Oracle):
    def mp(tag, x, kernel, stride=None, padding=(0, 0), dilation=(1, 1), ceil_mode=False):
        attrs = {"kernel": list(kernel), "stride": list(stride or []), "padding": list(padding),
                 "dilation": list(dilation), "ceil_mode": ceil_mode}
        o.case(f"max_pool2d_{tag}", "max_pool2d", lambda: [x()],
               lambda x_: F.max_pool2d(x_, kernel, stride or None, padding, dilation,
                                       ceil_mode=ceil_mode), attrs)

    mp("k2", lambda: n(randn(2, 3, 8, 8)), (2, 2))
    mp("k3_s2_p1", lambda: n(randn(2, 3, 9, 9)), (3, 3), (2, 2), (1, 1))
    mp("ceil", lambda: n(randn(1, 2, 7, 7)), (2, 2), (2, 2), ceil_mode=True)
    mp("ceil_pad", lambda: n(randn(1, 2, 8, 8)), (3, 3), (2, 2), (1, 1), ceil_mode=True)
    mp("dilation2", lambda: n(randn(1, 2, 9, 9)), (3, 3), (1, 1), (1, 1), (2, 2))
    mp("rect", lambda: n(randn(1, 2, 6, 9)), (2, 3), (2, 3))
    mp("channels_last", lambda: cl([2, 4, 8, 8]), (3, 3), (2, 2), (1, 1))
    mp("transposed", lambda: tr([1, 3, 6, 8]), (2, 2))
    mp("size1", lambda: n(randn(1, 1, 1, 1)), (1, 1))
    mp("unbatched_3d", lambda: n(randn(3, 6, 6)), (2, 2))

    def ap(tag, x, kernel, stride=None, padding=(0, 0), ceil_mode=False, cip=True):
        attrs = {"kernel": list(kernel), "stride": list(stride or []), "padding": list(padding),
                 "ceil_mode": ceil_mode, "count_include_pad": cip}
        o.case(f"avg_pool2d_{tag}", "avg_pool2d", lambda: [x()],
               lambda x_: F.avg_pool2d(x_, kernel, stride or None, padding, ceil_mode, cip),
               attrs, tol=ACC)

    ap("k2", lambda: n(randn(2, 3, 8, 8)), (2, 2))
    ap("k3_s2_p1_incl", lambda: n(randn(1, 3, 9, 9)), (3, 3), (2, 2), (1, 1), cip=True)
    ap("k3_s2_p1_excl", lambda: n(randn(1, 3, 9, 9)), (3, 3), (2, 2), (1, 1), cip=False)
    ap("ceil", lambda: n(randn(1, 2, 7, 7)), (2, 2), (2, 2), ceil_mode=True)
    ap("ceil_pad_incl", lambda: n(randn(1, 2, 8, 8)), (3, 3), (2, 2), (1, 1), True, True)
    ap("ceil_pad_excl", lambda: n(randn(1, 2, 8, 8)), (3, 3), (2, 2), (1, 1), True, False)
    ap("rect", lambda: n(randn(1, 2, 6, 9)), (2, 3), (1, 2), (1, 1))
    ap("channels_last", lambda: cl([2, 4, 6, 6]), (2, 2))
    ap("sliced", lambda: sl([1, 3, 6, 6], 2), (3, 3), (1, 1), (1, 1), cip=False)
    ap("unbatched_3d", lambda: n(randn(3, 6, 6)), (2, 2))

    def aap(tag, x, size):
        o.case(f"adaptive_avg_pool2d_{tag}", "adaptive_avg_pool2d", lambda: [x()],
               lambda x_: F.adaptive_avg_pool2d(x_, size), {"output_size": list(size)}, tol=ACC)

    aap("global", lambda: n(randn(2, 3, 7, 7)), (1, 1))
    aap("divisible", lambda: n(randn(2, 3, 14, 14)), (7, 7))
    aap("not_divisible", lambda: n(randn(1, 2, 10, 11)), (3, 4))
    aap("upsample", lambda: n(randn(1, 2, 5, 5)), (7, 7))
    aap("identity", lambda: n(randn(1, 2, 6, 6)), (6, 6))
    aap("channels_last", lambda: cl([2, 8, 7, 7]), (1, 1))
    aap("transposed", lambda: tr([1, 3, 9, 6]), (2, 2))
    aap("unbatched_3d", lambda: n(randn(3, 7, 7)), (1, 1))


def norm_cases(o: Oracle):
    def bn(tag, x_shape, x_maker=None, training=False, affine=True, running=True, momentum=0.1,
           eps=1e-5):
        c = x_shape[1]

        def make():
            x = x_maker() if x_maker else n(randn(*x_shape, scale=2.0) + 0.5)
            rm = n(randn(c, scale=0.5)) if running else None
            rv = n(rand_pos(c, lo=0.5, hi=2.0)) if running else None
            w = n(randn(c)) if affine else None
            b = n(randn(c)) if affine else None
            return [x, rm, rv, w, b]

        def fn(x, rm, rv, w, b):
            y = F.batch_norm(x, rm, rv, w, b, training, momentum, eps)
            return [y, rm, rv] if (training and running) else [y]

        o.case(f"batch_norm_{tag}", "batch_norm", make, fn,
               {"training": training, "momentum": momentum, "eps": eps}, tol=ACC)

    bn("eval_4d", [2, 3, 4, 5])
    bn("eval_noaffine", [2, 3, 4, 5], affine=False)
    bn("eval_2d", [4, 6])
    bn("eval_3d", [2, 3, 7], eps=1e-3)
    bn("eval_channels_last", [2, 4, 3, 3], x_maker=lambda: cl([2, 4, 3, 3]))
    bn("eval_nc", [2, 3, 4, 5], x_maker=lambda: tr([2, 3, 4, 5]))
    bn("train_4d", [2, 3, 4, 5], training=True)
    bn("train_2d", [8, 5], training=True, momentum=0.3)
    bn("train_noaffine", [3, 2, 3, 3], training=True, affine=False)
    bn("train_norunning", [2, 3, 4, 4], training=True, running=False)
    bn("train_channels_last", [2, 4, 3, 3], x_maker=lambda: cl([2, 4, 3, 3]), training=True)
    bn("train_3d", [4, 3, 5], training=True)

    def ln(tag, x, shape, affine=True, bias=True, eps=1e-5, dtype="f32"):
        def make():
            w = n(randn(*shape, dtype=dtype)) if affine else None
            b = n(randn(*shape, dtype=dtype)) if (affine and bias) else None
            return [x(), w, b]

        o.case(f"layer_norm_{tag}", "layer_norm", make,
               lambda x_, w, b: F.layer_norm(x_, shape, w, b, eps),
               {"normalized_shape": list(shape), "eps": eps}, tol=ACC)

    ln("last", lambda: n(randn(2, 3, 8, scale=3.0) + 1.0), [8])
    ln("noaffine", lambda: n(randn(4, 8)), [8], affine=False)
    ln("weight_only", lambda: n(randn(4, 8)), [8], bias=False)
    ln("two_dims", lambda: n(randn(2, 3, 4, 5)), [4, 5])
    ln("all_dims", lambda: n(randn(3, 4)), [3, 4])
    ln("transposed", lambda: tr([2, 5, 6], 0, 1), [6])
    ln("sliced", lambda: sl([3, 7], 0, step=2), [7], eps=1e-3)
    ln("expanded", lambda: ex([1, 6], [4, 6]), [6])
    ln("size1", lambda: n(randn(3, 1)), [1])
    ln("f64", lambda: n(randn(3, 6, dtype="f64")), [6], dtype="f64")
    ln("long_row", lambda: n(randn(2, 1000)), [1000])


def softmax_cases(o: Oracle):
    for opname, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
        for d in (0, 1, 2, -1):
            o.case(f"{opname}_dim{d if d >= 0 else 'm1'}", opname,
                   lambda: [n(randn(2, 3, 4, scale=3.0))],
                   lambda x, d=d, fn=fn: fn(x, dim=d), {"dim": d}, tol=ACC)
        o.case(f"{opname}_transposed", opname, lambda: [tr([3, 5])],
               lambda x, fn=fn: fn(x, dim=1), {"dim": 1}, tol=ACC)
        o.case(f"{opname}_transposed_dim0", opname, lambda: [tr([4, 3, 5], 0, 2)],
               lambda x, fn=fn: fn(x, dim=0), {"dim": 0}, tol=ACC)
        o.case(f"{opname}_large", opname, lambda: [n(randn(3, 7, scale=60.0))],
               lambda x, fn=fn: fn(x, dim=-1), {"dim": -1}, tol=ACC)
        o.case(f"{opname}_size1", opname, lambda: [n(randn(4, 1))],
               lambda x, fn=fn: fn(x, dim=1), {"dim": 1}, tol=ACC)
        o.case(f"{opname}_empty", opname, lambda: [n(randn(0, 5))],
               lambda x, fn=fn: fn(x, dim=1), {"dim": 1}, tol=ACC)
        o.case(f"{opname}_0d", opname, lambda: [n(randn())],
               lambda x, fn=fn: fn(x, dim=0), {"dim": 0}, tol=ACC)
        o.case(f"{opname}_expanded", opname, lambda: [ex([1, 6], [3, 6])],
               lambda x, fn=fn: fn(x, dim=1), {"dim": 1}, tol=ACC)
        o.case(f"{opname}_long", opname, lambda: [n(randn(2, 1031, scale=5.0))],
               lambda x, fn=fn: fn(x, dim=1), {"dim": 1}, tol=ACC)
        o.case(f"{opname}_f64", opname, lambda: [n(randn(3, 5, dtype="f64"))],
               lambda x, fn=fn: fn(x, dim=1), {"dim": 1})


def dropout_cases(o: Oracle):
    o.case("dropout_eval", "dropout", lambda: [n(randn(3, 4))],
           lambda x: F.dropout(x, 0.5, training=False), {"p": 0.5, "training": False})
    o.case("dropout_eval_nc", "dropout", lambda: [tr([3, 4])],
           lambda x: F.dropout(x, 0.3, training=False), {"p": 0.3, "training": False})
    o.case("dropout_train_p0", "dropout", lambda: [n(randn(3, 4))],
           lambda x: F.dropout(x, 0.0, training=True), {"p": 0.0, "training": True})
    o.case("dropout_train_p1", "dropout", lambda: [n(randn(3, 4))],
           lambda x: F.dropout(x, 1.0, training=True), {"p": 1.0, "training": True})
    # The random mask cannot match torch's; the C++ side checks its statistics instead: about
    # p of the elements are zero and the rest are x / (1 - p). torch's output is stored as the
    # result of the same check on torch's mask (for documentation; it is not compared).
    for p in (0.2, 0.5):
        tag = str(p).replace(".", "")
        o.case(f"dropout_train_stats_p{tag}", "dropout_stats",
               lambda: [n(rand_pos(100, 200, lo=0.5, hi=1.5))],
               lambda x, p=p: F.dropout(x, p, training=True), {"p": p, "training": True},
               extra={"stats_only": True})


def embedding_cases(o: Oracle):
    o.case("embedding_2d_idx", "embedding", lambda: [n(randn(10, 4)), n(randint(0, 10, 2, 3))],
           lambda w, i: F.embedding(i, w))
    o.case("embedding_1d_idx", "embedding", lambda: [n(randn(10, 4)), n(randint(0, 10, 7))],
           lambda w, i: F.embedding(i, w))
    o.case("embedding_0d_idx", "embedding", lambda: [n(randn(10, 4)), n(randint(0, 10))],
           lambda w, i: F.embedding(i, w))
    o.case("embedding_i32_idx", "embedding",
           lambda: [n(randn(10, 4)), n(randint(0, 10, 5, dtype="i32"))],
           lambda w, i: F.embedding(i, w))
    o.case("embedding_weight_t", "embedding", lambda: [tr([10, 4]), n(randint(0, 10, 2, 3))],
           lambda w, i: F.embedding(i, w))
    o.case("embedding_idx_nc", "embedding",
           lambda: [n(randn(10, 4)), tr([3, 4], maker=lambda *s: randint(0, 10, *s))],
           lambda w, i: F.embedding(i, w))
    o.case("embedding_empty_idx", "embedding", lambda: [n(randn(10, 4)), n(randint(0, 10, 0))],
           lambda w, i: F.embedding(i, w))
    o.case("embedding_f64", "embedding",
           lambda: [n(randn(6, 3, dtype="f64")), n(randint(0, 6, 4))],
           lambda w, i: F.embedding(i, w))


def loss_cases(o: Oracle):
    for opname in ("nll_loss", "cross_entropy"):
        for red in ("mean", "sum", "none"):
            def make(opname=opname):
                x = randn(6, 5, scale=2.0)
                if opname == "nll_loss":
                    x = F.log_softmax(x, dim=1)
                return [n(x), n(randint(0, 5, 6))]

            def fn(x, t, red=red, opname=opname):
                return getattr(F, opname)(x, t, reduction=red)

            o.case(f"{opname}_{red}", opname, make, fn, {"reduction": red}, tol=ACC)

            def fn_ign(x, t, red=red, opname=opname):
                return getattr(F, opname)(x, t, reduction=red, ignore_index=2)

            def make_ign(make=make):
                x, t = make()
                t.base[0] = 2  # make sure the ignored class occurs
                return [x, t]

            o.case(f"{opname}_{red}_ignore", opname, make_ign, fn_ign,
                   {"reduction": red, "ignore_index": 2}, tol=ACC)
        o.case(f"{opname}_nc", opname,
               lambda: [tr([4, 7]), n(randint(0, 7, 4))],
               lambda x, t, opname=opname: getattr(F, opname)(x, t), {"reduction": "mean"},
               tol=ACC)
        o.case(f"{opname}_batch1", opname, lambda: [n(randn(1, 3)), n(randint(0, 3, 1))],
               lambda x, t, opname=opname: getattr(F, opname)(x, t), {"reduction": "mean"},
               tol=ACC)
        o.case(f"{opname}_all_ignored", opname,
               lambda: [n(randn(3, 4)), n(torch.full((3,), -100, dtype=torch.int64))],
               lambda x, t, opname=opname: getattr(F, opname)(x, t), {"reduction": "mean"},
               tol=ACC)
        o.case(f"{opname}_f64", opname, lambda: [n(randn(4, 3, dtype="f64")), n(randint(0, 3, 4))],
               lambda x, t, opname=opname: getattr(F, opname)(x, t), {"reduction": "mean"})
    o.case("cross_entropy_large_logits", "cross_entropy",
           lambda: [n(randn(4, 6, scale=80.0)), n(randint(0, 6, 4))],
           lambda x, t: F.cross_entropy(x, t), {"reduction": "mean"}, tol=ACC)


def attention_cases(o: Oracle):
    def sdpa(tag, mk, is_causal=False, scale=None, mask=None):
        attrs = {"is_causal": is_causal}
        if scale is not None:
            attrs["scale"] = scale

        def fn(q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=is_causal,
                                                  scale=scale)

        o.case(f"sdpa_{tag}", "scaled_dot_product_attention", mk, fn, attrs, tol=ACC)

    qkv = lambda b, h, l, s, e, ev: [n(randn(b, h, l, e)), n(randn(b, h, s, e)),  # noqa: E731
                                     n(randn(b, h, s, ev))]
    sdpa("basic", lambda: qkv(2, 3, 5, 6, 8, 4) + [None])
    sdpa("3d", lambda: [n(randn(2, 5, 8)), n(randn(2, 7, 8)), n(randn(2, 7, 8)), None])
    sdpa("scale", lambda: qkv(1, 2, 4, 4, 8, 8) + [None], scale=0.3)

    def keep_mask(*shape):
        m = randbool(*shape)
        m[..., 0] = True  # no fully masked rows
        return m

    sdpa("bool_mask", lambda: qkv(2, 3, 5, 6, 8, 4) + [n(keep_mask(5, 6))])
    sdpa("bool_mask_bcast", lambda: qkv(2, 3, 5, 6, 8, 4) + [n(keep_mask(2, 1, 5, 6))])
    sdpa("float_mask", lambda: qkv(2, 3, 5, 6, 8, 4) + [n(randn(2, 1, 5, 6))])
    sdpa("float_mask_2d", lambda: qkv(1, 2, 5, 6, 8, 8) + [n(randn(5, 6, scale=3.0))])
    sdpa("causal", lambda: qkv(2, 2, 6, 6, 8, 8) + [None], is_causal=True)
    sdpa("causal_l_lt_s", lambda: qkv(1, 2, 4, 6, 8, 8) + [None], is_causal=True)
    sdpa("causal_scale", lambda: qkv(1, 2, 5, 5, 4, 4) + [None], is_causal=True, scale=1.5)
    # The layout the transformer blocks produce: [B, L, H, E] transposed to [B, H, L, E].
    sdpa("transposed", lambda: [tr([2, 3, 5, 8], 1, 2), tr([2, 3, 6, 8], 1, 2),
                                tr([2, 3, 6, 8], 1, 2), None])
    sdpa("len1", lambda: qkv(1, 2, 1, 1, 8, 8) + [None])
    sdpa("f64", lambda: [n(randn(1, 2, 3, 4, dtype="f64")), n(randn(1, 2, 5, 4, dtype="f64")),
                         n(randn(1, 2, 5, 4, dtype="f64")), None])


def shape_op_cases(o: Oracle):
    o.case("cat_dim0", "cat", lambda: [n(randn(2, 3)), n(randn(4, 3)), n(randn(1, 3))],
           lambda *xs: torch.cat(xs, 0), {"dim": 0})
    o.case("cat_dim1_nc", "cat", lambda: [tr([2, 3]), sl([2, 4], 1), ex([2, 1], [2, 2])],
           lambda *xs: torch.cat(xs, 1), {"dim": 1})
    o.case("cat_neg_dim", "cat", lambda: [n(randn(2, 3, 4)), n(randn(2, 3, 1))],
           lambda *xs: torch.cat(xs, -1), {"dim": -1})
    o.case("cat_empty_part", "cat", lambda: [n(randn(0, 3)), n(randn(2, 3))],
           lambda *xs: torch.cat(xs, 0), {"dim": 0})
    o.case("cat_single", "cat", lambda: [tr([3, 2])], lambda *xs: torch.cat(xs, 0), {"dim": 0})
    o.case("cat_promote", "cat", lambda: [n(randn(2, 3)), n(randint(-5, 5, 1, 3))],
           lambda *xs: torch.cat(xs, 0), {"dim": 0})
    o.case("cat_i64", "cat", lambda: [n(randint(-5, 5, 2)), n(randint(-5, 5, 3))],
           lambda *xs: torch.cat(xs, 0), {"dim": 0})
    o.case("cat_channels_last", "cat", lambda: [cl([1, 2, 3, 3]), cl([1, 3, 3, 3])],
           lambda *xs: torch.cat(xs, 1), {"dim": 1})
    o.case("stack_dim0", "stack", lambda: [n(randn(2, 3)), n(randn(2, 3))],
           lambda *xs: torch.stack(xs, 0), {"dim": 0})
    o.case("stack_last", "stack", lambda: [tr([2, 3]), n(randn(2, 3)), sl([2, 3], 0)],
           lambda *xs: torch.stack(xs, 2), {"dim": 2})
    o.case("stack_neg", "stack", lambda: [n(randn(4)), n(randn(4))],
           lambda *xs: torch.stack(xs, -1), {"dim": -1})
    o.case("stack_0d", "stack", lambda: [n(randn()), n(randn()), n(randn())],
           lambda *xs: torch.stack(xs, 0), {"dim": 0})

    o.case("split_size", "split", lambda: [n(randn(5, 3))], lambda x: torch.split(x, 2, 0),
           {"split_size": 2, "dim": 0}, check_strides=True)
    o.case("split_size_dim1_nc", "split", lambda: [tr([3, 7])], lambda x: torch.split(x, 3, 1),
           {"split_size": 3, "dim": 1}, check_strides=True)
    o.case("split_sizes", "split", lambda: [n(randn(2, 5))],
           lambda x: torch.split(x, [1, 3, 1], -1), {"sizes": [1, 3, 1], "dim": -1},
           check_strides=True)
    o.case("split_sizes_zero", "split", lambda: [n(randn(4, 2))],
           lambda x: torch.split(x, [0, 4], 0), {"sizes": [0, 4], "dim": 0}, check_strides=True)
    o.case("split_exact", "split", lambda: [n(randn(6))], lambda x: torch.split(x, 3, 0),
           {"split_size": 3, "dim": 0}, check_strides=True)
    o.case("chunk_3_of_7", "chunk", lambda: [n(randn(7, 2))], lambda x: torch.chunk(x, 3, 0),
           {"chunks": 3, "dim": 0}, check_strides=True)
    o.case("chunk_4_of_6", "chunk", lambda: [n(randn(2, 6))], lambda x: torch.chunk(x, 4, 1),
           {"chunks": 4, "dim": 1}, check_strides=True)  # torch gives 3 chunks of 2
    o.case("chunk_more_than_size", "chunk", lambda: [n(randn(2, 3))],
           lambda x: torch.chunk(x, 5, -1), {"chunks": 5, "dim": -1}, check_strides=True)
    o.case("chunk_qkv", "chunk", lambda: [tr([2, 4, 12], 0, 1)], lambda x: torch.chunk(x, 3, -1),
           {"chunks": 3, "dim": -1}, check_strides=True)


def reduction_cases(o: Oracle):
    def red(opname, tag, mk, dims=None, keepdim=False, tol=ACC):
        attrs = {"dims": dims or [], "keepdim": keepdim}
        fns = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin}

        def fn(x):
            if opname in ("amax", "amin"):
                return fns[opname](x, dim=dims or [], keepdim=keepdim)
            if dims:
                return fns[opname](x, dim=dims, keepdim=keepdim)
            if keepdim:
                return fns[opname](x, dim=list(range(x.dim())), keepdim=True)
            return fns[opname](x)

        o.case(f"{opname}_{tag}", opname, lambda: [mk()], fn, attrs, tol=tol)

    for opname in ("sum", "mean", "amax", "amin"):
        red(opname, "all", lambda: n(randn(3, 4, 5)))
        red(opname, "all_keepdim", lambda: n(randn(3, 4)), keepdim=True)
        red(opname, "dim1", lambda: n(randn(3, 4, 5)), [1])
        red(opname, "dims02_keepdim", lambda: n(randn(3, 4, 5)), [0, 2], True)
        red(opname, "neg_dim", lambda: n(randn(3, 4, 5)), [-1])
        red(opname, "transposed", lambda: tr([4, 6, 5], 0, 2), [1])
        red(opname, "sliced", lambda: sl([5, 6], 1), [0])
        red(opname, "expanded", lambda: ex([1, 6], [4, 6]), [0])
        red(opname, "0d", lambda: n(randn()))
        red(opname, "size1", lambda: n(randn(1, 5)), [0])
        red(opname, "long_row", lambda: n(randn(3, 2053)), [1])
        red(opname, "f64", lambda: n(randn(4, 5, dtype="f64")), [1])
    red("sum", "i64", lambda: n(randint(-9, 9, 3, 4)), [1])
    red("sum", "i32", lambda: n(randint(-9, 9, 3, 4, dtype="i32")))  # torch sums ints to i64
    red("sum", "b8", lambda: n(randbool(3, 4)), [0])
    red("sum", "empty_dim", lambda: n(randn(3, 0)), [1])
    red("sum", "empty_all", lambda: n(randn(0, 4)))
    red("mean", "empty_dim", lambda: n(randn(3, 0)), [1])  # nan
    red("amax", "i64", lambda: n(randint(-9, 9, 3, 4)), [1])
    red("amin", "i32", lambda: tr([3, 4], maker=lambda *s: randint(-9, 9, *s, dtype="i32")), [0])
    red("amax", "empty_other_dim", lambda: n(randn(0, 4)), [1])

    def mm(opname, tag, mk, dim, keepdim=False):
        fns = {"max": lambda x: torch.max(x, dim, keepdim).values,
               "min": lambda x: torch.min(x, dim, keepdim).values,
               "argmax": lambda x: torch.argmax(x, dim, keepdim),
               "argmin": lambda x: torch.argmin(x, dim, keepdim)}
        o.case(f"{opname}_{tag}", opname, lambda: [mk()], fns[opname],
               {"dim": dim, "keepdim": keepdim}, tol=ACC)

    for opname in ("max", "min", "argmax", "argmin"):
        mm(opname, "dim0", lambda: n(randn(4, 5)), 0)
        mm(opname, "dim1_keepdim", lambda: n(randn(4, 5)), 1, True)
        mm(opname, "neg_dim", lambda: n(randn(2, 3, 4)), -1)
        mm(opname, "transposed", lambda: tr([3, 4, 5], 0, 2), 1)
        mm(opname, "sliced", lambda: sl([4, 6], 1, step=3), 1)
        mm(opname, "expanded_ties", lambda: ex([4, 1], [4, 5]), 1)  # all equal: first index
        mm(opname, "i64_ties", lambda: n(randint(0, 3, 4, 9)), 1)
        mm(opname, "i32", lambda: n(randint(-50, 50, 3, 7, dtype="i32")), 0)
        mm(opname, "0d", lambda: n(randn()), 0)
        mm(opname, "size1", lambda: n(randn(1, 5)), 0)
        mm(opname, "long", lambda: n(randn(2, 3001)), 1)
        mm(opname, "f64", lambda: n(randn(3, 4, dtype="f64")), 1)

    def vs(opname, tag, mk, dims=None, correction=1, keepdim=False):
        fn = torch.var if opname == "var" else torch.std
        o.case(f"{opname}_{tag}", opname, lambda: [mk()],
               lambda x: fn(x, dim=dims or None, correction=correction, keepdim=keepdim),
               {"dims": dims or [], "correction": correction, "keepdim": keepdim}, tol=ACC)

    for opname in ("var", "std"):
        vs(opname, "all", lambda: n(randn(3, 4, 5, scale=2.0) + 3.0))
        vs(opname, "dim1", lambda: n(randn(3, 4, 5)), [1])
        vs(opname, "dims_keepdim", lambda: n(randn(3, 4, 5)), [0, 2], keepdim=True)
        vs(opname, "correction0", lambda: n(randn(4, 6)), [1], correction=0)
        vs(opname, "correction2", lambda: n(randn(4, 6)), [1], correction=2)
        vs(opname, "neg_dim_keepdim", lambda: n(randn(4, 6)), [-1], keepdim=True)
        vs(opname, "transposed", lambda: tr([5, 4], 0, 1), [0])
        vs(opname, "sliced", lambda: sl([4, 10], 1), [1])
        vs(opname, "size1_dim", lambda: n(randn(3, 1)), [1], correction=0)
        vs(opname, "offset_mean", lambda: n(randn(2, 500) + 1000.0), [1])  # cancellation
        vs(opname, "f64", lambda: n(randn(3, 8, dtype="f64")), [1])


def view_cases(o: Oracle):
    # op, inputs, torch fn, attrs; all are views: strides, offset and aliasing are checked.
    views = [
        ("view", "flat", lambda: [n(randn(2, 3, 4))], lambda x: x.view(6, 4), {"size": [6, 4]}),
        ("view", "infer", lambda: [n(randn(2, 3, 4))], lambda x: x.view(-1), {"size": [-1]}),
        ("view", "split_dim", lambda: [n(randn(6, 4))], lambda x: x.view(2, 3, 2, 2),
         {"size": [2, 3, 2, 2]}),
        ("view", "of_transposed", lambda: [tr([4, 6], 0, 1)], lambda x: x.view(4, 2, 3),
         {"size": [4, 2, 3]}),
        ("view", "0d", lambda: [n(randn(1, 1))], lambda x: x.view([]), {"size": []}),
        ("view", "empty", lambda: [n(randn(0, 4))], lambda x: x.view(2, 0, 2), {"size": [2, 0, 2]}),
        ("reshape", "viewable", lambda: [n(randn(2, 3, 4))], lambda x: x.reshape(4, -1),
         {"size": [4, -1]}),
        ("reshape", "transposed_copy", lambda: [tr([3, 4])], lambda x: x.reshape(12),
         {"size": [12]}),
        ("reshape", "sliced_copy", lambda: [sl([3, 4], 1)], lambda x: x.reshape(2, 6),
         {"size": [2, 6]}),
        ("permute", "3d", lambda: [n(randn(2, 3, 4))], lambda x: x.permute(2, 0, 1),
         {"dims": [2, 0, 1]}),
        ("permute", "neg", lambda: [tr([2, 3, 4])], lambda x: x.permute(-1, 0, 1),
         {"dims": [-1, 0, 1]}),
        ("transpose", "01", lambda: [n(randn(2, 3, 4))], lambda x: x.transpose(0, 1),
         {"dims": [0, 1]}),
        ("transpose", "neg", lambda: [sl([2, 3, 4], 2)], lambda x: x.transpose(-1, 0),
         {"dims": [-1, 0]}),
        ("t", "2d", lambda: [n(randn(3, 5))], lambda x: x.t(), {}),
        ("narrow", "dim1", lambda: [n(randn(4, 6))], lambda x: x.narrow(1, 2, 3),
         {"dim": 1, "start": 2, "length": 3}),
        ("narrow", "len0", lambda: [n(randn(4, 6))], lambda x: x.narrow(0, 4, 0),
         {"dim": 0, "start": 4, "length": 0}),
        ("slice", "step", lambda: [n(randn(5, 8))], lambda x: x[:, 1:7:2],
         {"dim": 1, "start": 1, "end": 7, "step": 2}),
        ("slice", "neg_start", lambda: [n(randn(6, 3))], lambda x: x[-4:],
         {"dim": 0, "start": -4, "end": 2**62, "step": 1}),
        ("slice", "clamped_end", lambda: [tr([4, 5])], lambda x: x[:, 2:100:3],
         {"dim": 1, "start": 2, "end": 100, "step": 3}),
        ("slice", "empty", lambda: [n(randn(4, 5))], lambda x: x[3:1],
         {"dim": 0, "start": 3, "end": 1, "step": 1}),
        ("select", "dim0", lambda: [n(randn(3, 4))], lambda x: x.select(0, 1),
         {"dim": 0, "index": 1}),
        ("select", "neg_index", lambda: [tr([3, 4, 5], 0, 2)], lambda x: x.select(1, -1),
         {"dim": 1, "index": -1}),
        ("select", "to_0d", lambda: [n(randn(4))], lambda x: x.select(0, 2), {"dim": 0, "index": 2}),
        ("expand", "col", lambda: [n(randn(3, 1))], lambda x: x.expand(3, 4), {"size": [3, 4]}),
        ("expand", "new_dims", lambda: [n(randn(4))], lambda x: x.expand(2, 3, 4),
         {"size": [2, 3, 4]}),
        ("expand", "minus1", lambda: [n(randn(1, 4))], lambda x: x.expand(3, -1),
         {"size": [3, -1]}),
        ("expand", "0d", lambda: [n(randn())], lambda x: x.expand(2, 2), {"size": [2, 2]}),
        ("expand", "to_zero", lambda: [n(randn(1, 3))], lambda x: x.expand(0, 3), {"size": [0, 3]}),
        ("squeeze", "all", lambda: [n(randn(1, 3, 1, 4))], lambda x: x.squeeze(), {}),
        ("squeeze", "dim", lambda: [n(randn(1, 3, 1, 4))], lambda x: x.squeeze(2), {"dim": 2}),
        ("squeeze", "dim_not1", lambda: [n(randn(2, 3))], lambda x: x.squeeze(1), {"dim": 1}),
        ("squeeze", "to_0d", lambda: [n(randn(1, 1))], lambda x: x.squeeze(), {}),
        ("unsqueeze", "0", lambda: [n(randn(3, 4))], lambda x: x.unsqueeze(0), {"dim": 0}),
        ("unsqueeze", "neg", lambda: [tr([3, 4])], lambda x: x.unsqueeze(-1), {"dim": -1}),
        ("unsqueeze", "0d", lambda: [n(randn())], lambda x: x.unsqueeze(0), {"dim": 0}),
        ("as_strided", "overlapping", lambda: [n(randn(4, 5))],
         lambda x: x.as_strided((3, 3), (2, 1), 1), {"size": [3, 3], "stride": [2, 1], "offset": 1}),
        ("as_strided", "of_transposed", lambda: [tr([4, 5])],
         lambda x: x.as_strided((2, 4), (1, 5), 3), {"size": [2, 4], "stride": [1, 5], "offset": 3}),
        ("as_strided", "zero_stride", lambda: [n(randn(6))],
         lambda x: x.as_strided((2, 3), (0, 2), 0), {"size": [2, 3], "stride": [0, 2], "offset": 0}),
        ("flatten", "all", lambda: [n(randn(2, 3, 4))], lambda x: x.flatten(), {}),
        ("flatten", "mid", lambda: [n(randn(2, 3, 4, 5))], lambda x: x.flatten(1, 2),
         {"start_dim": 1, "end_dim": 2}),
        ("flatten", "0d", lambda: [n(randn())], lambda x: x.flatten(), {}),
    ]
    for op, tag, mk, fn, attrs in views:
        # reshape of a non-viewable layout copies: same strides as torch, but no aliasing.
        o.case(f"view_{op}_{tag}", op, mk, fn, attrs, check_strides=True,
               extra={"aliases": not tag.endswith("_copy")})
    # Copies: values (and dtype) only.
    copies = [
        ("contiguous", "transposed", lambda: [tr([3, 4])], lambda x: x.contiguous(), {}),
        ("contiguous", "expanded", lambda: [ex([1, 4], [3, 4])], lambda x: x.contiguous(), {}),
        ("contiguous", "channels_last", lambda: [cl([1, 3, 2, 2])], lambda x: x.contiguous(), {}),
        ("clone", "sliced", lambda: [sl([3, 4], 0)], lambda x: x.clone(), {}),
        ("clone", "0d", lambda: [n(randn())], lambda x: x.clone(), {}),
        ("to_channels_last", "nchw", lambda: [n(randn(2, 3, 4, 5))],
         lambda x: x.contiguous(memory_format=torch.channels_last), {}),
        ("to", "f32_i64", lambda: [n(randn(3, 4, scale=5.0))], lambda x: x.to(torch.int64),
         {"dtype": "i64"}),
        ("to", "f32_i32", lambda: [tr([3, 4], maker=lambda *s: randn(*s, scale=5.0))],
         lambda x: x.to(torch.int32), {"dtype": "i32"}),
        ("to", "f32_b8", lambda: [n(randint(-1, 2, 3, 4).float())], lambda x: x.to(torch.bool),
         {"dtype": "b8"}),
        ("to", "b8_f32", lambda: [n(randbool(3, 4))], lambda x: x.to(torch.float32),
         {"dtype": "f32"}),
        ("to", "i64_f64", lambda: [n(randint(-99, 99, 5))], lambda x: x.to(torch.float64),
         {"dtype": "f64"}),
        ("to", "f64_f32", lambda: [n(randn(5, dtype="f64"))], lambda x: x.to(torch.float32),
         {"dtype": "f32"}),
        ("to", "i64_i32", lambda: [ex([1, 3], [2, 3], maker=lambda *s: randint(-99, 99, *s))],
         lambda x: x.to(torch.int32), {"dtype": "i32"}),
        ("to", "same", lambda: [n(randn(3))], lambda x: x.to(torch.float32), {"dtype": "f32"}),
    ]
    for op, tag, mk, fn, attrs in copies:
        o.case(f"copy_{op}_{tag}", op, mk, fn, attrs)


def factory_cases(o: Oracle):
    fs = [
        ("zeros", "f32", lambda: torch.zeros(2, 3), {"size": [2, 3], "dtype": "f32"}),
        ("zeros", "empty", lambda: torch.zeros(0, 3), {"size": [0, 3], "dtype": "f32"}),
        ("ones", "i64", lambda: torch.ones(4, dtype=torch.int64), {"size": [4], "dtype": "i64"}),
        ("ones", "0d", lambda: torch.ones([]), {"size": [], "dtype": "f32"}),
        ("full", "f32", lambda: torch.full((2, 2), 2.5), {"size": [2, 2], "value": 2.5,
                                                          "dtype": "f32"}),
        ("full", "b8", lambda: torch.full((3,), True), {"size": [3], "value": 1.0, "dtype": "b8"}),
        ("arange", "end", lambda: torch.arange(5), {"end": 5}),
        ("arange", "int_step", lambda: torch.arange(1, 10, 3),
         {"start": 1, "end": 10, "step": 3, "dtype": "i64"}),
        ("arange", "frac_step", lambda: torch.arange(1, 2, 0.25, dtype=torch.float32),
         {"start": 1, "end": 2, "step": 0.25, "dtype": "f32"}),
        ("arange", "neg_step", lambda: torch.arange(5, -3, -2),
         {"start": 5, "end": -3, "step": -2, "dtype": "i64"}),
        ("arange", "f64", lambda: torch.arange(0, 1, 0.1, dtype=torch.float64),
         {"start": 0, "end": 1, "step": 0.1, "dtype": "f64"}),
        ("arange", "empty", lambda: torch.arange(0), {"end": 0}),
    ]
    for op, tag, fn, attrs in fs:
        o.case(f"factory_{op}_{tag}", op, lambda: [], fn, attrs)


def build() -> Oracle:
    o = Oracle()
    for family in (binary_cases, scalar_cases, compare_cases, unary_cases, inplace_cases,
                   functional_cases,
                   matmul_cases, conv_cases, pool_cases, norm_cases, softmax_cases,
                   dropout_cases, embedding_cases, loss_cases, attention_cases, shape_op_cases,
                   reduction_cases, view_cases, factory_cases):
        family(o)
    return o


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder (created)")
    args = ap.parse_args()
    torch.set_num_threads(1)  # deterministic reductions, and cheap on a shared machine
    o = build()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "ops.safetensors")
    tmp = path + f".tmp{os.getpid()}"
    meta = {"cases": json.dumps(o.cases), "torch_version": torch.__version__,
            "generator": "tests/oracle/gen_ops.py"}
    save_file(o.tensors, tmp, metadata=meta)
    os.replace(tmp, path)  # atomic: concurrent test processes never see a partial file
    print(f"wrote {len(o.cases)} cases, {len(o.tensors)} tensors to {path}")


if __name__ == "__main__":
    main()
