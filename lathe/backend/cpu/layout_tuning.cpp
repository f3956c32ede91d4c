#include "lathe/backend/cpu/layout_tuning.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <unordered_set>
#include <vector>

#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/measure_cache.h"

namespace lathe::backend::cpu {
namespace {

// Inputs to time the graph with: the constants as they are, every other input a static f32
// tensor of its type (values do not change a convolution's speed); nullopt when an input is
// not such a tensor.
std::optional<std::vector<Tensor>> timing_inputs(const ir::Graph& graph,
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

// Running the graph must change nothing: no writes into its inputs, no draws from the
// generator.
bool writes_or_draws(const ir::Graph& graph) {
  for (const ir::Node* n : graph.nodes())
    if (n->has_side_effects() || n->op().category == OpCategory::random) return true;
  return false;
}

struct Candidate {
  std::string name;
  std::unique_ptr<Executable> exe;
  double best = INFINITY;
  std::optional<LayoutPlan> plan;  // none: the measured plan
};

double time_one(Executable& e, const std::vector<Tensor>& in) {
  const auto t0 = std::chrono::steady_clock::now();
  e.run(in, {});
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void log_rounds(const std::vector<Candidate>& cands, int rounds, size_t pick) {
  std::cerr << "[lathe.passes] layout tuning, best of " << rounds << " calls:";
  for (size_t k = 0; k < cands.size(); ++k)
    std::cerr << (k ? ";" : "") << " " << cands[k].name << " " << cands[k].best * 1e3 << " ms";
  std::cerr << " -> " << cands[pick].name << "\n";
}

}  // namespace

std::string tuning_key(const ir::Graph& graph, const CompileContext& context,
                       const CpuBackendOptions& options) {
  std::string constant_inputs(graph.inputs().size(), '0');
  for (size_t i = 0; i < context.constants.size() && i < constant_inputs.size(); ++i)
    if (context.constants[i].defined()) constant_inputs[i] = '1';
  return "tune_layouts " + lathe::detail::hex_hash64(graph.to_string()) + " " +
         lathe::detail::hex_hash64(constant_inputs) + " " +
         lathe::detail::hex_hash64(options.result_key());
}

std::optional<CachedWinner> cached_winner(const std::string& key) {
  std::optional<std::vector<double>> v = lathe::detail::MeasureCache::current().load(key);
  if (!v || v->size() != 3) return std::nullopt;
  const double kind = (*v)[0], block = (*v)[1], per_region = (*v)[2];
  if (kind == 0) return CachedWinner{};
  if (kind == 1 && (block == 0 || block == 8 || block == 16) &&
      (per_region == 0 || per_region == 1))
    return CachedWinner{true, {static_cast<int>(block), per_region == 1}};
  return std::nullopt;
}

std::unique_ptr<Executable> tune_layouts(const ir::Graph& graph, const CompileContext& context,
                                         const ir::Graph& chosen, std::unique_ptr<Executable> exe,
                                         const std::string& chosen_name, const std::string& key,
                                         const CpuBackendOptions& options,
                                         const BuildExecutable& build, std::string* outcome) {
  const bool log = options.log_passes;
  std::optional<std::vector<Tensor>> in;
  const bool writes = writes_or_draws(graph);
  if (!writes) in = timing_inputs(graph, context);
  if (writes || !in) {
    if (log)
      std::cerr << "[lathe.passes] layout tuning: skipped ("
                << (writes ? "the graph writes or draws random numbers"
                           : "an input is not static f32")
                << ")\n";
    *outcome = "skipped";
    return exe;
  }
  lathe::detail::MeasureCache& cache = lathe::detail::MeasureCache::current();
  std::vector<Candidate> cands;
  cands.push_back({chosen_name + " (measured)", std::move(exe), INFINITY, std::nullopt});
  time_one(*cands[0].exe, *in);  // warm-up: primitives made, weights reordered
  const double first = std::min(time_one(*cands[0].exe, *in), time_one(*cands[0].exe, *in));
  // Slow calls try the per-region plans only. Whole-graph nChw8c is left out: its
  // compute-bound convolutions run on oneDNN's AVX2 kernels.
  constexpr double kSlowCallS = 0.01, kMaxCallS = 0.04;
  std::vector<LayoutPlan> plans{{0, false}, {8, true}, {16, true}};
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
  for (const LayoutPlan& p : plans) {
    GraphConstants constants = context.constants;
    std::unique_ptr<ir::Graph> g = run_passes(graph, constants, {}, &p, nullptr, options);
    if (!seen.insert(g->to_string()).second) continue;  // the same plan as another
    Candidate c;
    c.name = layout_plan_name(p);
    c.plan = p;
    c.exe = build(*g, constants);
    time_one(*c.exe, *in);  // warm-up
    cands.push_back(std::move(c));
  }
  const int rounds = first < kSlowCallS ? 5 : 3;
  for (int r = 0; r < rounds; ++r)
    for (Candidate& c : cands) c.best = std::min(c.best, time_one(*c.exe, *in));
  // Another plan replaces the measured one only when clearly faster (the rounds' noise).
  size_t pick = 0;
  for (size_t k = 1; k < cands.size(); ++k)
    if (cands[k].best < 0.97 * cands[0].best && cands[k].best < cands[pick].best) pick = k;
  if (log) log_rounds(cands, rounds, pick);
  const std::optional<LayoutPlan>& won = cands[pick].plan;
  if (won)
    cache.store(key, {1, static_cast<double>(won->block), won->per_region ? 1.0 : 0.0});
  else
    cache.store(key, {0, 0, 0});
  *outcome = "measured, " + cands[pick].name;
  return std::move(cands[pick].exe);
}

}  // namespace lathe::backend::cpu
