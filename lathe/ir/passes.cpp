#include "lathe/ir/passes.h"

#include <unordered_map>
#include <unordered_set>

#include "lathe/ir/structural.h"

namespace lathe::ir {

bool is_random_op(const OpDef& op) { return op.category == OpCategory::random; }

int dead_code_elimination(Graph& g) {
  std::unordered_set<const Value*> live(g.outputs().begin(), g.outputs().end());
  std::unordered_set<const Node*> keep;
  std::vector<Node*> nodes = g.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node* n = *it;
    bool needed = n->has_side_effects();
    for (const Value* v : n->outputs()) needed = needed || live.count(v);
    if (!needed) continue;
    keep.insert(n);
    for (const Value* v : n->inputs())
      if (v) live.insert(v);
  }
  int removed = static_cast<int>(nodes.size() - keep.size());
  if (removed > 0) g.remove_nodes_if([&](const Node& n) { return !keep.count(&n); });
  return removed;
}

namespace {

struct NodeKey {
  const Node* node;
};
struct NodeKeyHash {
  size_t operator()(const NodeKey& k) const {
    StructuralHasher h;
    h.add(reinterpret_cast<uint64_t>(&k.node->op()));
    for (const Value* v : k.node->inputs()) h.add(reinterpret_cast<uint64_t>(v));
    h.add(k.node->attrs());
    return h.get();
  }
};
struct NodeKeyEqual {
  bool operator()(const NodeKey& a, const NodeKey& b) const {
    return &a.node->op() == &b.node->op() && a.node->inputs() == b.node->inputs() &&
           a.node->outputs().size() == b.node->outputs().size() &&
           same_attrs(a.node->attrs(), b.node->attrs());
  }
};

}  // namespace

int common_subexpression_elimination(Graph& g) {
  std::unordered_map<NodeKey, const Node*, NodeKeyHash, NodeKeyEqual> seen;
  std::unordered_set<const Node*> merged;
  for (Node* n : g.nodes()) {
    if (n->has_side_effects()) {
      // What earlier nodes read may change here: start a new region.
      seen.clear();
      continue;
    }
    if (is_random_op(n->op())) continue;
    auto [it, inserted] = seen.emplace(NodeKey{n}, n);
    if (inserted) continue;
    const Node* first = it->second;
    for (size_t i = 0; i < n->outputs().size(); ++i)
      g.replace_all_uses(n->output(i), first->output(i));
    merged.insert(n);
  }
  if (!merged.empty()) g.remove_nodes_if([&](const Node& n) { return merged.count(&n) != 0; });
  return static_cast<int>(merged.size());
}

}  // namespace lathe::ir
