#include "lathe/backend/cpu/fuse_dw_conv.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/cpu_options.h"
#include "lathe/backend/cpu/match.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/kernels/dnnl_conv_dw.h"
#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

// A conv2d_blocked with no residual, no second activation and the direct algorithm.
bool plain_blocked_conv(const ir::Node* n) {
  if (!is_op(n, cpu_ops().conv2d_blocked) || n->inputs().size() != 4 || n->inputs()[3]) return false;
  const Attrs& a = n->attrs();
  if (a.get_string("act2") != "none") return false;
  return !a.has("algorithm") || a.get_string("algorithm") == "direct";
}

bool all_static(const Shape& s) {
  for (const SymInt& d : s)
    if (!d.maybe_int()) return false;
  return true;
}

bool is_pair(const Shape& s, int64_t v) {
  return s.size() == 2 && s[0].maybe_int() == v && s[1].maybe_int() == v;
}

// The depthwise stride (1 or 2) when n is a 3x3 depthwise conv2d_blocked with padding 1; else 0.
int64_t depthwise_3x3_stride(const ir::Node* n) {
  if (!plain_blocked_conv(n)) return 0;
  const Attrs& a = n->attrs();
  const Shape& w = n->inputs()[1]->type().sizes;
  if (!all_static(w) || w.size() != 4 || w[1].maybe_int() != 1 || w[2].maybe_int() != 3 ||
      w[3].maybe_int() != 3 || a.get_int("groups") != *w[0].maybe_int())
    return 0;
  if (!is_pair(a.get_shape("padding"), 1) || !is_pair(a.get_shape("dilation"), 1)) return 0;
  for (int64_t s : {1, 2})
    if (is_pair(a.get_shape("stride"), s)) return s;
  return 0;
}

// Whether n is a 1x1 conv2d_blocked, stride 1, no padding, one group, static shapes.
bool pointwise_1x1(const ir::Node* n) {
  if (!plain_blocked_conv(n)) return false;
  const Attrs& a = n->attrs();
  const Shape& w = n->inputs()[1]->type().sizes;
  return all_static(w) && all_static(n->inputs()[0]->type().sizes) && w.size() == 4 &&
         w[2].maybe_int() == 1 && w[3].maybe_int() == 1 && a.get_int("groups") == 1 &&
         is_pair(a.get_shape("stride"), 1) && is_pair(a.get_shape("padding"), 0) &&
         is_pair(a.get_shape("dilation"), 1);
}

detail::PostOps pair_post_ops(const ir::Node* pw, const ir::Node* dw) {
  auto act = [](const std::string& s) {
    using A = detail::PostOps::Act;
    return s == "relu"        ? A::relu
           : s == "clip"      ? A::clip
           : s == "gelu"      ? A::gelu_erf
           : s == "gelu_tanh" ? A::gelu_tanh
                              : A::none;
  };
  detail::PostOps p;
  p.act = act(pw->attrs().get_string("act"));
  p.act_lo = static_cast<float>(pw->attrs().get_double("act_min"));
  p.act_hi = static_cast<float>(pw->attrs().get_double("act_max"));
  p.act2 = act(dw->attrs().get_string("act"));
  p.act2_lo = static_cast<float>(dw->attrs().get_double("act_min"));
  p.act2_hi = static_cast<float>(dw->attrs().get_double("act_max"));
  return p;
}

}  // namespace

bool fuse_dw_conv_enabled() {
  return options().dw_fusion;
}

std::unique_ptr<ir::Graph> fuse_dw_conv(const ir::Graph& g, FuseDwConvStats* stats) {
  const std::unordered_set<const ir::Value*> outs(g.outputs().begin(), g.outputs().end());
  // depthwise node -> the 1x1 node it absorbs
  std::unordered_map<const ir::Node*, const ir::Node*> pair_of;
  std::unordered_set<const ir::Node*> absorbed;
  FuseDwConvStats s;
  for (const ir::Node* dw : g.nodes()) {
    const int64_t stride = depthwise_3x3_stride(dw);
    if (!stride) continue;
    const ir::Value* mid = dw->inputs()[0];
    const ir::Node* pw = mid->producer();
    if (!pointwise_1x1(pw) || mid->users().size() != 1 || outs.count(mid)) continue;
    const Shape& x = pw->inputs()[0]->type().sizes;  // [N, C/B, H, W, B]
    const Shape& w = pw->inputs()[1]->type().sizes;  // [M, C, 1, 1]
    const int64_t block = *x[4].maybe_int();
    const std::string impl = detail::dnnl_dw_fusion_impl(
        *x[0].maybe_int(), *x[1].maybe_int() * block, *w[0].maybe_int(), *x[2].maybe_int(),
        *x[3].maybe_int(), block, stride, pw->inputs()[2] != nullptr, dw->inputs()[2] != nullptr,
        pair_post_ops(pw, dw));
    if (impl.empty() || impl.rfind("ref", 0) == 0) {
      ++s.no_jit;
      continue;
    }
    pair_of[dw] = pw;
    absorbed.insert(pw);
  }
  const OpDef& fused_op = *cpu_ops().conv2d_1x1_dw_blocked;
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    if (absorbed.count(&n)) return true;  // emitted with its depthwise reader
    auto it = pair_of.find(&n);
    if (it == pair_of.end()) return false;
    const ir::Node* pw = it->second;
    const Attrs& pa = pw->attrs();
    const Attrs& da = n.attrs();
    Attrs a{{"act", pa.get_string("act")},           {"act_min", pa.get_double("act_min")},
            {"act_max", pa.get_double("act_max")},   {"dw_stride", depthwise_3x3_stride(&n)},
            {"dw_act", da.get_string("act")},        {"dw_act_min", da.get_double("act_min")},
            {"dw_act_max", da.get_double("act_max")}};
    std::vector<ir::Value*> in{copy[pw->inputs()[0]], copy[pw->inputs()[1]], copy[pw->inputs()[2]],
                               copy[n.inputs()[1]], copy[n.inputs()[2]]};
    copy.map[n.output()] =
        copy.graph->add_node(fused_op, std::move(in), std::move(a), {n.output()->type()})->output();
    ++s.fused;
    return true;
  });
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
