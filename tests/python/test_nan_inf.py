"""NaN and inf propagate as in PyTorch through every kernel: eager, lathe.compile on the cpu backend
(fused pointwise programs, oneDNN post-ops) and on the interpreter, and torch.compile(backend="lathe").
Each case compares values, NaN positions and infinities with PyTorch on random data in which NaN,
+inf and -inf are planted."""
import pytest
import torch
import torch.nn.functional as F

import lathe
import lathe.torch  # noqa: F401  (registers backend="lathe")


def planted(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 3
    flat = x.view(-1)
    idx = torch.randperm(flat.numel(), generator=g)
    k = max(1, flat.numel() // 12)
    flat[idx[:k]] = float("nan")
    flat[idx[k:2 * k]] = float("inf")
    flat[idx[2 * k:3 * k]] = float("-inf")
    return x.to(dtype)


def L(t):
    return lathe.from_dlpack(t)


def T(t):
    return torch.from_dlpack(t)


# (name, PyTorch, Lathe): functions of one tensor, the Lathe one over lathe tensors.
UNARY = [
    ("relu", torch.relu, lathe.relu),
    ("relu6", F.relu6, lathe.relu6),
    ("hardtanh", lambda x: F.hardtanh(x, -2.0, 2.5), lambda x: lathe.hardtanh(x, -2.0, 2.5)),
    ("clamp", lambda x: torch.clamp(x, -1.0, 2.0), lambda x: lathe.clamp(x, -1.0, 2.0)),
    ("clamp_min", lambda x: torch.clamp(x, min=0.5), lambda x: lathe.clamp(x, 0.5, None)),
    ("clamp_max", lambda x: torch.clamp(x, max=0.5), lambda x: lathe.clamp(x, None, 0.5)),
    ("gelu", F.gelu, lathe.gelu),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda x: lathe.gelu(x, "tanh")),
    ("silu", F.silu, lathe.silu),
    ("sigmoid", torch.sigmoid, lathe.sigmoid),
    ("tanh", torch.tanh, lathe.tanh),
    ("exp", torch.exp, lathe.exp),
    ("hardswish", F.hardswish, lathe.hardswish),
    ("hardsigmoid", F.hardsigmoid, lathe.hardsigmoid),
    ("abs", torch.abs, lathe.abs),
    ("maximum", lambda x: torch.maximum(x, x.flip(-1)), None),
    ("minimum", lambda x: torch.minimum(x.flip(-1), x), None),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), lambda x: lathe.max_pool2d(x, [2, 2])),
    ("max_pool2d_k3s1p1", lambda x: F.max_pool2d(x, 3, 1, 1),
     lambda x: lathe.max_pool2d(x, [3, 3], [1, 1], [1, 1])),
    ("sum", lambda x: x.sum(-1), lambda x: lathe.sum(x, [-1])),
    ("mean", lambda x: x.mean((2, 3)), lambda x: lathe.mean(x, [2, 3])),
    ("amax", lambda x: x.amax(-1), lambda x: lathe.amax(x, [-1])),
    ("amin", lambda x: x.amin(1), lambda x: lathe.amin(x, [1])),
    ("softmax", lambda x: torch.softmax(x, -1), lambda x: lathe.softmax(x, -1)),
    ("log_softmax", lambda x: F.log_softmax(x, -1), lambda x: lathe.log_softmax(x, -1)),
]


def check(got, want, dtype):
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    got = got.to(want.dtype)
    # NaN where PyTorch has NaN, the same infinities, the finite values close.
    torch.testing.assert_close(got.isnan(), want.isnan())
    torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)


# Cases whose Lathe side needs more than one op: the fused pointwise engine's binary max/min.
def _binary_cases():
    return {
        "maximum": (lambda x: torch.maximum(x, x.flip(-1)),
                    lambda x, xf: lathe.maximum(x, xf)),
        "minimum": (lambda x: torch.minimum(x.flip(-1), x),
                    lambda x, xf: lathe.minimum(xf, x)),
    }


UNARY_ONLY = [c for c in UNARY if c[2] is not None]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name,torch_fn,lathe_fn", UNARY_ONLY, ids=[c[0] for c in UNARY_ONLY])
def test_eager_kernels_propagate_nan_and_inf(name, torch_fn, lathe_fn, dtype):
    x = planted((2, 3, 8, 16), dtype)
    want = torch_fn(x.float()).to(dtype) if dtype == torch.bfloat16 else torch_fn(x)
    check(T(lathe_fn(L(x))), want, dtype)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
