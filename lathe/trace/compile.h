// lathe::compile: trace a function once with fake tensors into a graph plus guards, compile the
// graph with a backend, and on later calls only check the guards and run the executable.
//
//   auto f = lathe::compile([](const std::vector<lathe::Tensor>& x) {
//     return std::vector<lathe::Tensor>{lathe::relu(x[0]) + x[1]};
//   });
//   auto y = f({a, b});  // traces and compiles; later calls with matching inputs reuse it
//
// What a later call checks (the guards): the arguments' kinds, dtypes, devices, ranks, layouts and
// sizes (symbolic where dynamic), scalar arguments by value, grad mode, and every module whose
// state the function read while tracing (compile(module), a module captured by the lambda, a
// child found with child()): its structure version, training flag, and that each parameter and
// buffer is still the tensor traced (a new tensor of the same type is used in its place).
//
// NOT seen: host values captured by the lambda. A C++ number, flag or string captured by value or
// by reference is read once, while tracing, and frozen into the graph; rebinding a captured Tensor
// variable is invisible too, and so is a module's plain C++ member (not a parameter, buffer, child
// or the training flag). Pass such values as arguments instead: a scalar Arg is guarded by value.
//
//   double lr = 0.1;
//   auto bad = lathe::compile([&lr](const std::vector<lathe::Tensor>& x) {
//     return lathe::mul(x[0], lr);               // lr frozen at 0.1
//   });
//   auto good = lathe::compile([](const std::vector<lathe::Arg>& a) {
//     return lathe::mul(std::get<lathe::Tensor>(a[0]), std::get<double>(a[1]));
//   });
//   good(std::vector<lathe::Arg>{x, lr});         // a new lr recompiles (guarded by value)
//
// Training: called with grad enabled where an argument or a captured parameter requires grad,
// the entry compiles the forward and, from the ops' vjp rules, the backward (AOT autograd,
// lathe/trace/aot_autograd.h); outputs that require grad get one autograd node, and backward()
// on them runs the compiled backward and accumulates .grad on the real parameters as eager does.
//
//   auto step = lathe::compile([&](const std::vector<lathe::Tensor>& a) {
//     return lathe::cross_entropy(model->forward(a[0]), a[1]);
//   });
//   step({x, y})[0].backward();  // then opt.step(); the next call reads the updated parameters
//
// CompileOptions (lathe/trace/compile_options.h) holds every switch; CompileOptions::verify (or
// LATHE_COMPILE_VERIFY=1) runs the function eagerly beside the first
// calls of each cache entry and throws on a mismatch, naming the function and the output.
//
// See docs/trace.md for guards, recompiles, logs and limitations.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/trace/compile_options.h"

namespace lathe {

namespace nn {
class Module;
}

// One argument of a compiled call. Scalars are guarded by value: a different value recompiles.
using Arg = std::variant<Tensor, int64_t, double, bool>;

// Counters of one compiled function (all calls, all threads).
struct CompileStats {
  int64_t calls = 0;
  int64_t hits = 0;            // calls served by a cache entry
  int64_t compiles = 0;        // traces that produced an entry
  int64_t eager_calls = 0;     // calls run eagerly: recompile limit, or views of one storage
  int64_t failed_traces = 0;   // traces that threw (the error reached the caller)
  int64_t verified_calls = 0;  // calls checked against eager (CompileOptions::verify)
  // Graph breaks (the function reads tensor data while traced, see regions.h): calls run as
  // regions, and regions compiled (one per distinct structure).
  int64_t region_calls = 0;
  int64_t region_compiles = 0;
};

// How a compiled function ran its most recent call (lathe::explain, as torch._dynamo.explain):
// one graph, or regions split at graph breaks.
struct ExplainReport {
  int64_t graph_count = 0;        // graphs the call ran: 1 without breaks, else its regions
  int64_t graph_break_count = 0;  // reads of tensor data that ended a region
  std::vector<int64_t> ops_per_graph;
  std::vector<std::string> break_reasons;  // per break: the read and the op that made the value
  std::vector<uint8_t> eager_graphs;       // per graph: run by the eager kernels (training)
  int64_t compiles = 0;                    // graphs and regions compiled so far
  std::vector<std::string> recompile_reasons;
  // "Graph Count: 2\nGraph Break Count: 1\nOp Count: 7\nBreak Reasons:\n  1. item() of ..."
  std::string to_string() const;
};

namespace detail {
class CompileCache;
}

// The callable that lathe::compile returns. Copies share one cache. Safe to call from several
// threads at once (guard checks run in parallel; tracing is serialized).
class CompiledFunction {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Arg>&)>;
  CompiledFunction(Fn fn, CompileOptions options);
  // compile(module): calls module->forward_all; parameters and buffers are named by module path
  // and every module's structure version and training flag are guarded.
  CompiledFunction(std::shared_ptr<nn::Module> module, CompileOptions options);

