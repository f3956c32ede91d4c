"""Moving data in and out of lathe.Tensor (DLPack, no copies where the layout allows)."""
from . import _C


def from_dlpack(x):
    """A lathe.Tensor viewing the memory of x (a torch tensor, numpy array or anything with
    __dlpack__ on the CPU): no copy; writes through either are seen by both. After the other
    library writes in place into memory that Lathe already used as a weight, call
    t.bump_version() so that Lathe's cached (reordered) copies of it are refreshed."""
    if isinstance(x, _C.Tensor):
        return x
    detach = getattr(x, "detach", None)
    if detach is not None and getattr(x, "requires_grad", False):
        x = detach()  # torch refuses to export tensors that require grad; detach shares memory
    return _C._from_dlpack(x)


def from_numpy(a):
    """A lathe.Tensor viewing a numpy array (no copy)."""
    return from_dlpack(a)


def tensor(data, dtype=None):
    """A new lathe.Tensor holding a copy of data (nested lists, numbers or an array)."""
    import numpy as np

    np_dtypes = {_C.float32: np.float32, _C.float64: np.float64, _C.int64: np.int64,
                 _C.int32: np.int32, _C.bool: np.bool_, _C.float16: np.float16}
    if dtype == _C.bfloat16:  # numpy has no bfloat16: round from float32
        return tensor(data, _C.float32).to(_C.bfloat16)
    a = np.array(data, dtype=np_dtypes[dtype] if dtype is not None else None)
    if dtype is None and a.dtype == np.float64 and not isinstance(data, np.ndarray):
        a = a.astype(np.float32)  # Python floats become float32, as in torch.tensor
    return from_dlpack(np.ascontiguousarray(a)).clone()


def _numpy(self):
    """A numpy array viewing this tensor's memory (no copy). numpy has no bfloat16: a bf16
    tensor raises; use t.to(lathe.float32).numpy() (exact) or torch.from_dlpack(t)."""
    import numpy as np

    if self.dtype == _C.bfloat16:
        raise TypeError("[numpy] numpy has no bfloat16; use t.to(lathe.float32).numpy() (exact) "
                        "or torch.from_dlpack(t)")
    return np.from_dlpack(self)


def _tolist(self):
    if self.dtype == _C.bfloat16:
        return _numpy(self.to(_C.float32)).tolist()
    return _numpy(self).tolist()


_C.Tensor.numpy = _numpy
_C.Tensor.tolist = _tolist


# Functional ops as methods (x.relu(), x.sum([1]), x.softmax(-1)), as in torch.
for _name in ("abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "relu", "gelu",
              "silu", "neg", "clamp", "sum", "mean", "amax", "amin", "max", "min", "argmax",
              "argmin", "var", "std", "softmax", "log_softmax", "matmul", "maximum", "minimum"):
    # A Python function (unlike the native one) binds self when looked up on an instance.
    setattr(_C.Tensor, _name, (lambda f: lambda self, *a, **k: f(self, *a, **k))(getattr(_C, _name)))
