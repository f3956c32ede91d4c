// The cpu backend's pass pipeline: the one list of its passes (cpu_pipeline), run by the pass
// manager (lathe/ir/pass_manager.h). Anything that needs the pass names (the log, the
// LATHE_DISABLE_PASSES check, the docs test) reads that list.
//
// Passes, in order (each in its own file, tested alone):
//   functionalize  writes (add_, copy_, training batch_norm, writes through views) -> functional
//               ops, with copy_ into the written inputs at the end (lathe/ir/functionalize.h)
//   constant_fold  nodes over frozen constants only run at compile time (constant_fold.h)
//   fold_batch_norm  conv2d + inference batch_norm over frozen weights and statistics -> one
//               conv2d with the batch norm folded into its weight and bias (fold_batch_norm.h)
//   fuse_conv   conv2d + inference batch_norm + relu/hardtanh + residual add + relu/hardtanh
//               -> conv2d_fused (the rest runs as oneDNN post-ops)
//   fuse_linear linear + relu/gelu + residual add -> linear_fused (one matmul with post-ops)
//   fuse_attention matmul + scale + mask add + softmax + matmul -> sdpa_fused
//   fuse_pointwise chains of pointwise ops -> pointwise_fused (fuse_pointwise.h)
//   merge_linear  linears reading one input with frozen weights -> one linear (merge_linear.h)
//   plan_layouts  chains of conv2d_fused keep activations in oneDNN's blocked layout
//   concat_blocked  cat of blocked values without reorders around it (concat_blocked.h)
//   fuse_dw_conv  a 1x1 conv2d_blocked + the 3x3 depthwise one reading it -> one primitive
//   lower_precision  at bf16 precision, convolutions and linears compute in bf16
//               (lower_precision.h)
//   dce         drops what the rewrites left unused (lathe/ir/passes.h)
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lathe/backend/cpu/cpu_options.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ir/pass_manager.h"

namespace lathe::backend::cpu {

// A fixed plan for plan_layouts instead of its measured choice: the block (0, 8 or 16) and
// whether the convolutions to convert are choose_block's per-region labels for it or the
// whole-graph rule.
struct LayoutPlan {
  int block = 0;
  bool per_region = false;
};
// "channels-last", "nChw8c per region", "nChw16c whole graph", ...
std::string layout_plan_name(const LayoutPlan& p);

// What the pipeline decided, for the backend.
struct PipelineInfo {
  // plan_layouts chose among layouts by its probes (memory-bound convolutions, no Winograd, no
  // LATHE_CPU_BLOCK): other plans may run faster, so the backend times them on the whole graph.
  bool layout_measured = false;
  std::string layout;  // the plan taken, in words
  // The wall time of each pass that ran, in pipeline order (LATHE_LOGS=passes' breakdown).
  std::vector<std::pair<std::string, double>> pass_seconds;
};

// What the cpu passes get: the frozen constants (the freezing passes append what they derive),
// the backend's options, a fixed layout plan (layout tuning), and where to report.
struct CpuPassContext : ir::PassContext {
  CpuPassContext(GraphConstants& c, CpuBackendOptions o) : constants(c), options(std::move(o)) {}
  GraphConstants& constants;
  CpuBackendOptions options;
  const LayoutPlan* layout = nullptr;
  PipelineInfo* info = nullptr;
};

// The pipeline, in order. Defined once.
const std::vector<ir::Pass>& cpu_pipeline();
// Its pass names, in order.
const std::vector<std::string>& pass_names();
// The pass list, one name per line (the docs test compares it with docs/architecture.md).
std::string pipeline_string();

// Runs the pipeline on a copy of g; `disabled` names passes to skip (in addition to
// options().disabled_passes, i.e. LATHE_DISABLE_PASSES). Each pass's output is verified.
std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g,
                                      const std::vector<std::string>& disabled = {});
// The same with frozen constants (CompileContext::constants): the freezing passes read them and
// append the constants they derive (as graph inputs; `constants` then describes every input of
// the returned graph).
std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled = {});
std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled,
                                      const LayoutPlan* layout, PipelineInfo* info = nullptr);
// The same with the options given (not read from options()).
std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled,
                                      const LayoutPlan* layout, PipelineInfo* info,
                                      const CpuBackendOptions& options);

// Whether the options ask for the passes' log (LATHE_LOGS=passes).
bool log_passes_enabled();

}  // namespace lathe::backend::cpu
