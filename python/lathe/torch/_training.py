"""Training through a Lathe subgraph: one torch.autograd.Function call per subgraph call.

The Lathe side has already run (LatheSubgraph._forward_train): the subgraph's compiled training
entry (Lathe's AOT autograd: compiled forward + compiled backward) was called on Lathe leaves that
view the torch inputs requiring grad (zero-copy, DLPack) and returned Lathe outputs carrying one
autograd node. LatheFunction ties that node into torch's autograd graph:

- forward hands the Lathe outputs to torch (DLPack, no copy); outputs Lathe did not make
  differentiable (integer results, values no gradient reaches) are marked non-differentiable;
- backward passes torch's output gradients to lathe.backward, which runs the compiled backward
  and accumulates into the Lathe leaves' .grad; those come back to torch (DLPack) as the
  gradients of the matching inputs, and torch accumulates them into param.grad as for any op.
  Inputs that only outputs without a gradient read get None, as in eager.

What Lathe's backward cannot do is done by PyTorch on the same subgraph (the FX module), with
one log line per subgraph and reason: double backward (create_graph=True), a second backward
through the same call (retain_graph=True: Lathe freed its saved values after the first), and an
output that PyTorch code modified in place before the backward (Lathe's saved values may alias
it). PyTorch reruns the subgraph from the saved inputs (buffers it would write are cloned, so
running statistics are not updated twice) and differentiates it.
"""
import logging

import torch

import lathe

logger = logging.getLogger("lathe.torch")


class LatheFunction(torch.autograd.Function):
    """apply(sub, lathe_outputs, leaves, *args): args are the subgraph's call arguments (torch
    tensors and sizes); leaves maps an argument position to the Lathe leaf standing for it."""

    @staticmethod
    def forward(ctx, sub, lathe_outputs, leaves, *args):
        # Outputs no gradient reaches get None (not zeros), so that inputs that only they read
        # get None too, as in eager (an optimizer skips a None grad, not a zero one).
        ctx.set_materialize_grads(False)
        ctx.sub = sub
        ctx.leaves = leaves
        ctx.n_args = len(args)
        ctx.non_tensors = {i: a for i, a in enumerate(args) if not isinstance(a, torch.Tensor)}
        ctx.save_for_backward(*[a if isinstance(a, torch.Tensor) else None for a in args])
        # Detached aliases: torch's outputs keep the memory alive, not Lathe's autograd graph
        # (ctx.lathe_roots holds that until the backward).
        outs = [torch.from_dlpack(o.detach()) for o in lathe_outputs]
        ctx.roots = [k for k, o in enumerate(lathe_outputs) if o.requires_grad]
        ctx.lathe_roots = [lathe_outputs[k] for k in ctx.roots]
        root_set = set(ctx.roots)
        non_diff = [o for k, o in enumerate(outs) if k not in root_set]
        if non_diff:
            ctx.mark_non_differentiable(*non_diff)
        # Aliases sharing each output's version counter (no reference cycle through grad_fn).
        ctx.out_versions = [(outs[k].detach(), outs[k]._version) for k in ctx.roots]
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        n_front = 3  # sub, lathe_outputs, leaves
        reason = None
        if torch.is_grad_enabled():
            reason = "double backward (create_graph=True)"
        elif ctx.lathe_roots is None:
            reason = "a second backward through the same call (retain_graph=True)"
        elif any(alias._version != v for alias, v in ctx.out_versions):
            reason = "an output was modified in place by PyTorch before the backward"
        if reason is not None:
            ctx.lathe_roots = None
            return (None,) * n_front + torch_backward(ctx, grads, reason)
        sub = ctx.sub
        roots, ctx.lathe_roots = ctx.lathe_roots, None
        ctx.out_versions = None
        used = [j for j, k in enumerate(ctx.roots) if grads[k] is not None]
        result = [None] * ctx.n_args
        if not used:
            return (None,) * (n_front + ctx.n_args)
        # The inputs the used outputs read (FX reachability); the others keep a None gradient.
        reached = set().union(*(sub.output_inputs[ctx.roots[j]] for j in used))
        leaves = {i: leaf for i, leaf in ctx.leaves.items() if i in reached}
        for leaf in leaves.values():
            leaf.grad = None
        try:
            lathe.backward([roots[j] for j in used],
                           [lathe.from_dlpack(grads[ctx.roots[j]].detach()) for j in used])
        except lathe.Error as e:
            raise lathe.Error(f"[lathe.torch] {sub.name}: Lathe's compiled backward failed: "
                              f"{e}") from e
        for i, leaf in ctx.leaves.items():
            g = leaf.grad
            leaf.grad = None
            if g is not None and i in leaves:
                result[i] = torch.from_dlpack(g)
        return (None,) * n_front + tuple(result)


def torch_backward(ctx, grads, reason):
    """The gradients of the call's inputs computed by PyTorch on the subgraph's FX module."""
    sub = ctx.sub
    if reason not in sub.logged_backward_fallbacks:
        sub.logged_backward_fallbacks.add(reason)
        logger.warning("[lathe.torch] %s: %s is not supported by Lathe's compiled backward; "
                       "PyTorch reruns and differentiates this subgraph", sub.name, reason)
    saved = ctx.saved_tensors
    create_graph = torch.is_grad_enabled()
    args, wrt = [], []
    for i in range(ctx.n_args):
        if i in ctx.non_tensors:
            args.append(ctx.non_tensors[i])
            continue
        a = saved[i]
        if i in ctx.leaves:
            # With create_graph the original tensor keeps the higher-order graph connected.
            a = a if create_graph else a.detach().requires_grad_()
            wrt.append(i)
        elif a is not None:
            a = a.clone()  # a buffer the subgraph writes (running stats) is written only once
        args.append(a)
    with torch.enable_grad():
        outs = sub.gm(*args)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        outs = [outs[k] for k in sub.tensor_outputs]
        pairs = [(outs[k], grads[k]) for k in ctx.roots
                 if outs[k].requires_grad and grads[k] is not None]
        if not pairs or not wrt:
            return (None,) * ctx.n_args
        gs = torch.autograd.grad([o for o, _ in pairs], [args[i] for i in wrt],
                                 [g for _, g in pairs], create_graph=create_graph,
                                 allow_unused=True)
    result = [None] * ctx.n_args
    for i, g in zip(wrt, gs):
        result[i] = g
    return tuple(result)
