#include "lathe/backend/cpu/cpu_backend.h"

#include <chrono>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>

#include "lathe/backend/cpu/adaptive_threads.h"
#include "lathe/backend/cpu/executor.h"
#include "lathe/backend/cpu/layout_tuning.h"
#include "lathe/backend/interpreter.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/compile_time.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/measure_cache.h"

namespace lathe::backend {
namespace {

// LATHE_LOGS=passes prints the options once (again when they change).
void log_options_once(const cpu::CpuBackendOptions& o) {
  static std::mutex mu;
  static std::string last;
  const std::string s = o.to_string();
  std::lock_guard<std::mutex> lock(mu);
  if (s == last) return;
  last = s;
  std::cerr << "[lathe.passes] cpu backend options: " << s << "\n";
}

// The interpreter over the rewritten graph, with the constants the passes derived (folded
// weights, appended as graph inputs) kept here and passed after the caller's inputs.
class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::unique_ptr<Executable> inner, size_t num_inputs, std::vector<Tensor> derived,
                std::unique_ptr<cpu::AdaptiveThreads> threads)
      : inner_(std::move(inner)),
        num_inputs_(num_inputs),
        derived_(std::move(derived)),
        threads_(std::move(threads)) {}

  // With adaptive threads (LATHE_CPU_ADAPTIVE_THREADS, on by default) each call runs on the
  // thread count AdaptiveThreads picks from the calls it has timed.
  std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues symbols) override {
    if (!threads_) return run_on(inputs, symbols);
    const int full = lathe::num_threads();
    const int n = threads_->begin_call(full);
    ScopedThreadCount scope(n == full ? 0 : n);
    const auto start = std::chrono::steady_clock::now();
    std::vector<Tensor> out = run_on(inputs, symbols);
    threads_->end_call(
        n, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return out;
  }

 private:
  std::vector<Tensor> run_on(std::span<const Tensor> inputs, SymbolValues symbols) {
    if (derived_.empty()) return inner_->run(inputs, symbols);
    LATHE_CHECK(inputs.size() == num_inputs_, "[cpu] the graph takes ", num_inputs_,
                " inputs, got ", inputs.size());
    std::vector<Tensor> all(inputs.begin(), inputs.end());
    all.insert(all.end(), derived_.begin(), derived_.end());
    std::vector<Tensor> outputs = inner_->run(all, symbols);
    // An output that is (a view of) a folded constant gets its own copy: in eager it is a fresh
    // tensor on every call, and a caller writing into it must not change the next call's result.
    for (Tensor& out : outputs) {
      if (!out.defined() || !out.has_storage()) continue;
      for (const Tensor& c : derived_) {
        if (!c.has_storage() || c.impl().storage != out.impl().storage) continue;
        Tensor copy = empty_like(out);
        kernels::copy(copy, out);
        out = std::move(copy);
        break;
      }
    }
    return outputs;
  }

  std::unique_ptr<Executable> inner_;
  size_t num_inputs_;
  std::vector<Tensor> derived_;
  std::unique_ptr<cpu::AdaptiveThreads> threads_;  // null: the process's count on every call
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  bool uses_constants() const override { return true; }
  std::unique_ptr<Executable> compile(const ir::Graph& graph) override {
    return compile_with_context(graph, {});
  }
  std::unique_ptr<Executable> compile_with_context(const ir::Graph& graph,
                                                   const CompileContext& context) override {
    using clock = std::chrono::steady_clock;
    auto since = [](clock::time_point t) {
      return std::chrono::duration<double>(clock::now() - t).count();
    };
    const auto start = clock::now();
    const lathe::detail::CompileTimeCounters counters = lathe::detail::compile_time_counters();
    const lathe::detail::MeasureCacheStats cache = lathe::detail::measure_cache_stats();
    // A winner of an earlier tuning of this graph (the measurement cache) is built directly.
    cpu::CpuBackendOptions options = cpu::options();
    options.precision = context.precision;
    if (options.log_passes) log_options_once(options);
    const bool tune = options.layout_tuning;
    auto t = clock::now();
    std::string tune_key;
    std::optional<cpu::CachedWinner> cached;
    if (tune) {
      tune_key = cpu::tuning_key(graph, context, options);
      cached = cpu::cached_winner(tune_key);
    }
    double tuning_s = since(t);
    cpu::GraphConstants constants = context.constants;
    cpu::PipelineInfo info;
    std::unique_ptr<ir::Graph> g = cpu::run_passes(
        graph, constants, {}, cached && cached->fixed ? &cached->plan : nullptr, &info, options);
    double passes_s = 0;
    for (const auto& [name, s] : info.pass_seconds) passes_s += s;
    t = clock::now();
    std::unique_ptr<Executable> exe = make_executable(graph, *g, constants, options);
    const double executable_s = since(t);
    t = clock::now();
    std::string tuning = tune ? "not needed" : "off";
    if (cached)
      tuning = "cached: " +
               (cached->fixed ? cpu::layout_plan_name(cached->plan) : info.layout + " (measured)");
    else if (tune && info.layout_measured)
      exe = cpu::tune_layouts(
          graph, context, *g, std::move(exe), info.layout, tune_key, options,
          [&](const ir::Graph& gi, const cpu::GraphConstants& c) {
            return make_executable(graph, gi, c, options);
          },
          &tuning);
    tuning_s += since(t);
    if (options.log_passes) {
      const lathe::detail::CompileTimeCounters d =
          lathe::detail::compile_time_counters() - counters;
      const lathe::detail::MeasureCacheStats m = lathe::detail::measure_cache_stats();
      std::ostringstream line;
      line.precision(3);
      line << "[lathe.passes] backend compile " << since(start) * 1e3 << " ms: passes "
           << passes_s * 1e3 << " ms (";
      for (size_t i = 0; i < info.pass_seconds.size(); ++i)
        line << (i ? ", " : "") << info.pass_seconds[i].first << " "
             << info.pass_seconds[i].second * 1e3;
      line << "), probes " << d.probe_s * 1e3 << " ms (" << d.probes << " measured), executable "
           << executable_s * 1e3 << " ms, layout tuning " << tuning_s * 1e3 << " ms (" << tuning
           << "); oneDNN primitives created " << d.primitive_s * 1e3 << " ms (" << d.primitives
           << "), weights reordered " << d.weight_reorder_s * 1e3 << " ms (" << d.weight_reorders
           << "); measurement cache ";
      if (lathe::detail::MeasureCache::current().enabled())
        line << m.hits - cache.hits << " hits, " << m.misses - cache.misses << " misses, "
             << m.rejected - cache.rejected << " rejected, " << m.writes - cache.writes
             << " written";
      else
        line << "off";
      std::cerr << line.str() << "\n";
    }
    return exe;
  }

 private:
  static std::unique_ptr<Executable> make_executable(const ir::Graph& graph, const ir::Graph& g,
                                                     const cpu::GraphConstants& constants,
                                                     const cpu::CpuBackendOptions& options) {
    const size_t n = graph.inputs().size();
    std::vector<Tensor> derived;
    for (size_t i = n; i < g.inputs().size(); ++i) derived.push_back(constants.at(i));
    // LATHE_CPU_EXECUTOR=interpreter runs the optimized graph on the reference step list, to
    // tell a wrong result of the passes from one of the executor.
    std::unique_ptr<Executable> inner = options.interpreter ? make_interpreter_backend()->compile(g)
                                                            : cpu::make_planned_executable(g);
    std::unique_ptr<cpu::AdaptiveThreads> threads;
    if (options.adaptive_threads && !options.interpreter)
      threads = std::make_unique<cpu::AdaptiveThreads>(
          detail::str("executable of ", g.nodes().size(), " steps"));
    return std::make_unique<CpuExecutable>(std::move(inner), n, std::move(derived),
                                           std::move(threads));
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace lathe::backend
