"""Grad mode from Python (per thread, as in PyTorch): `with lathe.no_grad(): ...` records no
autograd nodes, `lathe.enable_grad()` switches it back on inside."""
import contextlib

from . import _C


@contextlib.contextmanager
def _grad_mode(enabled):
    prev = _C.is_grad_enabled()
    _C.set_grad_enabled(enabled)
    try:
        yield
    finally:
        _C.set_grad_enabled(prev)


def no_grad():
    """A context manager under which Lathe's ops record nothing for backward."""
    return _grad_mode(False)


@contextlib.contextmanager
def autocast(dtype=None, enabled=True):
    """Mixed precision by op, as torch.autocast("cpu", dtype=torch.bfloat16): inside the scope
    conv2d, linear and matmul run in `dtype` (lathe.bfloat16 by default, or lathe.float16), losses
    in float32, batch and layer norm compute in float32 and keep their input's dtype (the policy:
    lathe/ops/autocast.h). Per thread; nested scopes restore the outer state; compiled functions
    guard on it."""
    from . import bfloat16
    prev = _C.autocast_state()
    _C.set_autocast_state(enabled, bfloat16 if dtype is None else dtype)
    try:
        yield
    finally:
        _C.set_autocast_state(*prev)


def enable_grad():
    """A context manager under which Lathe's ops record for backward (the default)."""
    return _grad_mode(True)
