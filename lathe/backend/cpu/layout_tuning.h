// Layout tuning: when plan_layouts chose its layouts by per-convolution probes, the backend also
// builds the other plans (channels-last, nChw8c and nChw16c per region, and for calls under 10 ms
// nChw16c on the whole graph), runs each on the graph's real weights and synthetic activations in
// interleaved rounds (5 for calls under 10 ms, else 3), and keeps the fastest when it is at
// least 3% faster than the measured plan (the probes time convolutions alone; a whole call also
// sees cache reuse between layers and the kernels' other choices). Skipped when one call takes
// more than 40 ms, when the graph writes into its inputs or draws random numbers, when an
// activation input is not a static f32 tensor, or with LATHE_CPU_LAYOUT_TUNING=0
// (CpuBackendOptions::layout_tuning). The winner is kept in the measurement cache
// (lathe/kernels/measure_cache.h) under tuning_key.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/pipeline.h"

namespace lathe::backend::cpu {

// The measurement cache's key of a tuning: the graph as traced (ops, attributes, input types),
// which of its inputs are constants, and the options that change the compiled result
// (CpuBackendOptions::result_key).
std::string tuning_key(const ir::Graph& graph, const CompileContext& context,
                       const CpuBackendOptions& options);

// What the cache stores of a tuning: {0, 0, 0} when the measured plan won (or tuning was
// skipped for a slow call), {1, block, per_region} when another plan did.
struct CachedWinner {
  bool fixed = false;
  LayoutPlan plan;
};
std::optional<CachedWinner> cached_winner(const std::string& key);

// Builds the executable of a rewritten graph with its constants (the backend's).
using BuildExecutable =
    std::function<std::unique_ptr<Executable>(const ir::Graph& g, const GraphConstants& constants)>;

// Times the measured plan (`chosen`, built as `exe`, named `chosen_name`) against the others on
// the whole graph and returns the fastest; stores the winner under `key`; `outcome` says what
// happened, in words.
std::unique_ptr<Executable> tune_layouts(const ir::Graph& graph, const CompileContext& context,
                                         const ir::Graph& chosen, std::unique_ptr<Executable> exe,
                                         const std::string& chosen_name, const std::string& key,
                                         const CpuBackendOptions& options,
                                         const BuildExecutable& build, std::string* outcome);

}  // namespace lathe::backend::cpu
