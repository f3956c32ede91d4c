"""torch.compile(model, backend="lathe"): Lathe as a TorchDynamo backend.

Dynamo captures the model into an FX graph (torch-level: torch.conv2d, F.batch_norm, operators,
tensor methods) and calls `backend(graph_module, example_inputs)`. The backend:

1. marks each node Lathe can run through the one table in lathe.torch._lowerings (target and
   arguments checked), and splits the graph in one linear pass (lathe.torch._partition): the
   supported regions become Lathe subgraphs, everything else stays in PyTorch (one log line per
   unsupported op, logger "lathe.torch");
2. for each Lathe subgraph, builds a Python function over lathe tensors that walks the FX nodes
   and wraps it with lathe.compile: Lathe's C++ tracer runs it once with fake tensors, records the
   graph and its guards and compiles it with Lathe's backend ("cpu" unless LATHE_TORCH_BACKEND
   says otherwise); later calls only check the guards and run the executable, GIL released;
3. lifts parameters and buffers once: they are zero-copy DLPack views of the torch tensors,
   captured by the traced function (Lathe lifts them as graph inputs by reference); every call
   checks that the same torch tensors are still passed, and re-lifts and retraces if not. An
   inference call runs with Lathe's grad mode off (torch.no_grad does not reach Lathe), so the cpu
   backend freezes the lifted tensors into constants as lathe::compile does for an eval module
   (batch norms folded into the convolutions, weights reordered once for the blocked layout); an
   in-place update seen through torch's version counter makes the next call re-freeze.

Per call, torch inputs cross through DLPack with no copy and the outputs come back the same way.

Dynamic shapes: a graph dynamo marked dynamic has symbolic sizes (s0, ...) in its tensors' fake
shapes and passes sizes as SymInt inputs. Each Lathe subgraph traces the dims dynamo made symbolic as
Lathe symbols (lathe.compile(dynamic=True), every other dim marked static), and a SymInt input that
is an expression of those symbols (s0, 2*s0, s0//4, ...) is not passed to Lathe at all: the traced
function computes it from the tensors' symbolic sizes (Tensor.sym_size), so view/reshape/expand
sizes stay symbolic. One Lathe compile then serves every batch size dynamo's graph serves; a SymInt
input Lathe cannot express is passed as an int (guarded by value: one compile per value, up to the
recompile limit), and a subgraph Lathe cannot trace with symbols is traced with static sizes.

A subgraph that Lathe rejects when it traces it (a lathe.Error the argument checks did not foresee)
runs in PyTorch from then on, with one log line saying why.

Training (a call with grad enabled where an input, parameter or buffer requires grad) maps onto
Lathe's AOT autograd:
- the graph was partitioned knowing it trains (dynamo guards grad mode): random ops (dropout) stay
  in PyTorch, whose generator then gives eager's masks;
- each Lathe subgraph has a second lathe.compile'd function for training calls. Its lifted
  parameters are aliases of the inference ones (same memory, same version counter) with
  requires_grad as in torch, and per-call tensors requiring grad enter as fresh Lathe leaves.
  Lathe traces it with grad on and compiles a forward and, from the ops' vjp rules, a backward;
  the call returns Lathe outputs holding one autograd node (lathe/trace/aot_autograd.h);
- one torch.autograd.Function node (lathe.torch._training.LatheFunction) per call hands the
  outputs to torch (DLPack) and, in torch's backward, passes the output gradients to
  lathe.backward, which runs the compiled backward; the Lathe leaves' .grad go back to torch as
  the inputs' gradients (DLPack), and torch accumulates them into param.grad. BatchNorm's running
  statistics are written in place by Lathe's forward through the zero-copy views; the optimizer's
  in-place updates are seen by the next call (torch's version counter -> Lathe's).
What Lathe cannot do falls back to PyTorch with one log line each: a subgraph Lathe cannot
compile for training (an op without a vjp, ...) is trained by PyTorch from then on (its inference
calls stay in Lathe); double backward (create_graph=True), a second backward through a call
(retain_graph=True) and an output modified in place by PyTorch before the backward are
differentiated by PyTorch, which reruns the subgraph from the saved inputs.
"""
import functools
import logging
import operator
import os

