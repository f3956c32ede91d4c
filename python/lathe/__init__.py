"""Lathe: a C++ deep-learning library with a trace-once compiler, from Python.

    import lathe
    x = lathe.from_dlpack(numpy_array)          # zero-copy
    y = lathe.relu(x) + 1.0
    np.from_dlpack(y)                            # zero-copy back

    @lathe.compile
    def f(x, y):
        return lathe.relu(x) @ y                 # traced once by Lathe's tracer, then replayed

    torch.compile(model, backend="lathe")        # see lathe.torch
"""
from . import _C
from ._C import (  # noqa: F401  (the public API)
    Error, DataReadWhileTracing, Tensor, dtype, bool, int32, int64, float32, float64, bfloat16, float16, itemsize,
    empty, zeros, ones, full, arange, randn, manual_seed,
    add, sub, rsub, mul, div, pow, eq, ne, lt, le, gt, ge, maximum, minimum, logical_not, where,
    neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, erf, relu, relu6, hardtanh, hardswish,
    hardsigmoid, gelu, silu, clamp, matmul, linear, conv2d, max_pool2d, avg_pool2d,
    adaptive_avg_pool2d, batch_norm, layer_norm, softmax, log_softmax, dropout, embedding,
    nll_loss, cross_entropy, scaled_dot_product_attention, cat, stack, split, chunk, sum, mean,
    amax, amin, max, min, argmax, argmin, var, std, backend_names, set_compile_logs,
    CompiledFunction, SymInt, mark_dynamic, mark_static, backward, is_grad_enabled,
    set_grad_enabled,
)
from ._C import nn, io, models  # noqa: F401
from ._C import cpu_options, set_cpu_options  # noqa: F401
from . import distributed  # noqa: F401
from ._autograd import autocast, enable_grad, no_grad  # noqa: F401
from ._compile import compile, compile_options, explain, metrics, set_compile_options  # noqa: F401
from ._tensor import from_dlpack, from_numpy, tensor  # noqa: F401
from . import _logs

_logs.install()

from ._C import __version__  # noqa: F401  (lathe/base/version.h)
