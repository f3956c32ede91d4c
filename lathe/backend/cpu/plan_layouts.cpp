#include "lathe/backend/cpu/plan_layouts.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
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
  return is_op(n, "conv2d_fused") ? n->inputs()[kResidual] : nullptr;
}

bool is_candidate(const ir::Node* n, int64_t B) {
  if (!is_op(n, "conv2d_fused") && !is_op(n, "conv2d")) return false;
  const auto& in = n->inputs();
  if (is_op(n, "conv2d_fused") && (in[kMean] || in[kVar] || in[kGamma] || in[kBeta])) return false;
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

// A max pooling that can stay on the blocked layout: f32 4-d, static, C a multiple of B, reading
// the output of a candidate convolution (a pooling right after the stem, which is no candidate,
// would move the reorder onto its larger input).
bool is_pool_candidate(const ir::Node* n, int64_t B,
                       const std::unordered_set<const ir::Node*>& convs) {
  if (!is_op(n, "max_pool2d")) return false;
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
  if (is_op(u, "max_pool2d")) return u->inputs()[kX] == y;
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

bool plan_layouts_winograd() {
  if (const char* e = std::getenv("LATHE_CPU_WINOGRAD")) {
    const std::string v = e;
    LATHE_CHECK(v == "0" || v == "1", "[plan_layouts] LATHE_CPU_WINOGRAD must be 0 or 1, got '", v,
                "'");
    return v == "1" && lathe::detail::dnnl_measured_winograd().available;
  }
  return lathe::detail::dnnl_measured_winograd().use;
}

int plan_layouts_block() {
  if (const char* e = std::getenv("LATHE_CPU_BLOCK")) {
    const std::string v = e;
    LATHE_CHECK(v == "0" || v == "8" || v == "16",
                "[plan_layouts] LATHE_CPU_BLOCK must be 0, 8 or 16, got '", v, "'");
    return std::stoi(v);
  }
  return lathe::detail::dnnl_measured_conv_layout().block;
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
  const bool blocked = is_op(n, "conv2d_blocked");
  if (!blocked && !is_op(n, "conv2d_fused") && !is_op(n, "conv2d")) return std::nullopt;
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

// The measured time of g's memory-bound convolutions and of its reorders.
double measured_cost(const ir::Graph& g, int* probed) {
  double t = 0;
  for (const ir::Node* n : g.nodes()) {
    if (is_op(n, "to_blocked") || is_op(n, "from_blocked")) {
      const ir::Value* v = is_op(n, "to_blocked") ? n->inputs()[0] : n->output();
      if (v->type().sizes.size() == 4 && all_static(v)) {
        const int block = static_cast<int>(
            is_op(n, "to_blocked") ? n->attrs().get_int("block") : *static_size(n->inputs()[0], 4));
        t += lathe::detail::dnnl_measured_reorder_s(*static_size(v, 0), *static_size(v, 1),
                                                    *static_size(v, 2), *static_size(v, 3), block);
      }
      continue;
    }
    auto c = conv_cost(n);
    if (!c || c->flops_per_byte >= kMemoryBoundFlopsPerByte) continue;
    t += lathe::detail::dnnl_measured_conv_s(c->shape, c->block);
    if (probed) ++*probed;
  }
  return t;
}

}  // namespace

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
  bool any = false;
  for (const ir::Node* n : g.nodes()) {
    auto cc = conv_cost(n);
    any |= cc && cc->flops_per_byte < kMemoryBoundFlopsPerByte;
  }
  // The plans with each block; nothing to measure when neither converts a convolution.
  std::unique_ptr<ir::Graph> planned[2];
  for (int k : {0, 1}) {
    PlanLayoutsStats st;
    planned[k] = plan_layouts(g, &st, k == 0 ? 8 : 16, false, constant_weights);
    if (st.blocked_convs == 0) planned[k].reset();
  }
  if (!any || (!planned[0] && !planned[1])) {
    c.block = plan_layouts_block();
    return c;
  }
  c.cost_s[0] = measured_cost(g, &c.probed_convs);
  double best = c.cost_s[0];
  for (int k : {0, 1}) {
    c.cost_s[k + 1] = planned[k] ? measured_cost(*planned[k], nullptr) : INFINITY;
    if (c.cost_s[k + 1] < 0.95 * c.cost_s[0] && c.cost_s[k + 1] < best) {
      best = c.cost_s[k + 1];
      c.block = k == 0 ? 8 : 16;
    }
  }
  return c;
}

std::unique_ptr<ir::Graph> plan_layouts(
    const ir::Graph& g, PlanLayoutsStats* stats, int block, bool winograd,
    const std::unordered_set<const ir::Value*>* constant_weights) {
  LATHE_CHECK(block == 0 || block == 8 || block == 16,
              "[plan_layouts] the block must be 0, 8 or 16, got ", block);
  // Winograd runs on nChw16c only: a graph with a convolution it can run takes that block.
  std::unordered_set<const ir::Node*> wino;
  if (winograd && block != 8)
    for (const ir::Node* n : g.nodes())
      if (winograd_candidate(n) &&
          (!constant_weights || constant_weights->count(n->inputs()[kWeight])))
        wino.insert(n);
  if (!wino.empty()) block = 16;
  const int64_t B = block;
  std::unordered_set<const ir::Node*> candidates;
  for (const ir::Node* n : g.nodes())
    if (B != 0 && is_candidate(n, B)) candidates.insert(n);
  std::unordered_set<const ir::Node*> pools;
  for (const ir::Node* n : g.nodes())
    if (B != 0 && is_pool_candidate(n, B, candidates)) pools.insert(n);
  candidates.insert(pools.begin(), pools.end());
  std::unordered_set<const ir::Value*> outs(g.outputs().begin(), g.outputs().end());
  std::unordered_set<const ir::Value*> blocked;  // values kept in the blocked layout
  for (const ir::Node* n : candidates) {
    const ir::Value* y = n->output();
    if (outs.count(y) || y->users().empty()) continue;
    bool all = true;
    for (const ir::Node* u : y->users()) {
      // Read as the input or the residual (not as a weight), by a candidate.
      all &= candidates.count(u) && reads_as_activation(u, y);
    }
    if (all) blocked.insert(y);
  }
  // A Winograd convolution pays for its reorders by itself (about 2x on the convolution).
  auto converts = [&](const ir::Node* n) {
    return candidates.count(n) &&
           (wino.count(n) || blocked.count(n->output()) || blocked.count(n->inputs()[kX]) ||
            (residual_of(n) && blocked.count(residual_of(n))));
  };

  PlanLayoutsStats s;
  s.block = block;
  const OpDef& conv_op = LATHE_OP("conv2d_blocked");
  const OpDef& pool_op = LATHE_OP("max_pool2d_blocked");
  const OpDef& to_op = LATHE_OP("to_blocked");
  const OpDef& from_op = LATHE_OP("from_blocked");
  std::unordered_map<const ir::Value*, ir::Value*> as_blocked;  // old value -> new blocked one
  auto blocked_type = [B](const ir::ValueType& t) {
    ir::ValueType b = t;
    const Shape& z = t.sizes;
    b.sizes = to_shape(
        {*z[0].maybe_int(), *z[1].maybe_int() / B, *z[2].maybe_int(), *z[3].maybe_int(), B});
    b.strides = contiguous_strides(b.sizes);
    return b;
  };
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
    if (is_op(&n, "conv2d")) {  // a plain convolution: no post-ops
      attrs.set("act", std::string("none")).set("act_min", 0.0).set("act_max", 0.0);
      attrs.set("act2", std::string("none")).set("act2_min", 0.0).set("act2_max", 0.0);
    }
    if (wino.count(&n)) {
      attrs.set("algorithm", std::string("winograd"));
      ++s.winograd_convs;
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
