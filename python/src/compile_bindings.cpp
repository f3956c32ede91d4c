// lathe.compile for Python functions over lathe tensors (and lathe modules): the C++ tracer runs
// the Python function once with fake tensors, then calls only check guards and run the graph
// with the GIL released. Also the compile options' process default, the compile logs and
// lathe.metrics().
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <memory>

#include "bindings.h"
#include "lathe/backend/backend.h"
#include "lathe/core/dispatch_mode.h"
#include "lathe/lazy/lazy.h"
#include "lathe/nn/module.h"
#include "lathe/trace/compile.h"

namespace lathe::python {

namespace {

// What the traced Python function returned, so that calls give back the same structure. Written
// under the tracing lock, read by calls after their entry was traced.
enum class ResultKind : int { kTensor, kTuple, kList };

struct PyFunction {
  nb::object fn;
  std::atomic<int> result_kind{static_cast<int>(ResultKind::kTensor)};
};

nb::object to_python(const Arg& a) {
  return std::visit([](const auto& v) { return nb::cast(v); }, a);
}

Arg from_python(nb::handle h, size_t i) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  // bool before int: Python's bool is an int.
  if (PyBool_Check(h.ptr())) return nb::cast<bool>(h);
  if (PyLong_Check(h.ptr())) return nb::cast<int64_t>(h);
  if (PyFloat_Check(h.ptr())) return nb::cast<double>(h);
  throw Error(detail::str("[compile] argument ", i, " is a ",
                          nb::cast<std::string>(nb::type_name(h.type())),
                          "; compiled functions take lathe.Tensor, int, float or bool"));
}

std::vector<Tensor> results_from_python(const nb::object& r, PyFunction& state) {
  if (nb::isinstance<Tensor>(r)) {
    state.result_kind = static_cast<int>(ResultKind::kTensor);
    return {nb::cast<Tensor>(r)};
  }
  const bool is_tuple = nb::isinstance<nb::tuple>(r), is_list = nb::isinstance<nb::list>(r);
  LATHE_CHECK(is_tuple || is_list, "[compile] the compiled function returned a ",
              nb::cast<std::string>(nb::type_name(r.type())),
              "; it must return a lathe.Tensor or a tuple/list of them");
  std::vector<Tensor> out;
  for (nb::handle h : r) {
    LATHE_CHECK(nb::isinstance<Tensor>(h), "[compile] the compiled function returned a ",
                is_tuple ? "tuple" : "list", " holding a ",
                nb::cast<std::string>(nb::type_name(h.type())), "; only lathe.Tensor is allowed");
    out.push_back(nb::cast<Tensor>(h));
  }
  state.result_kind = static_cast<int>(is_tuple ? ResultKind::kTuple : ResultKind::kList);
  return out;
}

// The Python-facing compiled callable.
class PyCompiled {
 public:
  PyCompiled(nb::object fn, CompileOptions options) : state_(std::make_shared<PyFunction>()) {
    state_->fn = std::move(fn);
    std::shared_ptr<PyFunction> state = state_;
    fn_ = std::make_unique<CompiledFunction>(
        [state](const std::vector<Arg>& args) -> std::vector<Tensor> {
          nb::gil_scoped_acquire gil;
          nb::list py_args;
          for (const Arg& a : args) py_args.append(to_python(a));
          nb::object r;
          try {
            r = state->fn(*py_args);
          } catch (nb::python_error& e) {
            // A data read in the Python function: the C++ type again, for the compile cache.
            if (e.matches(nb::module_::import_("lathe._C").attr("DataReadWhileTracing")))
              throw DataReadWhileTracing(nb::cast<std::string>(nb::str(e.value())));
            throw;
          }
          return results_from_python(r, *state);
        },
        std::move(options));
  }
  PyCompiled(std::shared_ptr<nn::Module> module, CompileOptions options)
      : fn_(std::make_unique<CompiledFunction>(std::move(module), std::move(options))) {}

  ~PyCompiled() {
    // The cache holds the traced function (a Python object) inside a C++ closure: drop it with
    // the GIL held, which the caller of this destructor has.
    fn_.reset();
  }

  nb::object call(nb::args args) {
    std::vector<Arg> in;
    in.reserve(args.size());
    size_t i = 0;
    for (nb::handle h : args) in.push_back(from_python(h, i++));
    std::vector<Tensor> out;
    {
      nb::gil_scoped_release r;
      out = (*fn_)(in);
    }
    ResultKind kind =
        state_ ? static_cast<ResultKind>(state_->result_kind.load()) : ResultKind::kTensor;
    if (!state_ && out.size() != 1) kind = ResultKind::kTuple;
    if (kind == ResultKind::kTensor && out.size() == 1) return nb::cast(out[0]);
    nb::list l;
    for (Tensor& t : out) l.append(nb::cast(std::move(t)));
    if (kind == ResultKind::kList) return l;
    return nb::tuple(l);
  }

