"""The ONE table from PyTorch's FX nodes (dynamo's torch-level graph) to Lathe ops.

Each entry maps an FX target (a function for call_function, a method name for call_method) to a
Lowering: `run(*args, **kwargs)` computes the node on lathe tensors (and Python numbers), and
`check(node)` says whether Lathe can run this particular call (its arguments), so that the
partitioner keeps everything else in PyTorch. Tensor arguments arrive as lathe.Tensor.
"""
import operator

import torch
import torch.nn.functional as F

import lathe

TORCH_TO_LATHE_DTYPE = {
    torch.float32: lathe.float32,
    torch.float64: lathe.float64,
    torch.bfloat16: lathe.bfloat16,
    torch.float16: lathe.float16,
    torch.int64: lathe.int64,
    torch.int32: lathe.int32,
    torch.bool: lathe.bool,
}

_INT64_MAX = 2**63 - 1


class Lowering:
    def __init__(self, run, check=None):
        self.run = run
        self.check = check or (lambda node: True)


FUNCTIONS = {}  # call_function target -> Lowering
METHODS = {}  # call_method name -> Lowering


def _register(table, targets, check=None):
    def wrap(run):
        for t in targets:
            table[t] = Lowering(run, check)
        return run

    return wrap


def function(*targets, check=None):
    return _register(FUNCTIONS, targets, check)


def method(*names, check=None):
    return _register(METHODS, names, check)


def lookup(node):
    """The Lowering of an FX node, or None."""
    if node.op == "call_function":
        return FUNCTIONS.get(node.target)
    if node.op == "call_method":
        return METHODS.get(node.target)
    return None


def _is_tensor(x):
    return isinstance(x, lathe.Tensor)


def _pair(v):
    return [v, v] if isinstance(v, int) else list(v)


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _falsy_arg(i, name):
    return lambda node: not _arg(node, i, name, False)


def _none_arg(i, name):
    return lambda node: _arg(node, i, name, None) is None


# ---- arithmetic: Python operators and torch functions, tensors or numbers on either side ----
def _binary(tensor_op, python_op, reflected=None):
    def run(a, b, *, alpha=None):
        if alpha is not None and alpha != 1:
            b = b * alpha
        if _is_tensor(a):
            return tensor_op(a, b)
        if _is_tensor(b):
            return reflected(b, a) if reflected else tensor_op(lathe.full([], a, b.dtype), b)
        return python_op(a, b)

    return run


function(operator.add, operator.iadd, torch.add)(_binary(lathe.add, operator.add, lathe.add))
function(operator.sub, operator.isub, torch.sub)(_binary(lathe.sub, operator.sub, lathe.rsub))
function(operator.mul, operator.imul, torch.mul)(_binary(lathe.mul, operator.mul, lathe.mul))
function(operator.truediv, operator.itruediv, torch.div,
         check=lambda n: n.kwargs.get("rounding_mode") is None)(
    _binary(lambda a, b: lathe.div(a, b), operator.truediv,
            lambda t, s: lathe.div(lathe.full([], s, t.dtype), t)))
function(operator.pow, torch.pow)(_binary(lathe.pow, operator.pow))
function(operator.matmul, torch.matmul, torch.bmm, torch.mm)(lambda a, b: lathe.matmul(a, b))
function(operator.neg, torch.neg)(lambda a: -a)
function(operator.floordiv)(lambda a, b: a // b)  # sizes only (tensors stay in PyTorch)


@function(operator.getitem)
def _getitem(x, index):
    """Basic indexing (ints, slices, None, ...) as views; tuples and lists index as in Python."""
    if not _is_tensor(x):
        return x[index]
    if not isinstance(index, tuple):
        index = (index,)
    dim = 0
    for k, i in enumerate(index):
        if i is None:
            x = x.unsqueeze(dim)
            dim += 1
        elif i is Ellipsis:
            remaining = sum(1 for j in index[k + 1:] if j is not None and j is not Ellipsis)
            dim = x.ndim - remaining
        elif isinstance(i, int):
            x = x.select(dim, i)
        elif isinstance(i, slice):
            start = 0 if i.start is None else i.start
            stop = _INT64_MAX if i.stop is None else i.stop
            x = x.slice(dim, start, stop, 1 if i.step is None else i.step)
            dim += 1
        else:
            raise lathe.Error(f"[lathe.torch] unsupported index {i!r}")
    return x


def _basic_index(node):
    index = node.args[1]
    if not isinstance(index, tuple):
        index = (index,)
    ok = all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in index)
    return ok and all(not isinstance(getattr(s, a), torch.fx.Node)
                      for s in index if isinstance(s, slice) for a in ("start", "stop", "step"))


