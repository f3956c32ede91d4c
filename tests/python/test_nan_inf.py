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


def limit_at_inf(name, x, want):
    """PyTorch's erf-form gelu gives NaN at +inf (its vectorized erf); Lathe gives the limit, +inf,
    as the tanh form does in both. The one place the comparison expects Lathe to differ."""
    if name in ("gelu", "gelu_chained"):
        want = want.clone()
        want[(x == float("inf")) & want.isnan()] = float("inf")
    return want


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
    check(T(lathe_fn(L(x))), limit_at_inf(name, x, want), dtype)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
@pytest.mark.parametrize("name,torch_fn,lathe_fn", UNARY_ONLY, ids=[c[0] for c in UNARY_ONLY])
def test_compiled_kernels_propagate_nan_and_inf(name, torch_fn, lathe_fn, backend):
    x = planted((2, 3, 8, 16))
    # Alone, and inside a chain of pointwise ops the cpu backend fuses into one program.
    alone = lathe.compile(lambda a: lathe_fn(a), backend=backend, name=f"{name}_alone")
    chained = lathe.compile(lambda a: lathe_fn(a * 1.5 + 0.25) - 0.5, backend=backend,
                            name=f"{name}_chained")
    check(T(alone(L(x))), limit_at_inf(name, x, torch_fn(x)), torch.float32)
    check(T(chained(L(x))), limit_at_inf(name, x, torch_fn(x * 1.5 + 0.25)) - 0.5, torch.float32)


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
    got = T(getattr(lathe, op)(L(x), 2))
    want = getattr(torch, op)(x, 2)
    if op in ("max", "min"):
        check(got, want.values, dtype)
    else:
        assert torch.equal(got, want)


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
    conv, lin = F.conv2d(x, w, b, padding=1), F.linear(x, lw, lb)
    check(T(got_conv), limit_at_inf(act, conv, torch_act(conv)), torch.float32)
    check(T(got_lin), limit_at_inf(act, lin, torch_act(lin)), torch.float32)


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
    check(got, limit_at_inf(name, x, want), torch.float32)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_conv_network_propagates_nan(backend):
    # Enough channels for the cpu backend's blocked layouts: conv + relu (post-op), max pooling on
    # the blocked tensor, a residual sum post-op, relu6 (clip post-op) and a linear head.
    g = torch.Generator().manual_seed(5)
    x = planted((2, 8, 12, 12), seed=5)
    x[1] = torch.randn(8, 12, 12, generator=g)  # one sample without NaN: stays finite
    w1, b1 = torch.randn(16, 8, 3, 3, generator=g) * 0.2, torch.randn(16, generator=g)
    w2, b2 = torch.randn(16, 16, 3, 3, generator=g) * 0.2, torch.randn(16, generator=g)
    w3, b3 = torch.randn(16, 16, 1, 1, generator=g) * 0.2, torch.randn(16, generator=g)
    lw, lb = torch.randn(10, 16 * 36, generator=g) * 0.05, torch.randn(10, generator=g)

    def torch_net(a):
        y = F.max_pool2d(torch.relu(F.conv2d(a, w1, b1, padding=1)), 2)
        z = torch.relu(F.conv2d(y, w2, b2, padding=1) + y)
        z = F.relu6(F.conv2d(z, w3, b3))
        return torch.relu(F.linear(z.flatten(1), lw, lb))

    def lathe_net(a, w1, b1, w2, b2, w3, b3, lw, lb):
        y = lathe.max_pool2d(lathe.relu(lathe.conv2d(a, w1, b1, [1, 1], [1, 1])), [2, 2])
        z = lathe.relu(lathe.conv2d(y, w2, b2, [1, 1], [1, 1]) + y)
        z = lathe.relu6(lathe.conv2d(z, w3, b3))
        return lathe.relu(lathe.linear(z.flatten(1, -1), lw, lb))

    params = [w1, b1, w2, b2, w3, b3, lw, lb]
    f = lathe.compile(lathe_net, backend=backend)
    want = torch_net(x)
    assert want[0].isnan().any() and not want[1].isnan().any()
    for _ in range(2):
        check(T(f(L(x), *[L(p) for p in params])), want, torch.float32)
    # The same compiled function on finite data (the fused fast path).
    xf = torch.randn(2, 8, 12, 12, generator=g)
    check(T(f(L(xf), *[L(p) for p in params])), torch_net(xf), torch.float32)
