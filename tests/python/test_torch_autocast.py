"""torch.compile(backend="lathe") on graphs recorded under torch.autocast("cpu", bfloat16) and on
models converted with model.to(torch.bfloat16): the results equal eager's dtypes and values within
bf16 rounding, and every op of the autocast region (the casts too) runs inside Lathe."""
import logging

import pytest
import torch
import torch.nn.functional as F

import lathe.torch  # noqa: F401  (registers the backend)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 10)
        self.ln = torch.nn.LayerNorm(10)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return self.ln(self.fc(h))


def fallbacks(caplog):
    return [r.getMessage() for r in caplog.records if "stays in PyTorch" in r.getMessage()]


def test_autocast_region_matches_eager_and_stays_in_lathe(caplog):
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 3, 12, 12)

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = net(x)
        return y

    with torch.no_grad():
        want = f(x)
        torch._dynamo.reset()
        with caplog.at_level(logging.WARNING, logger="lathe.torch"):
            got = torch.compile(f, backend="lathe")(x)
    assert got.dtype == want.dtype
    assert (got.float() - want.float()).abs().max() <= 3e-2 * want.float().abs().max()
    assert not fallbacks(caplog), fallbacks(caplog)


def test_autocast_training_gradients_are_f32():
    torch.manual_seed(1)
    lin = torch.nn.Linear(16, 4)
    x, t = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def loss_fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.cross_entropy(lin(x), t)

    ref = loss_fn(x)
    ref.backward()
    g_ref = lin.weight.grad.clone()
    lin.weight.grad = None
    torch._dynamo.reset()
    got = torch.compile(loss_fn, backend="lathe")(x)
    got.backward()
    assert got.dtype == ref.dtype == torch.float32
    assert lin.weight.grad.dtype == torch.float32
    assert torch.allclose(got, ref, rtol=2e-2, atol=2e-2)
    assert (lin.weight.grad - g_ref).abs().max() <= 5e-2 * g_ref.abs().max()


def test_bf16_model_runs_in_lathe(caplog):
    torch.manual_seed(2)
    net = Net().eval().to(torch.bfloat16)
    x = torch.randn(2, 3, 12, 12, dtype=torch.bfloat16)
    with torch.no_grad():
        want = net(x)
        torch._dynamo.reset()
        with caplog.at_level(logging.WARNING, logger="lathe.torch"):
            got = torch.compile(net, backend="lathe")(x)
    assert got.dtype == torch.bfloat16
    assert (got.float() - want.float()).abs().max() <= 3e-2 * want.float().abs().max()
    assert not fallbacks(caplog), fallbacks(caplog)
