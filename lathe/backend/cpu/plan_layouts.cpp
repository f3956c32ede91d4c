#include "lathe/backend/cpu/plan_layouts.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
#include "lathe/backend/cpu/min_cut.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

enum FusedInput { kX, kWeight, kBias, kMean, kVar, kGamma, kBeta, kResidual };

std::optional<int64_t> static_size(const ir::Value* v, size_t d) {
  const Shape& s = v->type().sizes;
  return d < s.size() ? s[d].maybe_int() : std::nullopt;
}

bool all_static(const ir::Value* v) {
  for (const SymInt& s : v->type().sizes)
    if (!s.maybe_int()) return false;
  return true;
}

// The residual a candidate reads (conv2d_fused only).
const ir::Value* residual_of(const ir::Node* n) {
  return is_op(n, cpu_ops().conv2d_fused) ? n->inputs()[kResidual] : nullptr;
}

bool is_candidate(const ir::Node* n, int64_t B) {
  if (!is_op(n, cpu_ops().conv2d_fused) && !is_op(n, cpu_ops().conv2d)) return false;
  const auto& in = n->inputs();
  if (is_op(n, cpu_ops().conv2d_fused) && (in[kMean] || in[kVar] || in[kGamma] || in[kBeta])) return false;
  const ir::Value* x = in[kX];
  const ir::Value* w = in[kWeight];
  if (x->type().dtype != DType::f32 || x->type().sizes.size() != 4 || !all_static(x) ||
      !all_static(w) || !all_static(n->output()))
    return false;
  const int64_t C = *static_size(x, 1), O = *static_size(w, 0);
  const int64_t groups = n->attrs().get_int("groups");
  if (C % B != 0 || O % B != 0) return false;
  // from_blocked gives back channels-last values: the value it stands for must be one.
  const ir::ValueType& yt = n->output()->type();
  if (yt.strides.empty() || !same_sizes(yt.strides, channels_last_strides(yt.sizes))) return false;
  return groups == 1 || (groups == C && groups == O) ||
         ((C / groups) % B == 0 && (O / groups) % B == 0);
}

// A network's first convolution (f32 4-d static, at most 4 input channels, which fill no block,
// one group, no residual or batch norm, output channels a multiple of B): it can read its input
// as it is (nchw) and write the blocked layout itself, so a region may start there without a
// reorder of its large output.
bool is_stem(const ir::Node* n, int64_t B) {
  if (!is_op(n, cpu_ops().conv2d_fused) && !is_op(n, cpu_ops().conv2d)) return false;
  const auto& in = n->inputs();
  if (is_op(n, cpu_ops().conv2d_fused) &&
      (in[kMean] || in[kVar] || in[kGamma] || in[kBeta] || in[kResidual]))
    return false;
  const ir::Value* x = in[kX];
  const ir::Value* w = in[kWeight];
  if (x->type().dtype != DType::f32 || x->type().sizes.size() != 4 || !all_static(x) ||
      !all_static(w) || !all_static(n->output()) || n->attrs().get_int("groups") != 1)
    return false;
  const int64_t C = *static_size(x, 1), O = *static_size(w, 0);
  const ir::ValueType& yt = n->output()->type();
  return C <= 4 && C % B != 0 && O % B == 0 && !yt.strides.empty() &&
         same_sizes(yt.strides, channels_last_strides(yt.sizes));
}

// A max pooling that can stay on the blocked layout: f32 4-d, static, C a multiple of B, reading
// the output of a candidate convolution (a pooling right after the stem, which is no candidate,
// would move the reorder onto its larger input).
bool is_pool_candidate(const ir::Node* n, int64_t B,
                       const std::unordered_set<const ir::Node*>& convs) {
  if (!is_op(n, cpu_ops().max_pool2d)) return false;
  const ir::Value* x = n->inputs()[kX];
  if (x->type().dtype != DType::f32 || x->type().sizes.size() != 4 || !all_static(x) ||
      !all_static(n->output()) || *static_size(x, 1) % B != 0 || !convs.count(x->producer()))
    return false;
  const ir::ValueType& yt = n->output()->type();
  return !yt.strides.empty() && same_sizes(yt.strides, channels_last_strides(yt.sizes));
}

