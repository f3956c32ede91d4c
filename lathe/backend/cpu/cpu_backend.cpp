#include "lathe/backend/cpu/cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/concat_blocked.h"
#include "lathe/backend/cpu/constant_fold.h"
#include "lathe/backend/cpu/executor.h"
#include "lathe/backend/cpu/fold_batch_norm.h"
#include "lathe/backend/cpu/fuse_attention.h"
#include "lathe/backend/cpu/fuse_conv.h"
#include "lathe/backend/cpu/fuse_dw_conv.h"
#include "lathe/backend/cpu/fuse_linear.h"
#include "lathe/backend/cpu/fuse_pointwise.h"
#include "lathe/backend/cpu/merge_linear.h"
#include "lathe/backend/cpu/plan_layouts.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/backend/interpreter.h"
#include "lathe/ir/functionalize.h"
#include "lathe/ir/passes.h"
#include "lathe/kernels/compile_time.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/measure_cache.h"

namespace lathe::backend {
namespace cpu {
namespace {

std::vector<std::string> split_list(const char* s) {
  std::vector<std::string> out;
  if (!s) return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool log_passes() {
  for (const std::string& t : split_list(std::getenv("LATHE_LOGS")))
    if (t == "passes" || t == "all") return true;
  return false;
}

}  // namespace

bool log_passes_enabled() { return log_passes(); }

std::string layout_plan_name(const LayoutPlan& p) {
  if (p.block == 0) return "channels-last";
  return lathe::detail::str(p.block == 8 ? "nChw8c" : "nChw16c",
                            p.per_region ? " per region" : " whole graph");
}

namespace {

bool has_writes(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes())
    if (n->has_side_effects()) return true;
  return false;
}

std::unique_ptr<ir::Graph> copy_graph(const ir::Graph& g) {
  return rewrite_graph(g, [](const ir::Node&, GraphCopy&) { return false; });
}

}  // namespace

const std::vector<std::string>& pass_names() {
  // One pass per line (the trailing // keeps clang-format from joining them).
  static const std::vector<std::string> names{
      "functionalize",    //
      "constant_fold",    //
      "fold_batch_norm",  //
      "fuse_conv",        //
      "fuse_linear",      //
      "fuse_attention",   //
      "fuse_pointwise",   //
      "merge_linear",     //
      "plan_layouts",     //
      "concat_blocked",   //
      "fuse_dw_conv",     //
      "dce",              //
  };
  return names;
}

std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g,
                                      const std::vector<std::string>& disabled) {
  GraphConstants none;
  return run_passes(g, none, disabled);
}

std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled) {
  return run_passes(g, constants, disabled, nullptr, nullptr);
}

