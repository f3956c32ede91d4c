#include "lathe/backend/cpu/fuse_linear.h"

#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

struct Chain {
  std::vector<const ir::Node*> nodes;  // linear first, in graph order
  std::string act = "none";
  const ir::Value* residual = nullptr;
};

// An op with a relu or gelu post-op form (relu, gelu) reading v as its only input: the
// linear_fused activation name, or "".
std::string act_of(const ir::Node* n, const ir::Value* v) {
  std::optional<PostOp> p = post_op_of(n, v);
  if (!p || p->kind == PostOp::Kind::clip) return "";
  return post_op_name(p->kind);
}

Chain match_chain(const ir::Node* linear, const ChainLimits& limits) {
  Chain c;
  c.nodes.push_back(linear);
  const ir::Value* v = linear->output();
  const ir::Node* next = sole_user(v, limits);
  if (std::string act = act_of(next, v); !act.empty()) {
    c.act = act;
    c.nodes.push_back(next);
    v = next->output();
    next = sole_user(v, limits);
  }
  if (const ir::Value* r = residual_operand(next, v)) {
    c.residual = r;
    c.nodes.push_back(next);
  }
  return c;
}

}  // namespace

std::unique_ptr<ir::Graph> fuse_linear(const ir::Graph& g, FuseLinearStats* stats) {
  const OpDef& fused_op = *cpu_ops().linear_fused;
  // Chains by their last node; nodes inside a chain are skipped when copying.
  std::unordered_set<const ir::Node*> absorbed;
  auto by_last = collect_chains<Chain>(g, cpu_ops().linear, match_chain, absorbed);

  FuseLinearStats s;
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    auto it = by_last.find(&n);
    if (it == by_last.end()) return absorbed.count(&n) != 0;  // inside a chain: dropped
    const Chain& c = it->second;
    const ir::Node* lin = c.nodes.front();
    std::vector<ir::Value*> inputs{copy[lin->inputs()[0]], copy[lin->inputs()[1]],
                                   copy[lin->inputs()[2]], c.residual ? copy[c.residual] : nullptr};
    Attrs attrs{{"act", c.act}};
    ir::Node* f =
        copy.graph->add_node(fused_op, std::move(inputs), std::move(attrs), {n.output()->type()});
    copy.map[n.output()] = f->output();
    ++s.fused;
    s.act += c.act != "none";
    s.residual += c.residual != nullptr;
    return true;
  });
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