// Whether candidate u reads y as its activation (a convolution's input or residual, a pooling's
// input), not as a weight or bias.
bool reads_as_activation(const ir::Node* u, const ir::Value* y) {
  if (is_op(u, cpu_ops().max_pool2d)) return u->inputs()[kX] == y;
  return u->inputs()[kWeight] != y && u->inputs()[kBias] != y;
}

// A candidate oneDNN can run with its Winograd algorithm on nChw16c.
bool winograd_candidate(const ir::Node* n) {
  if (!is_candidate(n, 16)) return false;
  const ir::Value* w = n->inputs()[kWeight];
  const lathe::detail::Conv2dParams p = lathe::detail::conv_params(n->attrs());
  return lathe::detail::winograd_eligible(*static_size(n->inputs()[kX], 1), *static_size(w, 0),
                                          *static_size(w, 2), *static_size(w, 3), p);
}

}  // namespace

bool plan_layouts_winograd(const CpuBackendOptions& o) {
  if (o.winograd) return *o.winograd && lathe::detail::dnnl_measured_winograd().available;
  return lathe::detail::dnnl_measured_winograd().use;
}

bool plan_layouts_winograd() { return plan_layouts_winograd(options()); }

int plan_layouts_block() {
  const CpuBackendOptions o = options();
  return o.block ? *o.block : lathe::detail::dnnl_measured_conv_layout().block;
}