std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled,
                                      const LayoutPlan* layout, PipelineInfo* info) {
  std::vector<std::string> off = split_list(std::getenv("LATHE_DISABLE_PASSES"));
  off.insert(off.end(), disabled.begin(), disabled.end());
  for (const std::string& name : off)
    LATHE_CHECK(std::find(pass_names().begin(), pass_names().end(), name) != pass_names().end(),
                "[cpu] unknown pass '", name, "' in LATHE_DISABLE_PASSES or the disabled list");
  const bool log = log_passes();
  std::unique_ptr<ir::Graph> cur = copy_graph(g);
  for (const std::string& name : pass_names()) {
    if (std::find(off.begin(), off.end(), name) != off.end()) continue;
    const auto pass_start = std::chrono::steady_clock::now();
    std::string summary;
    if (name == "functionalize") {
      // Writes become functional ops and final copies into the written inputs, so the fusions
      // need not stop at them. A graph without writes is left as it is.
      // What it cannot express (a write through a view of a symbolic base) keeps its writes:
      // the fusions respect them.
      if (!has_writes(*cur)) {
        summary = "no writes";
      } else {
        try {
          ir::FunctionalGraph f = ir::functionalize(*cur, ir::WriteBack::copy_nodes);
          LATHE_CHECK(f.graph->inputs().size() == cur->inputs().size(),
                      "[cpu] functionalize changed the graph inputs");
          cur = std::move(f.graph);
          summary = f.summary();
        } catch (const Error& e) {
          summary = lathe::detail::str("skipped: ", e.what());
        }
      }
    } else if (name == "constant_fold") {
      int n = 0;
      cur = constant_fold(*cur, constants, &n);
      summary = lathe::detail::str(n, " nodes folded");
    } else if (name == "fold_batch_norm") {
      int n = 0;
      cur = fold_batch_norm(*cur, constants, &n);
      summary = lathe::detail::str(n, " batch norms folded into their convolution");
    } else if (name == "fuse_conv") {
      FuseConvStats s;
      cur = fuse_conv(*cur, &s);
      summary = lathe::detail::str(s.fused, " fused (", s.bn_folded, " with batch norm, ",
                                   s.residual, " with a residual add)");
    } else if (name == "fuse_linear") {
      FuseLinearStats s;
      cur = fuse_linear(*cur, &s);
      summary = lathe::detail::str(s.fused, " fused (", s.act, " with an activation, ", s.residual,
                                   " with a residual add)");
    } else if (name == "fuse_attention") {
      FuseAttentionStats s;
      cur = fuse_attention(*cur, &s);
      summary = lathe::detail::str(s.fused, " fused (", s.masked, " with a mask, ", s.transposed,
                                   " writing [B, L, H, E])");
    } else if (name == "fuse_pointwise") {
      FusePointwiseStats s;
      cur = fuse_pointwise(*cur, &s);
      summary = lathe::detail::str(s.groups, " groups of ", s.nodes, " pointwise nodes fused");
    } else if (name == "merge_linear") {
      MergeLinearStats s;
      cur = merge_linear(*cur, constants, &s);
      summary = lathe::detail::str(s.merged, " linear layers merged into ", s.groups);
    } else if (name == "plan_layouts") {
      PlanLayoutsStats s;
      std::unordered_set<const ir::Value*> constant_inputs;
      for (const auto& [value, tensor] : constant_values(*cur, constants))
        constant_inputs.insert(value);
      const bool winograd = plan_layouts_winograd();
      std::string why = "LATHE_CPU_BLOCK";
      int block = 0;
      BlockChoice c;
      if (layout) {
        block = layout->block;
        if (layout->per_region && block != 0) {
          c.convert = region_labels(*cur, block);
          c.per_region = true;
        }
        why = layout->per_region ? "fixed, per region" : "fixed, whole graph";
      } else if (std::getenv("LATHE_CPU_BLOCK")) {
        block = plan_layouts_block();
      } else {
        c = choose_block(*cur, winograd, &constant_inputs);
        block = c.block;
        why = c.winograd   ? std::string("Winograd")
              : c.training ? std::string("a training step: eager's layout")
              : c.probed_convs
                  ? lathe::detail::str("measured on ", c.probed_convs,
                                       " memory-bound convolutions: channels-last ",
                                       c.cost_s[0] * 1e3, " ms, per region with nChw8c ",
                                       c.cost_s[1] * 1e3, " ms, with nChw16c ",
                                       c.cost_s[2] * 1e3, " ms")
                  : std::string("the machine's block");
      }
      cur = plan_layouts(*cur, &s, block, winograd, &constant_inputs,
                         c.per_region ? &c.convert : nullptr);
      if (log && !c.table.empty())
        std::cerr << "[lathe.passes] plan_layouts probes, memory-bound convolutions:\n" << c.table;
      if (info) {
        info->layout_measured = c.probed_convs > 0;  // only choose_block's own choice probes
        info->layout = layout_plan_name({block, c.per_region});
      }
      summary = lathe::detail::str(s.blocked_convs, " convolutions on the blocked layout (block ",
                                   s.block, ": ", why, "; ", s.winograd_convs, " Winograd, ",
                                   s.blocked_stems, " first convolutions), ",
                                   s.blocked_pools, " max poolings, ", s.to_blocked,
                                   " reorders in, ", s.from_blocked, " reorders out");
    } else if (name == "concat_blocked") {
      ConcatBlockedStats s;
      cur = concat_blocked(*cur, &s);
      summary = lathe::detail::str(s.concats, " concats and ", s.pools,
                                   " max poolings on blocked values, ", s.reorders_removed,
                                   " reorders removed");
    } else if (name == "fuse_dw_conv") {
      if (!fuse_dw_conv_enabled()) {
        summary = "off (LATHE_DW_FUSION=0)";
      } else {
        FuseDwConvStats s;
        cur = fuse_dw_conv(*cur, &s);
        summary = lathe::detail::str(s.fused, " 1x1 + depthwise pairs fused, ", s.no_jit,
                                     " left (no fused oneDNN kernel for them here)");
      }
    } else if (name == "dce") {
      summary = lathe::detail::str(ir::dead_code_elimination(*cur), " nodes removed");
    }
    cur->verify();
    if (info)
      info->pass_seconds.emplace_back(
          name,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - pass_start).count());
    if (log)
      std::cerr << "[lathe.passes] after " << name << ": " << summary << "\n"
                << cur->to_string() << "\n";
  }
  return cur;
}

}  // namespace cpu