FUNCTIONS[operator.getitem].check = _basic_index


# ---- elementwise ----
for _t, _l in [(torch.relu, lathe.relu), (F.relu, lathe.relu), (torch.tanh, lathe.tanh),
               (F.tanh, lathe.tanh), (torch.sigmoid, lathe.sigmoid), (F.sigmoid, lathe.sigmoid),
               (torch.exp, lathe.exp), (torch.log, lathe.log), (torch.sqrt, lathe.sqrt),
               (torch.rsqrt, lathe.rsqrt), (torch.abs, lathe.abs), (torch.erf, lathe.erf),
               (F.relu6, lathe.relu6), (F.hardswish, lathe.hardswish),
               (F.hardsigmoid, lathe.hardsigmoid), (F.silu, lathe.silu)]:
    FUNCTIONS[_t] = Lowering((lambda l: lambda x, inplace=False: l(x))(_l))
for _name, _l in [("relu", lathe.relu), ("tanh", lathe.tanh), ("sigmoid", lathe.sigmoid),
                  ("exp", lathe.exp), ("sqrt", lathe.sqrt), ("rsqrt", lathe.rsqrt)]:
    METHODS[_name] = Lowering((lambda l: lambda x: l(x))(_l))


@function(F.hardtanh)
def _hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    return lathe.hardtanh(x, float(min_val), float(max_val))


@function(F.gelu, torch._C._nn.gelu)
def _gelu(x, approximate="none"):
    return lathe.gelu(x, approximate)


def _clamp_check(node):
    lo, hi = _arg(node, 1, "min"), _arg(node, 2, "max")
    return lo is not None or hi is not None  # neither: PyTorch gives its error


@function(torch.clamp, torch.clip, check=_clamp_check)
@method("clamp", "clip", check=_clamp_check)
def _clamp(x, min=None, max=None):
    """Number bounds run Lathe's clamp; tensor bounds (broadcast against x, NaN propagating as in
    PyTorch) run maximum then minimum."""
    if _is_tensor(min):
        x = lathe.maximum(x, min)
        min = None
    if _is_tensor(max):
        x = lathe.minimum(x, max)
        max = None
    if min is None and max is None:
        return x
    return lathe.clamp(x, min, max)


# ---- linear algebra, convolution, pooling, normalization ----
@function(F.linear, torch._C._nn.linear)
def _linear(x, weight, bias=None):
    return lathe.linear(x, weight, bias)


@function(torch.conv2d, F.conv2d, check=lambda n: not isinstance(_arg(n, 4, "padding", 0), str))
def _conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return lathe.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), groups)


def _max_pool_check(node):
    return not _arg(node, 6, "return_indices", False)


@function(F.max_pool2d, torch.max_pool2d, check=_max_pool_check)
def _max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
    stride = [] if stride is None or stride == [] else _pair(stride)
    return lathe.max_pool2d(x, _pair(kernel_size), stride, _pair(padding), _pair(dilation),
                            ceil_mode)


@function(F.avg_pool2d, check=_none_arg(6, "divisor_override"))
def _avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    stride = [] if stride is None else _pair(stride)
    return lathe.avg_pool2d(x, _pair(kernel_size), stride, _pair(padding), ceil_mode,
                            count_include_pad)


@function(F.adaptive_avg_pool2d,
          check=lambda n: None not in _pair(_arg(n, 1, "output_size")))
def _adaptive_avg_pool2d(x, output_size):
    return lathe.adaptive_avg_pool2d(x, _pair(output_size))


@function(F.batch_norm)
def _batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    return lathe.batch_norm(x, running_mean, running_var, weight, bias, training,
                            0.1 if momentum is None else momentum, eps)


@function(F.layer_norm)
def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return lathe.layer_norm(x, list(normalized_shape), weight, bias, eps)


def _dropout_check(node):
    # In eval mode (or with p == 0) dropout is the identity and an in-place one writes nothing
    # (mnasnet's classifier: Dropout(inplace=True)); in training, the write stays in PyTorch.
    return not is_random(node) or not _arg(node, 3, "inplace", False)


@function(F.dropout, check=_dropout_check)
def _dropout(x, p=0.5, training=True, inplace=False):
    return x if not training or p == 0 else lathe.dropout(x, p, True)


def is_random(node):
    """True for a call that draws random numbers (dropout in training mode with p > 0)."""
    if node.op == "call_function" and node.target is F.dropout:
        return bool(_arg(node, 2, "training", True)) and _arg(node, 1, "p", 0.5) != 0
    return False