namespace {

// The probe shape of a convolution node (conv2d, conv2d_fused or conv2d_blocked) with static
// f32 sizes, and its flops per byte of activation; nullopt otherwise.
struct ConvCost {
  lathe::detail::ConvProbeShape shape;
  double flops_per_byte = 0;
  int block = 0;  // the layout it runs on (conv2d_blocked: its block)
};
std::optional<ConvCost> conv_cost(const ir::Node* n) {
  const bool blocked = is_op(n, cpu_ops().conv2d_blocked);
  if (!blocked && !is_op(n, cpu_ops().conv2d_fused) && !is_op(n, cpu_ops().conv2d)) return std::nullopt;
  const ir::Value* x = n->inputs()[kX];
  const ir::Value* w = n->inputs()[kWeight];
  const ir::Value* y = n->output();
  if (x->type().dtype != DType::f32 || !all_static(x) || !all_static(w) || !all_static(y) ||
      w->type().sizes.size() != 4 || x->type().sizes.size() != (blocked ? 5u : 4u))
    return std::nullopt;
  ConvCost c;
  c.block = blocked ? static_cast<int>(*static_size(x, 4)) : 0;
  const int64_t B = blocked ? c.block : 1;
  auto& s = c.shape;
  s.n = *static_size(x, 0), s.c = *static_size(x, 1) * B, s.h = *static_size(x, 2),
  s.w = *static_size(x, 3);
  s.o = *static_size(w, 0), s.kh = *static_size(w, 2), s.kw = *static_size(w, 3);
  s.p = lathe::detail::conv_params(n->attrs());
  s.p.winograd = false;
  const double out_elems = static_cast<double>(s.n) * s.o * *static_size(y, 2) * *static_size(y, 3);
  const double in_elems = static_cast<double>(s.n) * s.c * s.h * s.w;
  const double flops = 2.0 * out_elems * static_cast<double>(s.c / s.p.groups) * s.kh * s.kw;
  c.flops_per_byte = flops / (4.0 * (in_elems + out_elems));
  return c;
}

// The time of the reorder of v (4-d, static) between channels-last and nChw<B>c.
double reorder_s(const ir::Value* v, int64_t B) {
  if (v->type().sizes.size() != 4 || !all_static(v)) return 0;
  return lathe::detail::dnnl_measured_reorder_s(*static_size(v, 0), *static_size(v, 1),
                                                *static_size(v, 2), *static_size(v, 3),
                                                static_cast<int>(B));
}

// Per-region labelling for block B (see choose_block): each candidate convolution is labelled
// channels-last (the source side of a MinCut) or blocked (the sink side), so that the measured
// time of the memory-bound convolutions in their layouts plus the reorders the labels need is
// least. Costs as cut edges:
// - a memory-bound convolution n: source -> n with its blocked time (paid when n is blocked),
//   n -> sink with its channels-last time (paid when it is not); other convolutions cost the same
//   on both (they run at the machine's peak) and follow their neighbours;
// - an activation v read by candidates: a node `blk` (v has a blocked copy) that every blocked
//   reader forces to the sink side (edge blk -> reader, infinite), paying the reorder into the
//   block when v's producer is channels-last (edge producer -> blk, or source -> blk when the
//   producer is no candidate); and, for a candidate's output, a node `cl` (v has a
//   channels-last copy) that every channels-last reader, and any reader outside the candidates
//   or a graph output, forces to the source side, paying the reorder out when the producer is
//   blocked (edge cl -> producer).
// Each reorder is paid once per value however many readers share it, as plan_layouts does.
struct RegionLabels {
  double cost_s = 0;                          // the labelling's convolutions plus reorders
  std::unordered_set<const ir::Node*> blocked;  // the convolutions labelled blocked
};
RegionLabels label_regions(const ir::Graph& g, int64_t B) {
  MinCut cut;
  std::unordered_map<const ir::Node*, int> id;
  RegionLabels out;
  std::unordered_set<const ir::Node*> stems;
  for (const ir::Node* n : g.nodes()) {
    const bool stem = is_stem(n, B);
    if (is_candidate(n, B) || stem) {
      id.emplace(n, cut.add_node());
      if (stem) stems.insert(n);
      if (!stem) continue;
    }
    // A memory-bound convolution the block cannot take stays on channels-last; a first
    // convolution takes about as long writing either layout (not probed blocked: its input is
    // no blocked layout), so it costs its channels-last time either way.
    auto c = conv_cost(n);
    if (c && c->flops_per_byte < kMemoryBoundFlopsPerByte)
      out.cost_s += lathe::detail::dnnl_measured_conv_s(c->shape, c->block);
  }
  for (const auto& [n, v] : id) {
    auto c = conv_cost(n);
    if (stems.count(n) || !c || c->flops_per_byte >= kMemoryBoundFlopsPerByte) continue;
    const double cl = lathe::detail::dnnl_measured_conv_s(c->shape, 0);
    const double blk = lathe::detail::dnnl_measured_conv_s(c->shape, static_cast<int>(B));
    cut.add_edge(MinCut::kSource, v, std::isfinite(blk) ? blk : MinCut::kInfinite);
    cut.add_edge(v, MinCut::kSink, std::isfinite(cl) ? cl : MinCut::kInfinite);
  }
  std::unordered_set<const ir::Value*> seen;
  auto add_value = [&](const ir::Value* v) {
    if (!seen.insert(v).second) return;
    std::vector<int> readers;  // candidate readers of v as their activation
    // A fixed layout (a graph output, a viewed value: ir::Layout) keeps its strides: it counts
    // as a reader of the plain layout.
    bool others = v->type().fixed_layout();
    for (const ir::Node* u : v->users()) {
      auto it = id.find(u);
      if (it != id.end() && !stems.count(u) && reads_as_activation(u, v))
        readers.push_back(it->second);
      else
        others = true;
    }
    const ir::Node* p = v->producer();
    auto pit = p ? id.find(p) : id.end();
    const bool from_candidate = pit != id.end();
    if (readers.empty() && !from_candidate) return;
    const double r = reorder_s(v, B);
    if (!readers.empty()) {
      const int blk = cut.add_node();
      for (int u : readers) cut.add_edge(blk, u, MinCut::kInfinite);
      cut.add_edge(from_candidate ? pit->second : MinCut::kSource, blk, r);
    }
    if (from_candidate) {
      const int cl = cut.add_node();
      for (int u : readers) cut.add_edge(u, cl, MinCut::kInfinite);
      if (others) cut.add_edge(MinCut::kSource, cl, MinCut::kInfinite);
      cut.add_edge(cl, pit->second, r);
    }
  };
  for (const auto& [n, v] : id) {
    add_value(n->output());
    if (!stems.count(n)) add_value(n->inputs()[kX]);  // a first convolution reads it as it is
    if (const ir::Value* res = residual_of(n)) add_value(res);
  }
  out.cost_s += cut.solve();
  for (const auto& [n, v] : id)
    if (cut.sink_side(v)) out.blocked.insert(n);
  return out;
}

}  // namespace