  const CompiledFunction& fn() const { return *fn_; }
  CompiledFunction& fn() { return *fn_; }

 private:
  std::shared_ptr<PyFunction> state_;  // null for compiled modules
  std::unique_ptr<CompiledFunction> fn_;
};

// The process default (lathe.set_compile_options) with the arguments of lathe.compile over it.
CompileOptions make_options(nb::object dynamic, const std::string& backend, const std::string& name,
                            int recompile_limit, bool verify, bool fullgraph) {
  CompileOptions o = default_compile_options();
  o.fullgraph = o.fullgraph || fullgraph;
  o.backend = backend;
  o.name = name;
  o.recompile_limit = recompile_limit;
  o.verify = o.verify || verify;
  if (dynamic.is_none()) {
    o.dynamic = DynamicPolicy::kAuto;
  } else {
    o.dynamic = nb::cast<bool>(dynamic) ? DynamicPolicy::kDynamic : DynamicPolicy::kStatic;
  }
  return o;
}

// The options' fields a Python dict holds (the partitioner stays a C++ choice).
nb::dict options_dict(const CompileOptions& o) {
  nb::dict d;
  d["backend"] = o.backend;
  d["dynamic"] = o.dynamic == DynamicPolicy::kAuto ? nb::none()
                                                   : nb::cast(o.dynamic == DynamicPolicy::kDynamic);
  d["recompile_limit"] = o.recompile_limit;
  d["error_on_recompile_limit"] = o.error_on_recompile_limit;
  d["name"] = o.name;
  d["freeze"] = o.freeze;
  d["precision"] = std::string(dtype_name(o.precision));
  d["verify"] = o.verify;
  d["verify_calls"] = o.verify_calls;
  d["verify_rtol"] = o.verify_rtol;
  d["verify_atol"] = o.verify_atol;
  d["fullgraph"] = o.fullgraph;
  d["logs"] = o.logs;
  return d;
}

// The process default with the given fields replaced; an unknown key is an error.
void set_options(const nb::dict& fields) {
  CompileOptions o = default_compile_options();
  for (auto [key, value] : fields) {
    const std::string k = nb::cast<std::string>(key);
    if (k == "backend")
      o.backend = nb::cast<std::string>(value);
    else if (k == "dynamic")
      o.dynamic = value.is_none()         ? DynamicPolicy::kAuto
                  : nb::cast<bool>(value) ? DynamicPolicy::kDynamic
                                          : DynamicPolicy::kStatic;
    else if (k == "recompile_limit")
      o.recompile_limit = nb::cast<int>(value);
    else if (k == "error_on_recompile_limit")
      o.error_on_recompile_limit = nb::cast<bool>(value);
    else if (k == "name")
      o.name = nb::cast<std::string>(value);
    else if (k == "freeze")
      o.freeze = nb::cast<bool>(value);
    else if (k == "precision") {
      const std::string v = nb::cast<std::string>(value);
      LATHE_CHECK(v == "f32" || v == "bf16", "[compile] precision must be 'f32' or 'bf16', got '",
                  v, "'");
      o.precision = v == "bf16" ? DType::bf16 : DType::f32;
    } else if (k == "verify")
      o.verify = nb::cast<bool>(value);
    else if (k == "verify_calls")
      o.verify_calls = nb::cast<int>(value);
    else if (k == "verify_rtol")
      o.verify_rtol = nb::cast<double>(value);
    else if (k == "verify_atol")
      o.verify_atol = nb::cast<double>(value);
    else if (k == "fullgraph")
      o.fullgraph = nb::cast<bool>(value);
    else if (k == "logs")
      o.logs = nb::cast<std::string>(value);
    else
      throw Error(detail::str(
          "[compile] unknown compile option '", k, "' (known: ",
          nb::cast<std::string>(nb::str(", ").attr("join")(options_dict(o).attr("keys")())), ")"));
  }
  set_default_compile_options(std::move(o));
}

nb::dict stats_dict(const CompileStats& s) {
  nb::dict d;
  d["calls"] = s.calls;
  d["hits"] = s.hits;
  d["compiles"] = s.compiles;
  d["eager_calls"] = s.eager_calls;
  d["failed_traces"] = s.failed_traces;
  d["verified_calls"] = s.verified_calls;
  d["region_calls"] = s.region_calls;
  d["region_compiles"] = s.region_compiles;
  return d;
}

nb::dict explain_dict(const ExplainReport& r) {
  nb::dict d;
  d["graph_count"] = r.graph_count;
  d["graph_break_count"] = r.graph_break_count;
  d["ops_per_graph"] = r.ops_per_graph;
  d["break_reasons"] = r.break_reasons;
  std::vector<bool> eager(r.eager_graphs.begin(), r.eager_graphs.end());
  d["eager_graphs"] = eager;
  d["compiles"] = r.compiles;
  d["recompile_reasons"] = r.recompile_reasons;
  d["text"] = r.to_string();
  return d;
}

}  // namespace