@function(F.embedding, check=lambda n: _arg(n, 3, "max_norm") is None)
def _embedding(indices, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    return lathe.embedding(weight, indices)


def _softmax_check(node):
    return node.kwargs.get("dtype", _arg(node, 3 if node.op == "call_function" else 2, "dtype")) \
        is None


@function(F.softmax, torch.softmax, check=_softmax_check)
def _softmax(x, dim=None, _stacklevel=3, dtype=None):
    return lathe.softmax(x, dim)


METHODS["softmax"] = Lowering(lambda x, dim, dtype=None: lathe.softmax(x, dim), _softmax_check)


@function(F.log_softmax, check=_softmax_check)
def _log_softmax(x, dim=None, _stacklevel=3, dtype=None):
    return lathe.log_softmax(x, dim)


@function(F.scaled_dot_product_attention,
          check=lambda n: _arg(n, 4, "dropout_p", 0.0) == 0.0 and not n.kwargs.get("enable_gqa"))
def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return lathe.scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale)


# ---- shapes ----
def _dims(args):
    """view(2, 3) / view((2, 3)) / permute([0, 1]): the dims as one list."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        return list(args[0])
    return list(args)


@function(torch.cat, torch.concat, torch.concatenate)
def _cat(tensors, dim=0):
    return lathe.cat(list(tensors), dim)


@function(torch.stack)
def _stack(tensors, dim=0):
    return lathe.stack(list(tensors), dim)


@function(torch.flatten)
@method("flatten")
def _flatten(x, start_dim=0, end_dim=-1):
    return x.flatten(start_dim, end_dim)


@method("view", "reshape")
@function(torch.reshape)
def _reshape(x, *shape):
    return x.reshape(_dims(shape))


@method("expand")
def _expand(x, *sizes):
    return x.expand(_dims(sizes))


@method("permute")
@function(torch.permute)
def _permute(x, *dims):
    return x.permute(_dims(dims))


@method("transpose")
@function(torch.transpose)
def _transpose(x, dim0, dim1):
    return x.transpose(dim0, dim1)


@method("t")
@function(torch.t)
def _t(x):
    return x.t()


@method("contiguous")
def _contiguous(x, memory_format=None):
    return x.contiguous()


@method("unsqueeze")
@function(torch.unsqueeze)
def _unsqueeze(x, dim):
    return x.unsqueeze(dim)


@method("squeeze")
@function(torch.squeeze)
def _squeeze(x, dim=None):
    if dim is None:
        return x.squeeze()
    if isinstance(dim, int):
        return x.squeeze(dim)
    # A tuple of dims (dims of size other than 1 stay, as in PyTorch): from the last, so that the
    # earlier dims keep their positions.
    n = x.ndim
    for d in sorted({d + n if d < 0 else d for d in dim}, reverse=True):
        x = x.squeeze(d)
    return x


@method("size")
def _size(x, dim=None):
    # Symbolic sizes stay lathe.SymInt (no specialization) when the subgraph traces dynamic dims.
    return tuple(x.sym_shape) if dim is None else x.sym_size(dim)


def _to_check(node):
    """Only .to(dtype) (with non_blocking/copy flags): devices and tensors stay in PyTorch."""
    args = list(node.args[1:]) + list(node.kwargs.values())
    dtypes = [a for a in args if isinstance(a, torch.dtype)]
    return len(dtypes) == 1 and dtypes[0] in TORCH_TO_LATHE_DTYPE and all(
        isinstance(a, (bool, torch.dtype)) for a in args)


@method("to", check=_to_check)
def _to(x, *args, **kwargs):
    for a in list(args) + list(kwargs.values()):
        if a in TORCH_TO_LATHE_DTYPE:
            return x.to(TORCH_TO_LATHE_DTYPE[a])
    raise lathe.Error("[lathe.torch] .to() without a dtype")


# ---- reductions ----
def _reduction(op):
    def run(x, dim=None, keepdim=False, dtype=None):
        dims = [] if dim is None else ([dim] if isinstance(dim, int) else list(dim))
        return op(x, dims, keepdim)

    return run


for _name, _op in [("mean", lathe.mean), ("sum", lathe.sum), ("amax", lathe.amax),
                   ("amin", lathe.amin)]:
    _check = (lambda n: n.kwargs.get("dtype") is None)
    METHODS[_name] = Lowering(_reduction(_op), _check)
    FUNCTIONS[getattr(torch, _name)] = Lowering(_reduction(_op), _check)