std::unordered_set<const ir::Node*> region_labels(const ir::Graph& g, int block) {
  LATHE_CHECK(block == 8 || block == 16, "[plan_layouts] region labels need a block of 8 or 16, got ",
              block);
  return label_regions(g, block).blocked;
}

BlockChoice choose_block(const ir::Graph& g, bool winograd,
                         const std::unordered_set<const ir::Value*>* constant_weights) {
  BlockChoice c;
  if (winograd)
    for (const ir::Node* n : g.nodes())
      if (winograd_candidate(n) &&
          (!constant_weights || constant_weights->count(n->inputs()[kWeight]))) {
        c.block = 16;
        c.winograd = true;
        return c;
      }
  // A training step (the graph writes: batch norm statistics; and its weights are no constants)
  // stays channels-last, eager's layout, so its convolutions round as eager's do: a batch norm
  // over few elements amplifies any difference.
  bool writes = false;
  for (const ir::Node* n : g.nodes()) writes |= n->has_side_effects();
  bool any = false;
  for (const ir::Node* n : g.nodes()) {
    auto cc = conv_cost(n);
    any |= cc && cc->flops_per_byte < kMemoryBoundFlopsPerByte;
    if (cc && writes && constant_weights && !constant_weights->count(n->inputs()[kWeight])) {
      c.training = true;
      return c;
    }
  }
  if (!any) {
    c.block = plan_layouts_block();
    return c;
  }
  // All channels-last: the sum of the memory-bound convolutions' times there.
  for (const ir::Node* n : g.nodes()) {
    auto cc = conv_cost(n);
    if (cc && cc->flops_per_byte < kMemoryBoundFlopsPerByte) {
      c.cost_s[0] += lathe::detail::dnnl_measured_conv_s(cc->shape, cc->block);
      ++c.probed_convs;
    }
  }
  double best = c.cost_s[0];
  for (int k : {0, 1}) {
    RegionLabels r = label_regions(g, k == 0 ? 8 : 16);
    c.cost_s[k + 1] = r.blocked.empty() ? c.cost_s[0] : r.cost_s;
    // A blocked plan only for a clear win (the probes' noise is a few percent).
    if (!r.blocked.empty() && r.cost_s < 0.95 * c.cost_s[0] && r.cost_s < best) {
      best = r.cost_s;
      c.block = k == 0 ? 8 : 16;
      c.convert = std::move(r.blocked);
    }
  }
  // LATHE_CPU_LAYOUT_REGIONS=0: the block so chosen, with plan_layouts' whole-graph rule (for
  // comparisons).
  c.per_region = c.block != 0 && options().layout_regions;
  for (const ir::Node* n : g.nodes()) {
    auto cc = conv_cost(n);
    if (!cc || cc->flops_per_byte >= kMemoryBoundFlopsPerByte) continue;
    auto us = [&](int b) { return 1e6 * lathe::detail::dnnl_measured_conv_s(cc->shape, b); };
    c.table += lathe::detail::str("  %", n->output()->id(), " ", cc->shape.c, "->", cc->shape.o,
                                  " ", cc->shape.kh, "x", cc->shape.kw, " groups ",
                                  cc->shape.p.groups, " stride ", cc->shape.p.stride[0], " @",
                                  cc->shape.h, ": channels-last ", us(0), " us, nChw8c ", us(8),
                                  " us, nChw16c ", us(16), " us",
                                  c.convert.count(n) ? " -> blocked" : "", "\n");
  }
  return c;
}