void bind_compile(nb::module_& m) {
  nb::class_<PyCompiled>(m, "CompiledFunction")
      .def("__call__", &PyCompiled::call)
      .def("stats", [](const PyCompiled& c) { return stats_dict(c.fn().stats()); })
      .def("num_entries", [](const PyCompiled& c) { return c.fn().num_entries(); })
      .def("last_recompile_reason",
           [](const PyCompiled& c) { return c.fn().last_recompile_reason(); })
      .def(
          "graph_string", [](const PyCompiled& c, size_t e) { return c.fn().graph_string(e); },
          nb::arg("entry") = 0)
      .def(
          "guards_string", [](const PyCompiled& c, size_t e) { return c.fn().guards_string(e); },
          nb::arg("entry") = 0)
      .def("explain_last_call",
           [](const PyCompiled& c) { return explain_dict(c.fn().explain_last_call()); })
      .def("reset", [](PyCompiled& c) { c.fn().reset(); });

  m.def(
      "_compile_function",
      [](nb::object fn, nb::object dynamic, const std::string& backend, const std::string& name,
         int recompile_limit, bool verify, bool fullgraph) {
        return new PyCompiled(std::move(fn), make_options(dynamic, backend, name, recompile_limit,
                                                          verify, fullgraph));
      },
      nb::arg("fn"), nb::arg("dynamic").none(), nb::arg("backend"), nb::arg("name"),
      nb::arg("recompile_limit"), nb::arg("verify"), nb::arg("fullgraph") = false);
  m.def(
      "_compile_module",
      [](std::shared_ptr<nn::Module> mod, nb::object dynamic, const std::string& backend,
         const std::string& name, int recompile_limit, bool verify, bool fullgraph) {
        return new PyCompiled(std::move(mod), make_options(dynamic, backend, name, recompile_limit,
                                                           verify, fullgraph));
      },
      nb::arg("module"), nb::arg("dynamic").none(), nb::arg("backend"), nb::arg("name"),
      nb::arg("recompile_limit"), nb::arg("verify"), nb::arg("fullgraph") = false);

  m.def("backend_names", &backend::backend_names);
  m.def("set_compile_logs", &set_compile_logs, nb::arg("topics"));
  m.def("_compile_options", [] { return options_dict(default_compile_options()); });
  m.def("_compile_options_string", [] { return default_compile_options().to_string(); });
  m.def("_set_compile_options", &set_options, nb::arg("fields"));
  // Routes compile log lines to a Python callable (None: back to stderr). The sink runs on the
  // compiling thread, which may not hold the GIL.
  m.def("_set_compile_log_sink", [](nb::object sink) {
    if (sink.is_none()) {
      set_compile_log_sink({});
      return;
    }
    auto holder = std::shared_ptr<nb::object>(new nb::object(std::move(sink)), [](nb::object* o) {
      if (Py_IsInitialized()) {
        nb::gil_scoped_acquire gil;
        delete o;
      }
    });
    set_compile_log_sink([holder](const std::string& message) {
      if (!Py_IsInitialized()) return;
      nb::gil_scoped_acquire gil;
      try {
        (*holder)(message);
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("lathe compile log sink");
      }
    });
  });

  m.def("lazy_metrics", [] {
    lazy::Metrics s = lazy::metrics();
    nb::dict d;
    d["ops_traced"] = s.ops_traced;
    d["syncs"] = s.syncs;
    d["graphs_built"] = s.graphs_built;
    d["cache_hits"] = s.cache_hits;
    d["cache_misses"] = s.cache_misses;
    d["compiles"] = s.compiles;
    d["executions"] = s.executions;
    d["trace_s"] = s.trace_s;
    d["compile_s"] = s.compile_s;
    d["execute_s"] = s.execute_s;
    return d;
  });
  m.def("reset_lazy_metrics", &lazy::reset_metrics);
}

}  // namespace lathe::python
