"""lathe.autocast against torch.autocast("cpu", dtype=torch.bfloat16): the same output dtypes per
op, values within bf16 rounding of PyTorch's, f32 gradients for f32 parameters, compiled functions
recompiling when the autocast state changes, and the precision compile option."""
import pytest
import torch
import torch.nn.functional as F

import lathe


def L(t):
    return lathe.from_dlpack(t.contiguous())


def T(t):
    return torch.from_dlpack(t)


def close(a, b, rtol):
    a, b = a.double(), b.double()
    return (a - b).abs().max().item() <= rtol * b.abs().max().item()


g = torch.Generator().manual_seed(0)
x = torch.randn(2, 3, 9, 9, generator=g)
w = torch.randn(8, 3, 3, 3, generator=g)
a = torch.randn(5, 16, generator=g)
lw = torch.randn(7, 16, generator=g)
lb = torch.randn(7, generator=g)
CASES = [
    ("conv2d", lambda: F.conv2d(x, w, padding=1),
     lambda: lathe.conv2d(L(x), L(w), padding=[1, 1])),
    ("linear", lambda: F.linear(a, lw, lb), lambda: lathe.linear(L(a), L(lw), L(lb))),
    ("matmul", lambda: a @ lw.t(), lambda: lathe.matmul(L(a), L(lw.t()))),
    ("relu(linear)", lambda: torch.relu(F.linear(a, lw)),
     lambda: lathe.relu(lathe.linear(L(a), L(lw)))),
    ("linear + f32", lambda: F.linear(a, lw) + lb, lambda: lathe.linear(L(a), L(lw)) + L(lb)),
    ("layer_norm(linear)", lambda: F.layer_norm(F.linear(a, lw), [7], lb, lb),
     lambda: lathe.layer_norm(lathe.linear(L(a), L(lw)), [7], L(lb), L(lb))),
    ("batch_norm(conv2d)",
     lambda: F.batch_norm(F.conv2d(x, w, padding=1), torch.zeros(8), torch.ones(8),
                          training=False),
     lambda: lathe.batch_norm(lathe.conv2d(L(x), L(w), padding=[1, 1]), L(torch.zeros(8)),
                              L(torch.ones(8)))),
    ("cross_entropy(linear)",
     lambda: F.cross_entropy(F.linear(a, lw), torch.tensor([0, 1, 2, 3, 4])),
     lambda: lathe.cross_entropy(lathe.linear(L(a), L(lw)), L(torch.tensor([0, 1, 2, 3, 4])))),
    ("softmax(matmul)", lambda: torch.softmax(a @ lw.t(), -1),
     lambda: lathe.softmax(lathe.matmul(L(a), L(lw.t())), -1)),
]


@pytest.mark.parametrize("name, ref, got", CASES, ids=[c[0] for c in CASES])
def test_ops_match_torch_autocast(name, ref, got):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = ref()
    with lathe.autocast():
        have = T(got())
    assert have.dtype == want.dtype, name
    assert close(have, want, 2e-2), name
    f32 = ref()
    assert close(have, f32, 3e-2), name


def test_gradients_reach_f32_parameters_in_f32():
    tw = torch.randn(4, 16, generator=g, requires_grad=True)
    lw_ = L(tw.detach().clone()).requires_grad_(True)
    target = torch.tensor([0, 1, 2, 3, 0])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl = F.cross_entropy(F.linear(a, tw), target)
    tl.backward()
    with lathe.autocast():
        ll = lathe.cross_entropy(lathe.linear(L(a), lw_), L(target))
    ll.backward()
    assert T(ll).dtype == torch.float32
    grad = T(lw_.grad)
    assert grad.dtype == torch.float32
    assert close(grad, tw.grad, 3e-2)


def test_nested_and_disabled_scopes():
    with lathe.autocast():
        assert T(lathe.linear(L(a), L(lw))).dtype == torch.bfloat16
        with lathe.autocast(enabled=False):
            assert T(lathe.linear(L(a), L(lw))).dtype == torch.float32
        assert T(lathe.linear(L(a), L(lw))).dtype == torch.bfloat16
    assert T(lathe.linear(L(a), L(lw))).dtype == torch.float32
    with pytest.raises(lathe.Error, match=r"\[autocast\]"):
        with lathe.autocast(dtype=lathe.float64):
            pass


def test_compiled_function_under_autocast_recompiles_for_the_state():
    lw_t = L(lw)
    f = lathe.compile(lambda t: lathe.relu(lathe.linear(t, lw_t)))
    with lathe.autocast():
        y = T(f(L(a)))
        assert y.dtype == torch.bfloat16
        assert torch.equal(y, T(lathe.relu(lathe.linear(L(a), lw_t))))
    y32 = T(f(L(a)))
    assert y32.dtype == torch.float32
    assert torch.allclose(y32, torch.relu(F.linear(a, lw)), rtol=1e-5, atol=1e-5)


def test_precision_compile_option():
    opts = lathe.compile_options()
    assert opts["precision"] == "f32"
    lathe.set_compile_options(precision="bf16")
    try:
        assert lathe.compile_options()["precision"] == "bf16"
        lw_t = L(lw)
        f = lathe.compile(lambda t: lathe.linear(t, lw_t))
        with lathe.no_grad():
            y = T(f(L(a)))
        assert y.dtype == torch.float32  # outputs keep their dtype
        assert close(y, F.linear(a, lw), 3e-2)
        with pytest.raises(lathe.Error, match="precision must be"):
            lathe.set_compile_options(precision="fp8")
    finally:
        lathe.set_compile_options(precision="f32")