namespace {

// What plan_layouts converts: the Winograd convolutions, the candidates (convolutions and max
// poolings), the first convolutions (stems), and the values kept blocked between them.
struct Selection {
  int block = 0;
  std::unordered_set<const ir::Node*> wino, candidates, pools, stems;
  std::unordered_set<const ir::Value*> blocked;  // values kept in the blocked layout
};

Selection select_nodes(const ir::Graph& g, int block, bool winograd,
                       const std::unordered_set<const ir::Value*>* constant_weights,
                       const std::unordered_set<const ir::Node*>* convert) {
  Selection sel;
  auto& [blk, wino, candidates, pools, stems, blocked] = sel;
  // Winograd runs on nChw16c only: a graph with a convolution it can run takes that block.
  if (winograd && block != 8)
    for (const ir::Node* n : g.nodes())
      if (winograd_candidate(n) &&
          (!constant_weights || constant_weights->count(n->inputs()[kWeight])))
        wino.insert(n);
  if (!wino.empty()) block = 16;
  blk = block;
  const int64_t B = block;
  for (const ir::Node* n : g.nodes())
    if (B != 0 && is_candidate(n, B)) candidates.insert(n);
  if (convert) {  // per-region labels: only the convolutions chosen (and Winograd's)
    std::unordered_set<const ir::Node*> chosen;
    for (const ir::Node* n : candidates)
      if (convert->count(n) || wino.count(n)) chosen.insert(n);
    candidates = std::move(chosen);
  }
  for (const ir::Node* n : g.nodes())
    if (B != 0 && is_pool_candidate(n, B, candidates)) pools.insert(n);
  candidates.insert(pools.begin(), pools.end());
  // First convolutions write blocked output when chosen (per region), or else when every reader
  // of their output is converted.
  for (const ir::Node* n : g.nodes())
    if (B != 0 && is_stem(n, B) && (!convert || convert->count(n))) stems.insert(n);
  std::vector<const ir::Node*> producers(candidates.begin(), candidates.end());
  producers.insert(producers.end(), stems.begin(), stems.end());
  for (const ir::Node* n : producers) {
    const ir::Value* y = n->output();
    if (y->type().fixed_layout() || y->users().empty()) continue;  // its strides are seen
    bool all = true;
    for (const ir::Node* u : y->users()) {
      // Read as the input or the residual (not as a weight), by a candidate.
      all &= candidates.count(u) && reads_as_activation(u, y);
    }
    if (all) blocked.insert(y);
  }
  return sel;
}

}  // namespace

namespace {

// The type of a 4-d static value in the blocked layout [N, C/B, H, W, B].
ir::ValueType blocked_value_type(const ir::ValueType& t, int64_t B) {
  ir::ValueType b = t;
  const Shape& z = t.sizes;
  b.sizes =
      to_shape({*z[0].maybe_int(), *z[1].maybe_int() / B, *z[2].maybe_int(), *z[3].maybe_int(), B});
  b.strides = contiguous_strides(b.sizes);
  return b;
}

}  // namespace