import torch
from torch.fx.passes.operator_support import OperatorSupportBase

import lathe
from . import _autocast, _budget, _lowerings, _partition, _training
from ._lowerings import TORCH_TO_LATHE_DTYPE

__all__ = ["backend", "LatheSubgraph"]

logger = logging.getLogger("lathe.torch")


def _target_name(node):
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    t = node.target
    return f"{getattr(t, '__module__', None) or ''}.{getattr(t, '__name__', str(t))}".lstrip(".")


def _tensor_meta(node):
    v = node.meta.get("example_value", node.meta.get("val"))
    return v


_INPLACE_OPERATORS = (operator.iadd, operator.isub, operator.imul, operator.itruediv)


def _writes_input_used_later(node, position):
    """An in-place call (relu(x, inplace=True)) whose input is read again later: Lathe's functional
    version would not show the write to those later reads, so PyTorch keeps it. position: node ->
    index in the graph."""
    inplace = node.kwargs.get("inplace", False) or node.target in _INPLACE_OPERATORS
    if node.target is torch.nn.functional.hardtanh and len(node.args) > 3:
        inplace = inplace or node.args[3]
    if node.target is torch.nn.functional.relu and len(node.args) > 1:
        inplace = inplace or node.args[1]
    if not inplace or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    src = node.args[0]
    if any(position[u] > position[node] for u in src.users):
        return True
    return src.op == "placeholder"  # a graph input the caller would see written


class _LatheSupport(OperatorSupportBase):
    def __init__(self, training=False):
        self.unsupported = {}  # target name -> reason (for the log)
        # A graph called with grad: random ops stay in PyTorch (Lathe's compiled training does
        # not replay random draws in the backward; PyTorch's generator also keeps eager's masks).
        self.training = training
        self._position = {}  # node -> index in its graph (built on first use)

    def _reason(self, node):
        lowering = _lowerings.lookup(node)
        if lowering is None:
            return "no Lathe lowering"
        if self.training and _lowerings.is_random(node):
            return "random op in a training graph"
        v = _tensor_meta(node)
        # Size arithmetic (x.size(), s0 * 2) runs on Lathe symbols inside the subgraph.
        if _size_exprs(v) is None:
            if not isinstance(v, torch.Tensor):
                return None if v is None else "not a tensor result"
            if v.dtype not in TORCH_TO_LATHE_DTYPE:
                return f"dtype {v.dtype}"
            if v.device.type != "cpu":
                return f"device {v.device}"
        for a in node.all_input_nodes:
            av = _tensor_meta(a)
            if isinstance(av, torch.Tensor) and (av.dtype not in TORCH_TO_LATHE_DTYPE
                                                 or av.device.type != "cpu"):
                return f"input {a.name} is {av.dtype} on {av.device}"
        if node not in self._position:
            self._position = {n: i for i, n in enumerate(node.graph.nodes)}
        if _writes_input_used_later(node, self._position):
            return "in-place write to a tensor read later"
        try:
            if not lowering.check(node):
                return "arguments Lathe does not support"
        except Exception as e:  # a check that cannot read the arguments: not supported
            return f"arguments Lathe does not support ({e})"
        return None

    def is_node_supported(self, submodules, node):
        if node.op not in ("call_function", "call_method"):
            return False
        reason = self._reason(node)
        if reason is not None:
            self.unsupported.setdefault(_target_name(node), reason)
            return False
        return True


def _to_lathe(x):
    if isinstance(x, torch.Tensor):
        return lathe.from_dlpack(x.detach() if x.requires_grad else x)
    if isinstance(x, torch.SymInt):
        return int(x)
    return x


def _to_torch(t):
    return torch.from_dlpack(t)


def _symbolic_expr(v):
    """The sympy expression of a symbolic torch.SymInt (a fake tensor's size or a SymInt input),
    None for a plain int or a SymInt dynamo has specialized."""
    if not isinstance(v, torch.SymInt):
        return None
    expr = v.node.expr
    return None if expr.is_number else expr


