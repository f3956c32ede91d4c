"""torch.autocast regions of a dynamo graph made explicit, before partitioning.

Dynamo records `torch.amp.autocast_mode._enter_autocast(...)` / `_exit_autocast(...)` around the
ops of a `with torch.autocast("cpu", dtype=...)` block, and leaves the casts to PyTorch's
dispatcher. A graph split into Lathe and PyTorch pieces cannot carry that dispatcher state across
the pieces, so `make_autocast_explicit` applies PyTorch's CPU autocast policy as graph rewrites
(the same lists as lathe/ops/autocast.h and torch's autocast_mode.cpp):

- lower precision (linear, conv, matmul, bmm, mm, addmm, baddbmm, scaled_dot_product_attention):
  floating inputs other than float64 are cast to the autocast dtype;
- float32 (the losses): low-precision inputs are cast to float32;
- batch_norm, layer_norm, group_norm with a low-precision input: computed on the input cast to
  float32, the result cast back (PyTorch's mixed-dtype CPU kernels do the same in one pass);
- everything else runs on the dtypes it receives, as it does under autocast.

The enter / exit nodes are then removed: the graph means the same with or without PyTorch's
autocast state, and every op in it can run in Lathe (`.to(dtype)` is a supported method).
"""
from __future__ import annotations

import operator

import torch
import torch.nn.functional as F

_ENTER = torch.amp.autocast_mode._enter_autocast
_EXIT = torch.amp.autocast_mode._exit_autocast

_LOWER_FUNCTIONS = {F.linear, torch._C._nn.linear, F.conv1d, F.conv2d, F.conv3d, torch.conv2d,
                    torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm,
                    operator.matmul, F.scaled_dot_product_attention}
_LOWER_METHODS = {"matmul", "mm", "bmm", "__matmul__"}
_FP32_FUNCTIONS = {F.cross_entropy, F.nll_loss, F.mse_loss, F.l1_loss, F.smooth_l1_loss,
                   F.huber_loss, F.binary_cross_entropy, F.binary_cross_entropy_with_logits,
                   F.kl_div}
_NORM_FUNCTIONS = {F.batch_norm, F.layer_norm, F.group_norm}
_LOW = (torch.bfloat16, torch.float16)


def _meta(node):
    return node.meta.get("example_value", node.meta.get("val"))


def _cast_meta(value, dtype):
    mode = getattr(value, "fake_mode", None)
    if mode is None:
        return None
    with mode:
        return value.to(dtype)


def _insert_cast(graph, before, value, dtype):
    with graph.inserting_before(before):
        cast = graph.call_method("to", (value, dtype))
    meta = _cast_meta(_meta(value), dtype)
    if meta is not None:
        cast.meta["example_value"] = meta
    return cast


def _policy(node):
    if node.op == "call_function":
        if node.target in _LOWER_FUNCTIONS:
            return "lower"
        if node.target in _FP32_FUNCTIONS:
            return "fp32"
        if node.target in _NORM_FUNCTIONS:
            return "norm"
    if node.op == "call_method" and node.target in _LOWER_METHODS:
        return "lower"
    return None


def make_autocast_explicit(gm: torch.fx.GraphModule) -> int:
    """Rewrites gm in place; returns the number of autocast regions made explicit (0: unchanged).
    Raises NotImplementedError for a region it cannot follow (a device other than the CPU)."""
    graph = gm.graph
    if not any(n.op == "call_function" and n.target is _ENTER for n in graph.nodes):
        return 0
    stack = []  # (enabled, dtype) of the open regions
    regions = 0
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is _ENTER:
            device, dtype, enabled = node.args[0], node.args[1], node.args[2]
            if device != "cpu":
                raise NotImplementedError(f"autocast on device {device!r}")
            stack.append((bool(enabled), dtype or torch.bfloat16))
            regions += 1
            continue
        if node.op == "call_function" and node.target is _EXIT:
            stack.pop()
            continue
        if not stack or not stack[-1][0]:
            continue
        low = stack[-1][1]
        policy = _policy(node)
        if policy is None:
            continue

        def cast_args(pred, dtype):
            def f(a):
                v = _meta(a) if isinstance(a, torch.fx.Node) else None
                if isinstance(v, torch.Tensor) and pred(v.dtype):
                    return _insert_cast(graph, node, a, dtype)
                return a
            node.args = torch.fx.node.map_arg(node.args, f)
            node.kwargs = torch.fx.node.map_arg(node.kwargs, f)

        if policy == "lower":
            cast_args(lambda d: d.is_floating_point and d not in (torch.float64, low), low)
        elif policy == "fp32":
            cast_args(lambda d: d in _LOW, torch.float32)
        else:  # a norm: compute in float32, cast the result back
            x = node.args[0]
            xv = _meta(x) if isinstance(x, torch.fx.Node) else None
            if not (isinstance(xv, torch.Tensor) and xv.dtype in _LOW):
                continue
            out_dtype = xv.dtype
            node.args = (_insert_cast(graph, node, x, torch.float32),) + tuple(node.args[1:])
            out_meta = _meta(node)
            f32_meta = _cast_meta(out_meta, torch.float32) if out_meta is not None else None
            with graph.inserting_after(node):
                back = graph.call_method("to", (node, out_dtype))
            node.replace_all_uses_with(back, delete_user_cb=lambda u: u is not back)
            if out_meta is not None:
                back.meta["example_value"] = out_meta
            if f32_meta is not None:
                node.meta["example_value"] = f32_meta
    for node in reversed(list(graph.nodes)):
        if node.op == "call_function" and node.target is _EXIT:
            graph.erase_node(node)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is _ENTER:
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return regions