std::unique_ptr<ir::Graph> plan_layouts(
    const ir::Graph& g, PlanLayoutsStats* stats, int block, bool winograd,
    const std::unordered_set<const ir::Value*>* constant_weights,
    const std::unordered_set<const ir::Node*>* convert) {
  LATHE_CHECK(block == 0 || block == 8 || block == 16,
              "[plan_layouts] the block must be 0, 8 or 16, got ", block);
  const Selection sel = select_nodes(g, block, winograd, constant_weights, convert);
  const auto& [blk, wino, candidates, pools, stems, blocked] = sel;
  block = blk;
  const int64_t B = block;
  // A Winograd convolution pays for its reorders by itself (about 2x on the convolution).
  auto converts = [&](const ir::Node* n) {
    if (stems.count(n)) return convert || blocked.count(n->output()) > 0;
    if (convert) return candidates.count(n) > 0;  // every chosen one, reorders or not
    return candidates.count(n) &&
           (wino.count(n) || blocked.count(n->output()) || blocked.count(n->inputs()[kX]) ||
            (residual_of(n) && blocked.count(residual_of(n))));
  };

  PlanLayoutsStats s;
  s.block = block;
  const OpDef& conv_op = *cpu_ops().conv2d_blocked;
  const OpDef& pool_op = *cpu_ops().max_pool2d_blocked;
  const OpDef& to_op = *cpu_ops().to_blocked;
  const OpDef& from_op = *cpu_ops().from_blocked;
  std::unordered_map<const ir::Value*, ir::Value*> as_blocked;  // old value -> new blocked one
  auto blocked_type = [B](const ir::ValueType& t) { return blocked_value_type(t, B); };
  // A converted node's blocked result y; readers outside the region get one from_blocked of it.
  auto bind_result = [&](const ir::Node& n, ir::Value* y, GraphCopy& copy) {
    as_blocked.emplace(n.output(), y);
    if (blocked.count(n.output())) return;
    copy.map[n.output()] =
        copy.graph->add_node(from_op, {y}, Attrs{}, {n.output()->type()})->output();
    ++s.from_blocked;
  };
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    if (!converts(&n)) return false;
    auto blocked_input = [&](const ir::Value* v) -> ir::Value* {
      if (!v) return nullptr;
      auto it = as_blocked.find(v);
      if (it != as_blocked.end()) return it->second;
      ir::Value* b =
          copy.graph->add_node(to_op, {copy[v]}, Attrs{}.set("block", B), {blocked_type(v->type())})
              ->output();
      ++s.to_blocked;
      as_blocked.emplace(v, b);  // shared by every converted reader
      return b;
    };
    const auto& in = n.inputs();
    if (pools.count(&n)) {
      ir::Value* y = copy.graph
                         ->add_node(pool_op, {blocked_input(in[kX])}, n.attrs(),
                                    {blocked_type(n.output()->type())})
                         ->output();
      ++s.blocked_pools;
      bind_result(n, y, copy);
      return true;
    }
    Attrs attrs;
    for (const auto& [name, value] : n.attrs().items())
      if (std::string(name) != "eps") attrs.set(name, value);
    if (is_op(&n, cpu_ops().conv2d)) {  // a plain convolution: no post-ops
      attrs.set("act", std::string("none")).set("act_min", 0.0).set("act_max", 0.0);
      attrs.set("act2", std::string("none")).set("act2_min", 0.0).set("act2_max", 0.0);
    }
    if (wino.count(&n)) {
      attrs.set("algorithm", std::string("winograd"));
      ++s.winograd_convs;
    }
    if (stems.count(&n)) {  // reads its input as it is, writes the block
      attrs.set("block", B);
      ir::Value* y = copy.graph
                         ->add_node(conv_op, {copy[in[kX]], copy[in[kWeight]], copy[in[kBias]],
                                              nullptr},
                                    std::move(attrs), {blocked_type(n.output()->type())})
                         ->output();
      ++s.blocked_convs;
      ++s.blocked_stems;
      bind_result(n, y, copy);
      return true;
    }
    ir::Value* y = copy.graph
                       ->add_node(conv_op,
                                  {blocked_input(in[kX]), copy[in[kWeight]], copy[in[kBias]],
                                   blocked_input(residual_of(&n))},
                                  std::move(attrs), {blocked_type(n.output()->type())})
                       ->output();
    ++s.blocked_convs;
    bind_result(n, y, copy);
    return true;
  });
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
