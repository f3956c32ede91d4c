"""lathe.compile: Python functions over lathe tensors (and lathe modules), traced once by Lathe's
C++ tracer with fake tensors, guarded, and replayed with the GIL released.

What a call checks (Lathe's guards): each tensor argument's dtype, rank, sizes (symbolic when
dynamic) and layout; Python int/float/bool arguments by value; every lathe module the function read
while tracing (its structure, training flag and parameter/buffer tensors). Python values the
function reads from globals or closures are frozen at trace time (as lathe::compile's captured host
values): pass them as arguments instead.
"""
import functools
import weakref

from . import _C

_compiled = weakref.WeakValueDictionary()  # name -> compiled function, for lathe.metrics()
_counter = [0]


class _Compiled:
    """The callable lathe.compile returns; `.cf` is the C++ CompiledFunction."""

    def __init__(self, target, dynamic, backend, name, recompile_limit, verify, fullgraph=False):
        self._target = target  # keeps the module (its identity is what the guards check) alive
        if isinstance(target, _C.nn.Module):
            self.cf = _C._compile_module(target, dynamic, backend, name, recompile_limit, verify,
                                         fullgraph)
        else:
            self.cf = _C._compile_function(target, dynamic, backend, name, recompile_limit,
                                           verify, fullgraph)
        self.name = name
        if callable(target) and not isinstance(target, _C.nn.Module):
            functools.update_wrapper(self, target)

    def __call__(self, *args):
        return self.cf(*args)

    def stats(self):
        return self.cf.stats()

    def __getattr__(self, item):  # graph_string, guards_string, last_recompile_reason, ...
        return getattr(self.__dict__["cf"], item)


def compile(fn_or_module=None, *, dynamic=None, backend=None, name=None, recompile_limit=None,
            verify=False, fullgraph=False):
    """Compiles a function over lathe tensors, or a lathe.nn module; usable as a decorator with
    or without arguments. dynamic: None (static first, dims that change become symbolic), True
    (all sizes symbolic) or False (every new size recompiles). backend: a name from
    lathe.backend_names() ("cpu", the optimizing compiler, or "interpreter"). backend and
    recompile_limit left None (and verify, and the log topics) come from compile_options().

    A function that reads tensor data (.item(), .tolist(), print, a branch on a value) is split
    at each read into regions (graph breaks): the ops before the read run compiled, the value is
    read, and recording goes on; lathe.explain(fn, *args) shows the regions. fullgraph=True makes
    such a read an error instead."""
    if fn_or_module is None:
        return lambda f: compile(f, dynamic=dynamic, backend=backend, name=name,
                                 recompile_limit=recompile_limit, verify=verify,
                                 fullgraph=fullgraph)
    if name is None:
        name = getattr(fn_or_module, "__qualname__", None) or getattr(
            fn_or_module, "type_name", "fn")
    defaults = _C._compile_options()
    backend = defaults["backend"] if backend is None else backend
    recompile_limit = defaults["recompile_limit"] if recompile_limit is None else recompile_limit
    _counter[0] += 1
    compiled = _Compiled(fn_or_module, dynamic, backend, name, recompile_limit, verify, fullgraph)
    _compiled[f"{name}#{_counter[0]}"] = compiled
    return compiled


class ExplainOutput:
    """What lathe.explain found: graph_count, graph_break_count, ops_per_graph, break_reasons (per
    break: the read and the op that made the value), eager_graphs (regions run by the eager
    kernels because they need gradients), compiles, recompile_reasons; str() prints them."""

    def __init__(self, d):
        self.__dict__.update(d)

    def __str__(self):
        return self.text

    __repr__ = __str__


def explain(fn_or_module, *args, **compile_kwargs):
    """Compiles fn_or_module (lathe.compile's keyword arguments), calls it once with args, and
    reports how it ran, as torch._dynamo.explain: the graphs, the graph breaks and their reasons,
    the ops per graph."""
    compiled = compile(fn_or_module, **compile_kwargs)
    compiled(*args)
    return ExplainOutput(compiled.cf.explain_last_call())


def compile_options():
    """The process default of lathe.compile's options (C++ CompileOptions) as a dict: backend,
    dynamic, recompile_limit, error_on_recompile_limit, name, freeze, precision ("f32" or "bf16":
    inference entries then run convolutions and linear layers on bf16 kernels), verify,
    verify_calls, verify_rtol, verify_atol, logs. Read once from LATHE_LOGS /
    LATHE_COMPILE_VERIFY / LATHE_PRECISION."""
    return _C._compile_options()


def set_compile_options(**options):
    """Replaces fields of the process default (see compile_options()); functions compiled
    afterwards use it, e.g. set_compile_options(backend="interpreter", verify=True)."""
    _C._set_compile_options(options)


def metrics():
    """Counters: {"compiled": {name#n: stats of each live lathe.compile function (calls, hits,
    compiles, ...)}, "lazy": the lazy device's counters}."""
    return {"compiled": {k: v.stats() for k, v in list(_compiled.items())},
            "lazy": _C.lazy_metrics()}