def _size_exprs(v):
    """A size value's sympy expression(s): an int or SymInt -> one expression, a torch.Size or a
    tuple of them -> a tuple; None for anything else (tensors, floats, ...)."""
    import sympy

    if isinstance(v, torch.SymInt):
        return v.node.expr
    if isinstance(v, int) and not isinstance(v, bool):
        return sympy.Integer(v)
    if isinstance(v, (tuple, list)) and v and not isinstance(v, torch.Tensor):
        exprs = tuple(_size_exprs(e) for e in v)
        return None if any(e is None or isinstance(e, tuple) for e in exprs) else exprs
    return None


def _sym_eval_value(exprs, env):
    """_sym_eval over one expression or a tuple of them (a torch.Size)."""
    if isinstance(exprs, tuple):
        return tuple(_sym_eval(e, env) for e in exprs)
    return _sym_eval(exprs, env)


def _free_symbols(exprs):
    if isinstance(exprs, tuple):
        return set().union(*(e.free_symbols for e in exprs))
    return exprs.free_symbols


def _sym_eval(expr, env):
    """Evaluates a sympy size expression over `env` (symbol -> int or lathe.SymInt). Raises
    KeyError / NotImplementedError for what Lathe cannot express."""
    import sympy

    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return env[expr]
    kind = type(expr).__name__
    args = [_sym_eval(a, env) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return functools.reduce(operator.add, args)
    if isinstance(expr, sympy.Mul):
        return functools.reduce(operator.mul, args)
    if kind == "FloorDiv":
        return args[0] // args[1]
    if kind in ("PythonMod", "Mod"):
        return args[0] % args[1]
    raise NotImplementedError(f"size expression {expr} ({kind})")


class _DynamicShapes:
    """How one subgraph's inputs map onto Lathe symbols.

    fakes: dynamo's example value of each placeholder (fake tensors, SymInts, ...);
    passed: the placeholders not lifted (tensors and sizes that change per call)."""

    def __init__(self, fakes, passed):
        self.symbol_source = {}  # sympy symbol -> (placeholder index, dim)
        self.static_dims = []  # (placeholder index, dims dynamo kept static)
        for i in passed:
            v = fakes[i]
            if not isinstance(v, torch.Tensor):
                continue
            static = []
            for d, size in enumerate(v.shape):
                expr = _symbolic_expr(size)
                if expr is None:
                    static.append(d)
                elif expr.is_Symbol:
                    self.symbol_source.setdefault(expr, (i, d))
            if static:
                self.static_dims.append((i, static))
        self.any_symbolic = bool(self.symbol_source)
        # Size placeholders (SymInt, torch.Size) computed inside the trace from the tensors'
        # symbolic sizes.
        self.derived = {}  # placeholder index -> sympy expression, or a tuple of them
        for i in passed:
            exprs = _size_exprs(fakes[i])
            if exprs is None or not self.can_evaluate(exprs):
                continue
            self.derived[i] = exprs

    def can_evaluate(self, exprs):
        if not _free_symbols(exprs) <= set(self.symbol_source):
            return False
        try:
            _sym_eval_value(exprs, {s: 2 for s in _free_symbols(exprs)})
        except (KeyError, NotImplementedError, ZeroDivisionError):
            return False
        return True

    def evaluate(self, exprs, args):
        """exprs at the sizes of args (torch tensors by placeholder index): a call's real value."""
        env = {s: args[i].shape[d] for s, (i, d) in self.symbol_source.items()}
        return _sym_eval_value(exprs, env)

    def derive(self, args):
        """Inside the trace: fills args (by placeholder index) with the derived sizes."""
        if not self.derived:
            return
        env = {s: args[i].sym_size(d) for s, (i, d) in self.symbol_source.items()}
        for i, exprs in self.derived.items():
            args[i] = _sym_eval_value(exprs, env)

    def static_dims_per_call(self, dynamic_positions):
        """static_dims indexed by position among the per-call arguments."""
        where = {i: k for k, i in enumerate(dynamic_positions)}
        return [(where[i], dims) for i, dims in self.static_dims]


class _Interpreter:
    """Evaluates one FX subgraph on lathe values. Called only while Lathe traces."""

    def __init__(self, gm, budget=None):
        self.budget = budget  # the graph's first-call time budget (checked per node)
        self.nodes = list(gm.graph.nodes)
        self.placeholders = [n for n in self.nodes if n.op == "placeholder"]
        self.gm = gm

    def run(self, args, lifted):
        """args: placeholder values in order (None where `lifted` holds a lathe tensor)."""
        env = {}
        it = iter(args)
        for n in self.placeholders:
            v = next(it)
            env[n] = lifted.get(n.name, v)
        for n in self.nodes:
            if n.op in ("placeholder",):
                continue
            if n.op == "output":
                out = torch.fx.node.map_arg(n.args[0], lambda a: env[a])
                return out
            if n.op == "get_attr":
                env[n] = lifted[n.name]
                continue
            if self.budget is not None:
                self.budget.check_in_trace()
            lowering = _lowerings.lookup(n)
            a = torch.fx.node.map_arg(n.args, lambda x: env[x])
            kw = torch.fx.node.map_arg(n.kwargs, lambda x: env[x])
            if n.op == "call_method":
                env[n] = lowering.run(a[0], *a[1:], **kw)
            else:
                env[n] = lowering.run(*a, **kw)
        raise lathe.Error("[lathe.torch] subgraph without an output node")


def _is_static_input(node, example):
    """Parameters and buffers: dynamo marks them (inline_inbuilt_nn_modules) or they are
    nn.Parameters; they are lifted once instead of converted per call."""
    if isinstance(example, torch.nn.Parameter):
        return True
    td = node.meta.get("tensor_dict", {})
    return td.get("_dynamo_static_input_type") is not None


class LatheSubgraph(torch.nn.Module):
    """One partition of the dynamo graph, run by a lathe.compile'd function."""

    def __init__(self, gm, static_inputs, name, fakes=None, budget=None):
        super().__init__()
        self.gm = gm  # kept for the PyTorch fallback
        self.budget = budget  # the graph's first-call budget (lathe.torch._budget), or None
        self.interp = _Interpreter(gm, budget)
        placeholders = self.interp.placeholders
        self.static_positions = [i for i, n in enumerate(placeholders) if n.name in static_inputs]
        self.static_names = [placeholders[i].name for i in self.static_positions]
        self.name = name
        self.lifted = {}  # placeholder / get_attr name -> lathe tensor
        # The same tensors for training calls: aliases sharing data and version counter, with
        # requires_grad as on the torch side (Lathe leaves whose .grad the backward fills).
        self.lifted_train = {}
        self.lifted_sources = [None] * len(self.static_positions)  # the torch tensors lifted
        self.lifted_requires_grad = [False] * len(self.static_positions)
        # torch's in-place version counter of each, when last seen: an in-place update (an
        # optimizer step, weight.mul_()) is visible through the zero-copy view, but Lathe's caches
        # keyed on contents (reordered weights) must be told.
        self.lifted_versions = [None] * len(self.static_positions)
        self.attr_requires_grad = False  # a get_attr tensor requiring grad: PyTorch trains it
        for n in gm.graph.nodes:
            if n.op == "get_attr":
                value = getattr(gm, n.target)
                self.lifted[n.name] = _to_lathe(value)
                self.lifted_train[n.name] = self.lifted[n.name].detach()
                self.attr_requires_grad |= bool(getattr(value, "requires_grad", False))
        passed = [i for i in range(len(placeholders)) if i not in set(self.static_positions)]
        fakes = fakes or [_tensor_meta(n) for n in placeholders]
        self.shapes = _DynamicShapes(fakes, passed)
        # Per call, Lathe gets the placeholders that are neither lifted nor derived sizes.
        self.dynamic_positions = [i for i in passed if i not in self.shapes.derived]
        # Per call, before Lathe sees the tensors: the dims dynamo kept static stay static.
        self.mark_static = self.shapes.static_dims_per_call(self.dynamic_positions) \
            if self.shapes.any_symbolic else []
        self.torch_fallback = False
        # Outputs that are sizes (used by PyTorch nodes after this subgraph): computed per call
        # from the inputs' sizes, not by Lathe (a compiled function returns tensors).
        (output,) = [n for n in gm.graph.nodes if n.op == "output"]
        self.output_is_sequence = isinstance(output.args[0], (tuple, list))
        outs = list(output.args[0]) if self.output_is_sequence else [output.args[0]]
        self.size_outputs = {}  # output position -> sympy expression(s)
        for k, o in enumerate(outs):
            v = _tensor_meta(o) if isinstance(o, torch.fx.Node) else o
            exprs = None if isinstance(v, torch.Tensor) else _size_exprs(v)
            if exprs is None:
                continue
            if not self.shapes.can_evaluate(exprs):
                logger.warning("[lathe.torch] %s returns the size %s, which Lathe cannot compute "
                               "from its inputs; running it in PyTorch", name, v)
                self.torch_fallback = True
            self.size_outputs[k] = exprs
        self.n_outputs = len(outs)
        self.tensor_outputs = [k for k in range(len(outs)) if k not in self.size_outputs]
        # Per tensor output (in tensor_outputs order): the placeholder positions it depends on.
        reads = {}
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                reads[n] = frozenset([placeholders.index(n)])
            elif n.op != "output":
                reads[n] = frozenset().union(*(reads[a] for a in n.all_input_nodes))
        self.output_inputs = [reads.get(outs[k], frozenset()) if isinstance(outs[k], torch.fx.Node)
                              else frozenset() for k in self.tensor_outputs]
        self.compiled = self._compile(self.lifted, self.name)
        self.compiled_train = None  # built by the first call that needs grad
        self.train_fallback = False  # Lathe cannot compile this subgraph for training
        self.logged_backward_fallbacks = set()  # reasons already logged (lathe.torch._training)

    def _compile(self, lifted, name):
        interp = self.interp
        n_ph = len(interp.placeholders)
        dynamic_positions = self.dynamic_positions
        shapes = self.shapes
        tensor_outputs = self.tensor_outputs if self.size_outputs else None

        def lathe_fn(*dyn_args):
            args = [None] * n_ph
            for i, v in zip(dynamic_positions, dyn_args):
                args[i] = v
            shapes.derive(args)
            out = interp.run(args, lifted)
            if tensor_outputs is not None:
                out = tuple(out[k] for k in tensor_outputs)
            return tuple(out) if isinstance(out, (tuple, list)) else out

        lathe_fn.__qualname__ = name
        # Symbolic dims as Lathe symbols: every size is a symbol (dynamic=True) except the dims
        # marked static per call (self.shapes.mark), i.e. exactly dynamo's symbolic dims.
        return lathe.compile(lathe_fn, dynamic=shapes.any_symbolic, backend=_backend_name(),
                             name=name)

    def _relift(self, args):
        """Lifts the parameters and buffers passed in args (once per torch tensor). Returns True
        when a different tensor (or requires_grad) arrived: the traced graphs captured the old."""
        changed = False
        for k, i in enumerate(self.static_positions):
            src = args[i]
            name = self.static_names[k]
            if self.lifted_sources[k] is not src or \
                    self.lifted_requires_grad[k] != src.requires_grad:
                self.lifted_sources[k] = src
                self.lifted_versions[k] = src._version
                self.lifted_requires_grad[k] = src.requires_grad
                self.lifted[name] = _to_lathe(src)
                self.lifted_train[name] = self.lifted[name].detach().requires_grad_(
                    src.requires_grad and src.is_floating_point())
                changed = True
            elif self.lifted_versions[k] != src._version:
                self.lifted_versions[k] = src._version
                self.lifted[name].bump_version()  # the training alias shares the counter
        return changed

    def _call_lathe(self, compiled, dyn):
        for k, dims in self.mark_static:
            lathe.mark_static(dyn[k], dims)
        return compiled(*dyn)

    def _call_inference(self, dyn):
        """An inference call runs with Lathe's grad mode off (torch's is Lathe-invisible): no
        Lathe tensor here requires grad, and only an entry traced without grad lets the cpu
        backend freeze the lifted parameters into constants (batch norms folded into the
        convolutions, weights reordered once for the blocked layout, see
        CompileOptions::freeze). An in-place update of a parameter (torch's version counter,
        _relift) drops the frozen entry and the next call re-freezes."""
        prev = lathe.is_grad_enabled()
        lathe.set_grad_enabled(False)
        try:
            return self._call_lathe(self.compiled, dyn)
        finally:
            lathe.set_grad_enabled(prev)

    def _results(self, outs, args):
        """The subgraph's outputs in FX order: torch tensors (outs) and the size outputs."""
        if self.size_outputs:
            results = [None] * self.n_outputs
            for k, t in zip(self.tensor_outputs, outs):
                results[k] = t
            for k, exprs in self.size_outputs.items():
                results[k] = self.shapes.evaluate(exprs, args)
            return tuple(results) if self.output_is_sequence else results[0]
        if self.output_is_sequence or len(outs) != 1:
            return tuple(outs)
        return outs[0]

    def _over_budget(self):
        return self.budget is not None and self.budget.check()

    def forward(self, *args):
        if self.torch_fallback or self._over_budget():
            return self.gm(*args)
        if torch.is_grad_enabled() and any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return self._forward_train(args)
        if self._relift(args):
            for c in (self.compiled, self.compiled_train):
                if c is not None and c.stats()["calls"] > 0:
                    c.reset()  # new parameter tensors: the traced graph captured the old ones
        dyn = [_to_lathe(args[i]) for i in self.dynamic_positions]
        try:
            out = self._call_inference(dyn)
        except Exception as e:
            if self._over_budget():
                return self.gm(*args)
            if not isinstance(e, lathe.Error):
                raise
            # A call the capability checks let through but Lathe rejects (its message says why):
            # PyTorch runs this subgraph from now on, and gives its own error if the call is bad.
            logger.warning("[lathe.torch] %s: Lathe could not run this subgraph, running it in "
                           "PyTorch from now on: %s", self.name, e)
            self.torch_fallback = True
            return self.gm(*args)
        outs = out if isinstance(out, tuple) else (out,)
        return self._results([_to_torch(t) for t in outs], args)

    def _forward_train(self, args):
        """A call that needs grad: Lathe's compiled forward on Lathe leaves, tied into torch's
        autograd by one LatheFunction node whose backward runs Lathe's compiled backward."""
        if self.train_fallback or self._over_budget():
            return self.gm(*args)
        if self.attr_requires_grad:
            return self._train_in_torch(args, "a module attribute (get_attr) requires grad")
        if self._relift(args):
            for c in (self.compiled, self.compiled_train):
                if c is not None and c.stats()["calls"] > 0:
                    c.reset()
        if self.compiled_train is None:
            self.compiled_train = self._compile(self.lifted_train, self.name + "_train")
        leaves = {}  # argument position -> Lathe leaf (its .grad is the input's gradient)
        for k, i in enumerate(self.static_positions):
            leaf = self.lifted_train[self.static_names[k]]
            if leaf.requires_grad:
                leaves[i] = leaf
        dyn = []
        for i in self.dynamic_positions:
            a = args[i]
            t = _to_lathe(a)
            if isinstance(a, torch.Tensor) and a.requires_grad and a.is_floating_point():
                t = t.detach().requires_grad_()  # a fresh leaf per call
                leaves[i] = t
            dyn.append(t)
        try:
            out = self._call_lathe(self.compiled_train, dyn)
        except Exception as e:
            if self._over_budget():
                return self.gm(*args)
            if not isinstance(e, lathe.Error):
                raise
            return self._train_in_torch(args, str(e))
        outs = out if isinstance(out, tuple) else (out,)
        torch_outs = _training.LatheFunction.apply(self, list(outs), leaves, *args)
        return self._results(list(torch_outs), args)

    def _train_in_torch(self, args, reason):
        logger.warning("[lathe.torch] %s: Lathe cannot compile this subgraph for training, "
                       "PyTorch trains it from now on (inference calls still run in Lathe): %s",
                       self.name, reason)
        self.train_fallback = True
        return self.gm(*args)


def _backend_name():
    return os.environ.get("LATHE_TORCH_BACKEND", "cpu")


_graph_counter = [0]


def _absorb_input_getitems(gm, partitions, support):
    """Puts a supported getitem on graph inputs (a buffer slice: bert's position_ids[:, :seq])
    into the one partition that uses it. The partitioner leaves a getitem whose source's users are
    all getitems (a tuple) where its source is: nowhere for a graph input, so the slice ran in
    PyTorch and reached Lathe as a per-call input, never frozen."""
    where = {n: k for k, p in enumerate(partitions) for n in p}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not operator.getitem or node in where:
            continue
        if not node.all_input_nodes or \
                any(a.op != "placeholder" for a in node.all_input_nodes):
            continue
        users = {where.get(u) for u in node.users}
        if len(users) != 1 or None in users or not support.is_node_supported(None, node):
            continue
        (k,) = users
        partitions[k].insert(0, node)  # its inputs are graph inputs: first is in order
        where[node] = k


def backend(gm: torch.fx.GraphModule, example_inputs):
    """The TorchDynamo backend (torch.compile(model, backend="lathe"))."""
    _graph_counter[0] += 1
    gid = _graph_counter[0]
    # torch.autocast regions become explicit casts (the pieces Lathe and PyTorch run then agree
    # without PyTorch's autocast state).
    try:
        _autocast.make_autocast_explicit(gm)
    except NotImplementedError as e:
        logger.warning("[lathe.torch] graph %d stays in PyTorch (%s)", gid, e)
        return gm.forward
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    static_inputs = {n.name for n, ex in zip(placeholders, example_inputs)
                     if _is_static_input(n, ex)}

    # Dynamo guards grad mode: a graph traced with grad enabled and parameters (or inputs)
    # requiring grad is called for training.
    training = torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)
    budget = _budget.CompileBudget(f"graph {gid}")
    support = _LatheSupport(training)
    partitions = _partition.propose_partitions(gm, lambda n: support.is_node_supported(None, n))
    for target, reason in support.unsupported.items():
        logger.warning("[lathe.torch] graph %d: %s stays in PyTorch (%s)", gid, target, reason)
    if not partitions or budget.check():
        return gm.forward
    _absorb_input_getitems(gm, partitions, support)
    fused = _partition.fuse_partitions(gm, partitions)
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not node.target.startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        sub_static = set()
        fakes = []
        # The partition's placeholders follow the call's arguments in order.
        for ph, arg in zip([n for n in sub.graph.nodes if n.op == "placeholder"], node.args):
            if isinstance(arg, torch.fx.Node) and arg.op == "placeholder" and \
                    arg.name in static_inputs:
                sub_static.add(ph.name)
            fakes.append(_tensor_meta(arg) if isinstance(arg, torch.fx.Node) else arg)
        setattr(fused, node.target,
                LatheSubgraph(sub, sub_static, f"torch_graph{gid}_{node.target}", fakes, budget))
    # No recompile: the generated forward looks its submodules up by name on every call.

    def run(*args):
        if not budget.active:
            return fused.forward(*args)
        # The budget covers the first call (where Lathe traces and compiles each subgraph).
        try:
            return fused.forward(*args)
        finally:
            budget.finish()

    return run


def _register():
    """Makes backend="lathe" work after `import lathe.torch` even without the installed entry
    point (a build-tree checkout); the installed package also registers it through the
    torch_dynamo_backends entry point."""
    from importlib.metadata import entry_points

    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    # With the entry point installed, dynamo registers it when "lathe" is first looked up (and
    # that lookup imports this module): registering here too would be a duplicate.
    if "lathe" in entry_points(group="torch_dynamo_backends").names:
        return
    if "lathe" not in _COMPILER_FNS:
        register_backend(compiler_fn=backend, name="lathe")


_register()
