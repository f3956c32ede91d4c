#include "lathe/backend/cpu/fuse_conv.h"

#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

// One matched chain: the nodes it replaces and what the fused node needs.
struct Chain {
  std::vector<const ir::Node*> nodes;  // conv first, in graph order
  const ir::Node* bn = nullptr;
  const ir::Value* residual = nullptr;
  std::string act = "none", act2 = "none";
  double act_min = 0, act_max = 0, act2_min = 0, act2_max = 0;
};

// An op with a relu or clip post-op form (relu, hardtanh) reading v as its only input: sets the
// activation fields.
bool match_act(const ir::Node* n, const ir::Value* v, std::string& act, double& lo, double& hi) {
  std::optional<PostOp> p = post_op_of(n, v);
  if (!p || (p->kind != PostOp::Kind::relu && p->kind != PostOp::Kind::clip)) return false;
  act = post_op_name(p->kind);
  lo = p->lo;
  hi = p->hi;
  return true;
}

Chain match_chain(const ir::Node* conv, const ChainLimits& limits) {
  Chain c;
  c.nodes.push_back(conv);
  const ir::Value* v = conv->output();
  const ir::Node* next = sole_user(v, limits);
  if (is_op(next, cpu_ops().batch_norm) && next->inputs()[0] == v && !next->attrs().get_bool("training") &&
      next->inputs()[1] && next->inputs()[2]) {
    c.bn = next;
    c.nodes.push_back(next);
    v = next->output();
    next = sole_user(v, limits);
  }
  if (match_act(next, v, c.act, c.act_min, c.act_max)) {
    c.nodes.push_back(next);
    v = next->output();
    next = sole_user(v, limits);
  }
  if (const ir::Value* r = residual_operand(next, v)) {
    c.residual = r;
    c.nodes.push_back(next);
    v = next->output();
    next = sole_user(v, limits);
    if (match_act(next, v, c.act2, c.act2_min, c.act2_max)) c.nodes.push_back(next);
  }
  return c;
}

}  // namespace

bool writes_inside(const std::vector<const ir::Node*>& chain, const std::vector<ir::Node*>& order,
                   const std::unordered_map<const ir::Node*, size_t>& position) {
  size_t first = position.at(chain.front()), last = position.at(chain.back());
  std::unordered_set<const ir::Node*> in_chain(chain.begin(), chain.end());
  for (size_t i = first + 1; i < last; ++i)
    if (!in_chain.count(order[i]) && order[i]->has_side_effects()) return true;
  return false;
}

std::unique_ptr<ir::Graph> fuse_conv(const ir::Graph& g, FuseConvStats* stats) {
  const OpDef& fused_op = *cpu_ops().conv2d_fused;
  // Chains by their last node; nodes inside a chain are skipped when copying.
  std::unordered_set<const ir::Node*> absorbed;
  auto by_last = collect_chains<Chain>(g, cpu_ops().conv2d, match_chain, absorbed);

  FuseConvStats s;
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    auto it = by_last.find(&n);
    if (it == by_last.end()) return absorbed.count(&n) != 0;  // inside a chain: dropped
    const Chain& c = it->second;
    const ir::Node* conv = c.nodes.front();
    std::vector<ir::Value*> inputs{copy[conv->inputs()[0]], copy[conv->inputs()[1]],
                                   copy[conv->inputs()[2]]};
    for (int i : {1, 2, 3, 4}) inputs.push_back(c.bn ? copy[c.bn->inputs()[i]] : nullptr);
    inputs.push_back(c.residual ? copy[c.residual] : nullptr);
    Attrs attrs = conv->attrs();
    attrs.set("eps", c.bn ? c.bn->attrs().get_double("eps") : 0.0);
    attrs.set("act", c.act).set("act_min", c.act_min).set("act_max", c.act_max);
    attrs.set("act2", c.act2).set("act2_min", c.act2_min).set("act2_max", c.act2_max);
    ir::Node* f =
        copy.graph->add_node(fused_op, std::move(inputs), std::move(attrs), {n.output()->type()});
    copy.map[n.output()] = f->output();
    ++s.fused;
    s.bn_folded += c.bn != nullptr;
    s.residual += c.residual != nullptr;
    return true;
  });
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
