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


def enable_grad():
    """A context manager under which Lathe's ops record for backward (the default)."""
    return _grad_mode(True)
