// The optimizing CPU backend ("cpu"): a pipeline of named graph passes, then the planned executor
// (executor.h: a flat launch list over a liveness-planned arena) over the rewritten graph.
//
// Passes, in order (each in its own file, tested alone):
//   functionalize  writes (add_, copy_, training batch_norm, writes through views) -> functional
//               ops, with copy_ into the written inputs at the end (lathe/ir/functionalize.h)
//   constant_fold  nodes over frozen constants only run at compile time (constant_fold.h)
//   fold_batch_norm  conv2d + inference batch_norm over frozen weights and statistics -> one
//               conv2d with the batch norm folded into its weight and bias (fold_batch_norm.h)
//   fuse_conv   conv2d + inference batch_norm + relu/hardtanh + residual add + relu/hardtanh
//               -> conv2d_fused (a batch norm not folded at compile time is folded per call;
//               the rest runs as oneDNN post-ops)
//   fuse_linear linear + relu/gelu + residual add -> linear_fused (one matmul with post-ops)
//   fuse_attention matmul + scale + mask add + softmax + matmul -> sdpa_fused (one blocked kernel
//               with an online softmax)
//   merge_linear  linears reading one input with frozen weights (bert's Q, K, V) -> one linear
//               over the concatenated weights, each output a slice of it (merge_linear.h)
//   plan_layouts  chains of conv2d_fused keep activations in oneDNN's blocked layout (nChw16c /
//   8c),
//               reordered only where a region starts or ends (plan_layouts.h)
//   concat_blocked  cat(from_blocked(a), from_blocked(b), dim=1) -> cat(a, b) on the blocked
//               values, no reorders around it (concat_blocked.h)
//   fuse_dw_conv  a 1x1 conv2d_blocked + the 3x3 depthwise one reading it -> one oneDNN primitive
//               with the depthwise post-op, where oneDNN has a fused kernel (fuse_dw_conv.h)
//   dce         drops what the rewrites left unused
//
// Layout tuning: when plan_layouts chose its layouts by per-convolution probes, the backend also
// builds the other plans (channels-last, nChw8c and nChw16c per region, and for calls under 10 ms
// nChw16c on the whole graph), runs each on the graph's real weights and synthetic activations in
// interleaved rounds (5 for calls under 10 ms, else 3), and keeps the fastest when it is at
// least 3% faster than the measured plan (the probes time convolutions alone; a whole call also
// sees cache reuse between layers and the kernels' other choices). Skipped when one call takes
// more than 40 ms, when the graph writes into its inputs or draws random numbers, when an
// activation input is not a static f32 tensor, or with LATHE_CPU_LAYOUT_TUNING=0. Costs compile
// time: mobilenet_v2 at batch 8 (28 ms a call) about 0.5 s.
//
// LATHE_LOGS=passes (or all) prints the graph after each pass to stderr;
// LATHE_DISABLE_PASSES=fuse_conv,... turns passes off (for bisecting a wrong result);
// LATHE_CPU_EXECUTOR=interpreter runs the result on the interpreter instead of the executor.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/rewrite.h"

namespace lathe::backend {

std::unique_ptr<Backend> make_cpu_backend();

namespace cpu {
// The pass names, in pipeline order.
const std::vector<std::string>& pass_names();
// Runs the pipeline on a copy of g; `disabled` names passes to skip (in addition to
// LATHE_DISABLE_PASSES). Each pass's output is verified.
std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g,
                                      const std::vector<std::string>& disabled = {});
// The same with frozen constants (CompileContext::constants): the freezing passes read them and
// append the constants they derive (as graph inputs; `constants` then describes every input of
// the returned graph).
std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled = {});

// Whether LATHE_LOGS asks for the passes' log.
bool log_passes_enabled();

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
std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled,
                                      const LayoutPlan* layout, PipelineInfo* info = nullptr);
}  // namespace cpu

}  // namespace lathe::backend
