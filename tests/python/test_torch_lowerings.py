"""Lowerings of the torch backend that used to raise inside Lathe where eager PyTorch runs:
torch.clamp with tensor bounds (broadcast, one of them None) and squeeze with a tuple of dims,
forward and backward."""
import logging

import pytest
import torch

import lathe.torch  # noqa: F401  (registers backend="lathe")


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def run_both(fn, *inputs, grad=False):
    """fn in eager PyTorch and through torch.compile(backend="lathe"): outputs (and input grads).
    Asserts Lathe ran every op (no PyTorch fallback logged)."""
    log = logging.getLogger("lathe.torch")
    warnings = _Warnings()
    log.addHandler(warnings)
    try:
        results = _run_both(fn, inputs, grad)
    finally:
        log.removeHandler(warnings)
    assert not warnings.messages, warnings.messages
    return results


def _run_both(fn, inputs, grad):
    results = []
    for compiled in (False, True):
        torch._dynamo.reset()
        args = [t.detach().clone().requires_grad_(grad and t.is_floating_point()) for t in inputs]
        f = torch.compile(fn, backend="lathe", fullgraph=True) if compiled else fn
        if grad:
            out = f(*args)
            out.sum().backward()
            results.append((out.detach(), [a.grad for a in args]))
        else:
            with torch.no_grad():
                results.append((f(*args), None))
    return results


CLAMPS = {
    "both_tensors": (lambda x, lo, hi: torch.clamp(x, lo, hi), [(4, 5), (4, 5), (4, 5)]),
    "broadcast": (lambda x, lo, hi: torch.clamp(x, lo, hi), [(3, 4, 5), (5,), (4, 1)]),
    "min_none": (lambda x, hi: torch.clamp(x, None, hi), [(4, 5), (1, 5)]),
    "max_none": (lambda x, lo: torch.clamp(x, min=lo), [(4, 5), (4, 1)]),
    "method": (lambda x, lo, hi: x.clamp(lo, hi) * 2, [(2, 6), (2, 6), (6,)]),
    "clip": (lambda x, lo: torch.clip(x, max=lo), [(6,), (6,)]),
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", list(CLAMPS))
def test_clamp_with_tensor_bounds(case, grad):
    fn, shapes = CLAMPS[case]
    inputs = [torch.randn(s) for s in shapes]
    (want, want_grads), (got, got_grads) = run_both(lambda *a: fn(*a) * 1.5, *inputs, grad=grad)
    torch.testing.assert_close(got, want)
    if grad:
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w)


def test_clamp_with_tensor_bounds_propagates_nan():
    x = torch.randn(4, 5)
    x[1, 2] = float("nan")
    lo, hi = torch.full((5,), -0.5), torch.full((4, 1), 0.5)
    lo[3] = float("nan")
    (want, _), (got, _) = run_both(lambda a, b, c: torch.clamp(a, b, c) + 1, x, lo, hi)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert got.isnan().sum() > 1


SQUEEZES = {
    "tuple": lambda x: torch.squeeze(x, (1, 3)),
    "negative_and_not_one": lambda x: x.squeeze((-1, 0, 2)),  # dim 0 has size 2: stays
    "list_method": lambda x: x.squeeze([3, 1]),
    "one_dim": lambda x: x.squeeze(1),
    "all": lambda x: torch.squeeze(x),
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", list(SQUEEZES))
def test_squeeze_with_dims(case, grad):
    x = torch.randn(2, 1, 3, 1)
    fn = SQUEEZES[case]
    (want, want_grads), (got, got_grads) = run_both(lambda a: torch.relu(fn(a * 2)), x, grad=grad)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)
    if grad:
        torch.testing.assert_close(got_grads[0], want_grads[0])