  std::vector<Tensor> operator()(const std::vector<Arg>& args) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& args) const;
  // f({x, y}) with tensors only.
  std::vector<Tensor> operator()(std::initializer_list<Tensor> args) const;

  CompileStats stats() const;
  size_t num_entries() const;
  // Runs only the guards: the index of the entry a call with `args` would use, or -1 (a miss).
  // Executes nothing and changes no state (for benchmarks and tools).
  int check_guards(const std::vector<Arg>& args) const;
  // Why the last recompile (or eager fallback) happened: the failing guard of the most recently
  // used entry, its printed form, and expected vs actual ("" before any recompile).
  std::string last_recompile_reason() const;
  // The captured graph (Graph::to_string) and the guards of entry i, most recently used first.
  std::string graph_string(size_t entry = 0) const;
  std::string guards_string(size_t entry = 0) const;
  // How the most recent call ran: its graphs (or regions), breaks and their reasons.
  ExplainReport explain_last_call() const;
  // Drops every cache entry and the automatic-dynamic and warning state, as if the function had
  // never been called (the next call traces again); counters are kept.
  void reset();

 private:
  std::shared_ptr<detail::CompileCache> cache_;
};

// Compiles a function taking tensors (or Args) and returning a tensor or a vector of tensors.
template <class F>
requires std::is_invocable_v < F, const std::vector<Tensor>
& > || std::is_invocable_v<F, const std::vector<Arg>&> CompiledFunction
       compile(F fn, CompileOptions options = default_compile_options()) {
  auto as_vector = [](auto&& r) -> std::vector<Tensor> {
    if constexpr (std::is_convertible_v<decltype(r), Tensor>)
      return {Tensor(r)};
    else
      return std::vector<Tensor>(r);
  };
  if constexpr (std::is_invocable_v<F, const std::vector<Arg>&>) {
    return CompiledFunction(
        [fn = std::move(fn), as_vector](const std::vector<Arg>& a) { return as_vector(fn(a)); },
        std::move(options));
  } else {
    return CompiledFunction(
        [fn = std::move(fn), as_vector](const std::vector<Arg>& a) {
          std::vector<Tensor> ts;
          ts.reserve(a.size());
          for (size_t i = 0; i < a.size(); ++i) {
            const Tensor* t = std::get_if<Tensor>(&a[i]);
            LATHE_CHECK(t != nullptr, "[compile] argument ", i,
                        " is a scalar but the function takes only tensors");
            ts.push_back(*t);
          }
          return as_vector(fn(ts));
        },
        std::move(options));
  }
}

// Compiles module->forward_all (see CompiledFunction's module constructor).
CompiledFunction compile(std::shared_ptr<nn::Module> module,
                         CompileOptions options = default_compile_options());

// Compiles fn (its own cache, `options`), calls it once with `args`, and reports how it ran:
// the graphs, the graph breaks with their reasons and source ops, the ops per graph.
template <class F>
ExplainReport explain(F fn, const std::vector<Arg>& args,
                      CompileOptions options = default_compile_options()) {
  CompiledFunction f = compile(std::move(fn), std::move(options));
  f(args);
  return f.explain_last_call();
}

// Declares dim `dim` of `t` dynamic over [min, max] for the next trace that sees this tensor:
// tracing raises a constraint-violation error if the code specializes it.
void mark_dynamic(const Tensor& t, int64_t dim, int64_t min = 2, int64_t max = INT64_MAX);
// Keeps dim `dim` of `t` static even under the auto and dynamic policies.
void mark_static(const Tensor& t, int64_t dim);

// Log topics, as LATHE_LOGS: a comma list of "recompiles", "guards", "graph", "passes" (or "all").
// Replaces the process default options' logs (see compile_options.h; for tests and tools).
void set_compile_logs(const std::string& topics);

// Receives every compile log line and warning (recompiles, guards, graph, the recompile-limit
// warning), one complete message per call without a trailing newline, e.g.
// "[lathe.recompiles] recompiling 'fn' (entry 2 of at most 8): guard failed: ...". Called under a
// lock, one message at a time, from whichever thread compiles.
using CompileLogSink = std::function<void(const std::string& message)>;
// Replaces the sink (an empty function restores the default, stderr); returns the previous one.
CompileLogSink set_compile_log_sink(CompileLogSink sink);

}  // namespace lathe