@pytest.mark.parametrize("name,torch_fn,lathe_fn", UNARY_ONLY, ids=[c[0] for c in UNARY_ONLY])
def test_compiled_kernels_propagate_nan_and_inf(name, torch_fn, lathe_fn, backend):
    x = planted((2, 3, 8, 16))
    # Alone, and inside a chain of pointwise ops the cpu backend fuses into one program.
    alone = lathe.compile(lambda a: lathe_fn(a), backend=backend, name=f"{name}_alone")
    chained = lathe.compile(lambda a: lathe_fn(a * 1.5 + 0.25) - 0.5, backend=backend,
                            name=f"{name}_chained")
    check(T(alone(L(x))), torch_fn(x), torch.float32)
    check(T(chained(L(x))), torch_fn(x * 1.5 + 0.25) - 0.5, torch.float32)


@pytest.mark.parametrize("backend", [None, "cpu", "interpreter"])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_propagate_nan_in_both_operand_orders(name, backend):
    x = planted((4, 64), seed=1)
    torch_fn, lathe_fn = _binary_cases()[name]
    xf = x.flip(-1).contiguous()
    for a, b in ((x, xf), (xf, x)):
        fn = lathe_fn if backend is None else lathe.compile(
            lambda p, q: lathe_fn(p * 1.0 + 0.0, q * 1.0 + 0.0), backend=backend)
        want = torch.maximum(a, b) if name == "maximum" else torch.minimum(b, a)
        check(T(fn(L(a), L(b))), want, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_max_min_with_dim_pick_the_first_nan(op, dtype):
    x = planted((3, 5, 17), dtype, seed=2)
    x[0, 0, :] = float("inf")  # ties: the first index
    got = getattr(lathe, op)(L(x), 2)
    want = getattr(torch, op)(x, 2)
    if op in ("max", "min"):
        check(T(got[0]), want.values, dtype)
        assert torch.equal(T(got[1]), want.indices)
    else:
        assert torch.equal(T(got), want)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
@pytest.mark.parametrize("act", ["relu", "relu6", "gelu", "silu", "sigmoid", "hardswish", "tanh"])
def test_conv_and_linear_with_fused_activation_propagate_nan(act, backend):
    x = planted((2, 4, 10, 10), seed=3)
    w = torch.randn(6, 4, 3, 3)
    b = torch.randn(6)
    lw = torch.randn(5, 10)
    lb = torch.randn(5)
    torch_act = {"relu": torch.relu, "relu6": F.relu6, "gelu": F.gelu, "silu": F.silu,
                 "sigmoid": torch.sigmoid, "hardswish": F.hardswish, "tanh": torch.tanh}[act]
    lathe_act = getattr(lathe, act)

    def f(a, cw, cb, fw, fb):
        y = lathe_act(lathe.conv2d(a, cw, cb, [1, 1], [1, 1]))
        return y, lathe_act(lathe.linear(a, fw, fb))

    got_conv, got_lin = lathe.compile(f, backend=backend)(L(x), L(w), L(b), L(lw), L(lb))
    check(T(got_conv), torch_act(F.conv2d(x, w, b, padding=1)), torch.float32)
    check(T(got_lin), torch_act(F.linear(x, lw, lb)), torch.float32)


TORCH_CASES = [(n, f) for n, f, _ in UNARY] + [
    ("lp_pool3d", torch.nn.LPPool3d(1.5, 2)),
    ("relu_of_sum", lambda x: torch.relu(x + x.flip(-1)) * 2),
    ("clamp_chain", lambda x: torch.clamp(x * 2 - 1, -1.0, 1.0).abs()),
]


@pytest.mark.parametrize("name,fn", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_torch_compile_propagates_nan_and_inf(name, fn):
    x = planted((2, 3, 8, 16), seed=4)
    if name == "lp_pool3d":
        x = x.abs()  # the p-th root of a negative average is NaN in eager too: keep it finite
    torch._dynamo.reset()
    with torch.no_grad():
        want = fn(x)
        got = torch.compile(fn, backend="lathe")(x)
    check(got, want, torch.float32)