namespace {

// The interpreter over the rewritten graph, with the constants the passes derived (folded
// weights, appended as graph inputs) kept here and passed after the caller's inputs.
class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::unique_ptr<Executable> inner, size_t num_inputs, std::vector<Tensor> derived)
      : inner_(std::move(inner)), num_inputs_(num_inputs), derived_(std::move(derived)) {}

  std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues symbols) override {
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

 private:
  std::unique_ptr<Executable> inner_;
  size_t num_inputs_;
  std::vector<Tensor> derived_;
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
    const bool tune = layout_tuning_enabled();
    auto t = clock::now();
    std::string tune_key;
    std::optional<CachedWinner> cached;
    if (tune) {
      tune_key = tuning_key(graph, context);
      cached = cached_winner(tune_key);
    }
    double tuning_s = since(t);
    cpu::GraphConstants constants = context.constants;
    cpu::PipelineInfo info;
    std::unique_ptr<ir::Graph> g = cpu::run_passes(
        graph, constants, {}, cached && cached->fixed ? &cached->plan : nullptr, &info);
    double passes_s = 0;
    for (const auto& [name, s] : info.pass_seconds) passes_s += s;
    t = clock::now();
    std::unique_ptr<Executable> exe = make_executable(graph, *g, constants);
    const double executable_s = since(t);
    t = clock::now();
    std::string tuning = tune ? "not needed" : "off";
    if (cached)
      tuning = "cached: " +
               (cached->fixed ? cpu::layout_plan_name(cached->plan) : info.layout + " (measured)");
    else if (tune && info.layout_measured)
      exe = tune_layouts(graph, context, *g, std::move(exe), info.layout, tune_key, &tuning);
    tuning_s += since(t);
    if (cpu::log_passes_enabled()) {
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
                                                     const cpu::GraphConstants& constants) {
    const size_t n = graph.inputs().size();
    std::vector<Tensor> derived;
    for (size_t i = n; i < g.inputs().size(); ++i) derived.push_back(constants.at(i));
    // LATHE_CPU_EXECUTOR=interpreter runs the optimized graph on the reference step list, to
    // tell a wrong result of the passes from one of the executor.
    const char* exec = std::getenv("LATHE_CPU_EXECUTOR");
    std::unique_ptr<Executable> inner = exec && std::string(exec) == "interpreter"
                                            ? make_interpreter_backend()->compile(g)
                                            : cpu::make_planned_executable(g);
    return std::make_unique<CpuExecutable>(std::move(inner), n, std::move(derived));
  }

  static bool layout_tuning_enabled() {
    const char* e = std::getenv("LATHE_CPU_LAYOUT_TUNING");
    LATHE_CHECK(!e || std::string(e) == "0" || std::string(e) == "1",
                "[cpu] LATHE_CPU_LAYOUT_TUNING must be 0 or 1, got '", e, "'");
    return !(e && std::string(e) == "0");
  }

  // Inputs to time the graph with: the constants as they are, every other input a static f32
  // tensor of its type (values do not change a convolution's speed); nullopt when an input is
  // not such a tensor.
  static std::optional<std::vector<Tensor>> timing_inputs(const ir::Graph& graph,
                                                          const CompileContext& context) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < graph.inputs().size(); ++i) {
      if (i < context.constants.size() && context.constants[i].defined()) {
        in.push_back(context.constants[i]);
        continue;
      }
      const ir::ValueType& t = graph.inputs()[i]->type();
      std::vector<int64_t> sizes, strides;
      for (const SymInt& s : t.sizes) {
        if (!s.maybe_int()) return std::nullopt;
        sizes.push_back(*s.maybe_int());
      }
      for (const SymInt& s : t.strides) {
        if (!s.maybe_int()) return std::nullopt;
        strides.push_back(*s.maybe_int());
      }
      if (t.dtype != DType::f32 || strides.size() != sizes.size()) return std::nullopt;
      Tensor x = empty_strided(to_shape(sizes), to_shape(strides), DType::f32);
      kernels::fill(x, 0.5);
      in.push_back(std::move(x));
    }
    return in;
  }

  // The measurement cache's key of a tuning: the graph as traced (ops, attributes, input types),
  // which of its inputs are constants, and the environment's LATHE_ switches (they change the
  // pipeline) but those that only log or name the cache.
  static std::string tuning_key(const ir::Graph& graph, const CompileContext& context) {
    std::string constant_inputs(graph.inputs().size(), '0');
    for (size_t i = 0; i < context.constants.size() && i < constant_inputs.size(); ++i)
      if (context.constants[i].defined()) constant_inputs[i] = '1';
    std::vector<std::string> switches;
    for (char** e = environ; e && *e; ++e) {
      const std::string kv = *e;
      if (kv.rfind("LATHE_", 0) != 0 || kv.rfind("LATHE_CACHE", 0) == 0 ||
          kv.rfind("LATHE_LOGS=", 0) == 0 || kv.rfind("LATHE_PROFILE=", 0) == 0)
        continue;
      switches.push_back(kv);
    }
    std::sort(switches.begin(), switches.end());
    std::string env;
    for (const std::string& kv : switches) env += kv + "\n";
    return "tune_layouts " + lathe::detail::hex_hash64(graph.to_string()) + " " +
           lathe::detail::hex_hash64(constant_inputs) + " " + lathe::detail::hex_hash64(env);
  }

  // What the cache stores of a tuning: {0, 0, 0} when the measured plan won (or tuning was
  // skipped for a slow call), {1, block, per_region} when another plan did.
  struct CachedWinner {
    bool fixed = false;
    cpu::LayoutPlan plan;
  };
  static std::optional<CachedWinner> cached_winner(const std::string& key) {
    std::optional<std::vector<double>> v = lathe::detail::MeasureCache::current().load(key);
    if (!v || v->size() != 3) return std::nullopt;
    const double kind = (*v)[0], block = (*v)[1], per_region = (*v)[2];
    if (kind == 0) return CachedWinner{};
    if (kind == 1 && (block == 0 || block == 8 || block == 16) &&
        (per_region == 0 || per_region == 1))
      return CachedWinner{true, {static_cast<int>(block), per_region == 1}};
    return std::nullopt;
  }

  // Layout tuning (cpu_backend.h): the measured plan against the others, on the whole graph.
  // The winner is stored in the measurement cache under `key` (tuning_key).
  static std::unique_ptr<Executable> tune_layouts(const ir::Graph& graph,
                                                  const CompileContext& context,
                                                  const ir::Graph& chosen,
                                                  std::unique_ptr<Executable> exe,
                                                  const std::string& chosen_name,
                                                  const std::string& key, std::string* outcome) {
    const bool log = cpu::log_passes_enabled();
    // Running the graph must change nothing: no writes into its inputs, no draws from the
    // generator.
    for (const ir::Node* n : graph.nodes())
      if (n->has_side_effects() || n->op().category == OpCategory::random) {
        if (log)
          std::cerr << "[lathe.passes] layout tuning: skipped (the graph writes or draws random "
                       "numbers)\n";
        *outcome = "skipped";
        return exe;
      }
    lathe::detail::MeasureCache& cache = lathe::detail::MeasureCache::current();
    std::optional<std::vector<Tensor>> in = timing_inputs(graph, context);
    if (!in) {
      if (log) std::cerr << "[lathe.passes] layout tuning: skipped (an input is not static f32)\n";
      *outcome = "skipped";
      return exe;
    }
    using clock = std::chrono::steady_clock;
    auto time_one = [&](Executable& e) {
      const auto t0 = clock::now();
      e.run(*in, {});
      return std::chrono::duration<double>(clock::now() - t0).count();
    };
    struct Candidate {
      std::string name;
      std::unique_ptr<Executable> exe;
      double best = INFINITY;
      std::optional<cpu::LayoutPlan> plan;  // none: the measured plan
    };
    std::vector<Candidate> cands;
    cands.push_back({chosen_name + " (measured)", std::move(exe), INFINITY, std::nullopt});
    time_one(*cands[0].exe);  // warm-up: primitives made, weights reordered
    const double first = std::min(time_one(*cands[0].exe), time_one(*cands[0].exe));
    // Slow calls try the per-region plans only. Whole-graph nChw8c is left out: its
    // compute-bound convolutions run on oneDNN's AVX2 kernels.
    constexpr double kSlowCallS = 0.01, kMaxCallS = 0.04;
    std::vector<cpu::LayoutPlan> plans{{0, false}, {8, true}, {16, true}};
    if (first < kSlowCallS) plans.push_back({16, false});
    if (first > kMaxCallS) {
      if (log)
        std::cerr << "[lathe.passes] layout tuning: skipped (one call takes " << first * 1e3
                  << " ms)\n";
      cache.store(key, {0, 0, 0});
      *outcome = "skipped, a slow call";
      return std::move(cands[0].exe);
    }
    std::unordered_set<std::string> seen{chosen.to_string()};
    for (const cpu::LayoutPlan& p : plans) {
      cpu::GraphConstants constants = context.constants;
      std::unique_ptr<ir::Graph> g = cpu::run_passes(graph, constants, {}, &p, nullptr);
      if (!seen.insert(g->to_string()).second) continue;  // the same plan as another
      Candidate c;
      c.name = cpu::layout_plan_name(p);
      c.plan = p;
      c.exe = make_executable(graph, *g, constants);
      time_one(*c.exe);  // warm-up
      cands.push_back(std::move(c));
    }
    const int rounds = first < kSlowCallS ? 5 : 3;
    for (int r = 0; r < rounds; ++r)
      for (Candidate& c : cands) c.best = std::min(c.best, time_one(*c.exe));
    // Another plan replaces the measured one only when clearly faster (the rounds' noise).
    size_t pick = 0;
    for (size_t k = 1; k < cands.size(); ++k)
      if (cands[k].best < 0.97 * cands[0].best && cands[k].best < cands[pick].best) pick = k;
    if (log) {
      std::cerr << "[lathe.passes] layout tuning, best of " << rounds << " calls:";
      for (size_t k = 0; k < cands.size(); ++k)
        std::cerr << (k ? ";" : "") << " " << cands[k].name << " " << cands[k].best * 1e3
                  << " ms";
      std::cerr << " -> " << cands[pick].name << "\n";
    }
    const std::optional<cpu::LayoutPlan>& won = cands[pick].plan;
    if (won)
      cache.store(key, {1, static_cast<double>(won->block), won->per_region ? 1.0 : 0.0});
    else
      cache.store(key, {0, 0, 0});
    *outcome = "measured, " + cands[pick].name;
    return std::move(cands[pick].exe);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace lathe::backend
