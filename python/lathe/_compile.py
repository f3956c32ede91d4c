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

    def __init__(self, target, dynamic, backend, name, recompile_limit, verify):
        self._target = target  # keeps the module (its identity is what the guards check) alive
        if isinstance(target, _C.nn.Module):
            self.cf = _C._compile_module(target, dynamic, backend, name, recompile_limit, verify)
        else:
            self.cf = _C._compile_function(target, dynamic, backend, name, recompile_limit,
                                           verify)
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
            verify=False):
    """Compiles a function over lathe tensors, or a lathe.nn module; usable as a decorator with
    or without arguments. dynamic: None (static first, dims that change become symbolic), True
    (all sizes symbolic) or False (every new size recompiles). backend: a name from
    lathe.backend_names() ("cpu", the optimizing compiler, or "interpreter"). backend and
    recompile_limit left None (and verify, and the log topics) come from compile_options()."""
    if fn_or_module is None:
        return lambda f: compile(f, dynamic=dynamic, backend=backend, name=name,
                                 recompile_limit=recompile_limit, verify=verify)
    if name is None:
        name = getattr(fn_or_module, "__qualname__", None) or getattr(
            fn_or_module, "type_name", "fn")
    defaults = _C._compile_options()
    backend = defaults["backend"] if backend is None else backend
    recompile_limit = defaults["recompile_limit"] if recompile_limit is None else recompile_limit
    _counter[0] += 1
    compiled = _Compiled(fn_or_module, dynamic, backend, name, recompile_limit, verify)
    _compiled[f"{name}#{_counter[0]}"] = compiled
    return compiled


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
