#include "lathe/backend/cpu/pipeline.h"

#include <iostream>
#include <unordered_set>

#include "lathe/backend/cpu/concat_blocked.h"
#include "lathe/backend/cpu/constant_fold.h"
#include "lathe/backend/cpu/fold_batch_norm.h"
#include "lathe/backend/cpu/fuse_attention.h"
#include "lathe/backend/cpu/fuse_conv.h"
#include "lathe/backend/cpu/fuse_dw_conv.h"
#include "lathe/backend/cpu/fuse_linear.h"
#include "lathe/backend/cpu/fuse_pointwise.h"
#include "lathe/backend/cpu/lower_precision.h"
#include "lathe/backend/cpu/merge_linear.h"
#include "lathe/backend/cpu/plan_layouts.h"

namespace lathe::backend::cpu {

using lathe::detail::str;

std::string layout_plan_name(const LayoutPlan& p) {
  if (p.block == 0) return "channels-last";
  return str(p.block == 8 ? "nChw8c" : "nChw16c", p.per_region ? " per region" : " whole graph");
}

bool log_passes_enabled() { return options().log_passes; }

namespace {

using GraphPtr = std::unique_ptr<ir::Graph>;

// A pass over the cpu context.
ir::Pass cpu_pass(std::string name, std::function<bool(GraphPtr&, CpuPassContext&)> run) {
  return {std::move(name),
          [run = std::move(run)](GraphPtr& g, ir::PassContext& ctx) {
            return run(g, ctx.as<CpuPassContext>());
          },
          ""};
}

bool run_constant_fold(GraphPtr& g, CpuPassContext& ctx) {
  int n = 0;
  g = constant_fold(*g, ctx.constants, &n);
  ctx.summary = str(n, " nodes folded");
  return n > 0;
}

bool run_fold_batch_norm(GraphPtr& g, CpuPassContext& ctx) {
  int n = 0;
  g = fold_batch_norm(*g, ctx.constants, &n);
  ctx.summary = str(n, " batch norms folded into their convolution");
  return n > 0;
}

bool run_fuse_conv(GraphPtr& g, CpuPassContext& ctx) {
  FuseConvStats s;
  g = fuse_conv(*g, &s);
  ctx.summary = str(s.fused, " fused (", s.bn_folded, " with batch norm, ", s.residual,
                    " with a residual add)");
  return s.fused > 0;
}

bool run_fuse_linear(GraphPtr& g, CpuPassContext& ctx) {
  FuseLinearStats s;
  g = fuse_linear(*g, &s);
  ctx.summary =
      str(s.fused, " fused (", s.act, " with an activation, ", s.residual, " with a residual add)");
  return s.fused > 0;
}

bool run_fuse_attention(GraphPtr& g, CpuPassContext& ctx) {
  FuseAttentionStats s;
  g = fuse_attention(*g, &s);
  ctx.summary =
      str(s.fused, " fused (", s.masked, " with a mask, ", s.transposed, " writing [B, L, H, E])");
  return s.fused > 0;
}

bool run_fuse_pointwise(GraphPtr& g, CpuPassContext& ctx) {
  FusePointwiseStats s;
  g = fuse_pointwise(*g, &s);
  ctx.summary = str(s.groups, " groups of ", s.nodes, " pointwise nodes fused");
  return s.groups > 0;
}

bool run_merge_linear(GraphPtr& g, CpuPassContext& ctx) {
  MergeLinearStats s;
  g = merge_linear(*g, ctx.constants, &s);
  ctx.summary = str(s.merged, " linear layers merged into ", s.groups);
  return s.groups > 0;
}

// Why choose_block took its block, in words.
std::string block_reason(const BlockChoice& c) {
  if (c.winograd) return "Winograd";
  if (c.training) return "a training step: eager's layout";
  if (c.probed_convs)
    return str("measured on ", c.probed_convs, " memory-bound convolutions: channels-last ",
               c.cost_s[0] * 1e3, " ms, per region with nChw8c ", c.cost_s[1] * 1e3,
               " ms, with nChw16c ", c.cost_s[2] * 1e3, " ms");
  return "the machine's block";
}

bool run_plan_layouts(GraphPtr& g, CpuPassContext& ctx) {
  PlanLayoutsStats s;
  std::unordered_set<const ir::Value*> constant_inputs;
  for (const auto& [value, tensor] : constant_values(*g, ctx.constants))
    constant_inputs.insert(value);
  const bool winograd = plan_layouts_winograd(ctx.options);
  std::string why = "LATHE_CPU_BLOCK";
  int block = 0;
  BlockChoice c;
  if (const LayoutPlan* layout = ctx.layout) {
    block = layout->block;
    if (layout->per_region && block != 0) {
      c.convert = region_labels(*g, block);
      c.per_region = true;
    }
    why = layout->per_region ? "fixed, per region" : "fixed, whole graph";
  } else if (ctx.options.block) {
    block = *ctx.options.block;
  } else {
    c = choose_block(*g, winograd, &constant_inputs);
    block = c.block;
    why = block_reason(c);
  }
  g = plan_layouts(*g, &s, block, winograd, &constant_inputs, c.per_region ? &c.convert : nullptr);
  if (ctx.options.log_passes && !c.table.empty())
    std::cerr << "[lathe.passes] plan_layouts probes, memory-bound convolutions:\n" << c.table;
  if (ctx.info) {
    ctx.info->layout_measured = c.probed_convs > 0;  // only choose_block's own choice probes
    ctx.info->layout = layout_plan_name({block, c.per_region});
  }
  ctx.summary = str(s.blocked_convs, " convolutions on the blocked layout (block ", s.block, ": ",
                    why, "; ", s.winograd_convs, " Winograd, ", s.blocked_stems,
                    " first convolutions), ", s.blocked_pools, " max poolings, ", s.to_blocked,
                    " reorders in, ", s.from_blocked, " reorders out");
  return s.blocked_convs + s.blocked_pools + s.to_blocked + s.from_blocked > 0;
}

bool run_concat_blocked(GraphPtr& g, CpuPassContext& ctx) {
  ConcatBlockedStats s;
  g = concat_blocked(*g, &s);
  ctx.summary = str(s.concats, " concats and ", s.pools, " max poolings on blocked values, ",
                    s.reorders_removed, " reorders removed");
  return s.concats + s.pools + s.reorders_removed > 0;
}

bool run_fuse_dw_conv(GraphPtr& g, CpuPassContext& ctx) {
  if (!ctx.options.dw_fusion) {
    ctx.summary = "off (LATHE_DW_FUSION=0)";
    return false;
  }
  FuseDwConvStats s;
  g = fuse_dw_conv(*g, &s);
  ctx.summary = str(s.fused, " 1x1 + depthwise pairs fused, ", s.no_jit,
                    " left (no fused oneDNN kernel for them here)");
  return s.fused > 0;
}

bool run_lower_precision(GraphPtr& g, CpuPassContext& ctx) {
  LowerPrecisionStats s;
  g = lower_precision(*g, ctx.options.precision, &s);
  if (ctx.options.precision == DType::f32)
    ctx.summary = "precision f32";
  else if (s.unsupported)
    ctx.summary =
        "precision bf16 asked, but this CPU has no bf16 kernels (avx512_bf16 or AMX): f32";
  else
    ctx.summary = str(s.convs, " convolutions and ", s.linears, " linear layers at bf16 (",
                      s.depthwise_kept, " depthwise convolutions kept at f32)");
  return s.convs + s.linears > 0;
}

std::unique_ptr<ir::Graph> copy_graph(const ir::Graph& g) {
  return rewrite_graph(g, [](const ir::Node&, GraphCopy&) { return false; });
}

}  // namespace

const std::vector<ir::Pass>& cpu_pipeline() {
  static const std::vector<ir::Pass> passes{
      ir::functionalize_pass(),
      cpu_pass("constant_fold", run_constant_fold),
      cpu_pass("fold_batch_norm", run_fold_batch_norm),
      cpu_pass("fuse_conv", run_fuse_conv),
      cpu_pass("fuse_linear", run_fuse_linear),
      cpu_pass("fuse_attention", run_fuse_attention),
      cpu_pass("fuse_pointwise", run_fuse_pointwise),
      cpu_pass("merge_linear", run_merge_linear),
      cpu_pass("plan_layouts", run_plan_layouts),
      cpu_pass("concat_blocked", run_concat_blocked),
      cpu_pass("fuse_dw_conv", run_fuse_dw_conv),
      cpu_pass("lower_precision", run_lower_precision),
      ir::dce_pass(),
  };
  return passes;
}

const std::vector<std::string>& pass_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ir::Pass& p : cpu_pipeline()) out.push_back(p.name);
    return out;
  }();
  return names;
}

std::string pipeline_string() { return ir::pass_list_string(cpu_pipeline()); }

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
  return run_passes(g, constants, disabled, layout, info, options());
}

std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled,
                                      const LayoutPlan* layout, PipelineInfo* info,
                                      const CpuBackendOptions& opts) {
  ir::PassManagerOptions m;
  m.log = opts.log_passes;
  m.log_graphs = opts.log_graphs;
  m.disabled = opts.disabled_passes;
  m.disabled.insert(m.disabled.end(), disabled.begin(), disabled.end());
  ir::PassManager manager(cpu_pipeline(), std::move(m));
  CpuPassContext ctx(constants, opts);
  ctx.layout = layout;
  ctx.info = info;
  std::unique_ptr<ir::Graph> cur = copy_graph(g);
  manager.run(cur, ctx);
  if (info)
    for (const ir::PassRecord& r : manager.records())
      if (r.ran) info->pass_seconds.emplace_back(r.name, r.seconds);
  return cur;
}

}  // namespace lathe::backend::cpu
