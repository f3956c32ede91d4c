// Small matching helpers shared by the fusion passes.
#pragma once

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lathe/backend/cpu/kernel_table.h"
#include "lathe/backend/cpu/op_handles.h"
#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

// True when n is a node of op (a handle from cpu_ops(): a pointer compare).
inline bool is_op(const ir::Node* n, const OpDef* op) { return n && &n->op() == op; }

// The post-op form of n (CpuKernelInfo::post_op) when n reads v as its only input; else nullopt.
inline std::optional<PostOp> post_op_of(const ir::Node* n, const ir::Value* v) {
  if (!n || n->inputs().size() != 1 || n->inputs()[0] != v) return std::nullopt;
  const CpuKernelInfo* k = cpu_kernel(&n->op());
  if (!k || !k->post_op) return std::nullopt;
  return k->post_op(n->attrs());
}

// What a chain may grow into: the graph outputs (values that must stay) and the nodes earlier
// chains took.
struct ChainLimits {
  const std::unordered_set<const ir::Value*>& outs;
  const std::unordered_set<const ir::Node*>& absorbed;
};

// The only user of v, when v has exactly one, is not a graph output, and the user is in no
// earlier chain.
inline const ir::Node* sole_user(const ir::Value* v, const ChainLimits& limits) {
  if (v->users().size() != 1 || limits.outs.count(v)) return nullptr;
  const ir::Node* u = v->users()[0];
  return limits.absorbed.count(u) ? nullptr : u;
}

inline bool same_sizes(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto x = a[i].maybe_int(), y = b[i].maybe_int();
    if (x && y) {
      if (*x != *y) return false;
    } else if (a[i].expr() != b[i].expr()) {  // symbolic: the same (hash-consed) expression
      return false;
    }
  }
  return true;
}

// An add of v and another value r with alpha 1, where r has v's (and the sum's) exact sizes,
// dtype and device: the residual add a fused node can take as a sum post-op. Returns r or null.
inline const ir::Value* residual_operand(const ir::Node* add, const ir::Value* v) {
  if (!is_op(add, cpu_ops().add) || add->inputs().size() != 2) return nullptr;
  if (add->attrs().has("alpha") && add->attrs().get_double("alpha") != 1.0) return nullptr;
  const ir::Value* r = add->inputs()[0] == v ? add->inputs()[1] : add->inputs()[0];
  const ir::ValueType& rt = r->type();
  if (r == v || rt.dtype != v->type().dtype || !(rt.device == v->type().device)) return nullptr;
  if (!same_sizes(rt.sizes, v->type().sizes) || !same_sizes(add->output()->type().sizes, rt.sizes))
    return nullptr;
  return r;
}

// True when a node outside `chain` that writes in place runs between the chain's first and last
// node (`order` is the graph's node order, `position` its inverse).
bool writes_inside(const std::vector<const ir::Node*>& chain, const std::vector<ir::Node*>& order,
                   const std::unordered_map<const ir::Node*, size_t>& position);

// The chains a fusion pass will replace: for each node of op `root` (in graph order, not already
// inside a chain), match(node, ChainLimits) returns a Chain whose `nodes` start at that node
// (and take no node of an earlier chain); chains of two or more nodes with no in-place write
// inside them are kept, keyed by their last node, and every node they cover goes into
// `absorbed`.
template <class Chain, class Match>
std::unordered_map<const ir::Node*, Chain> collect_chains(
    const ir::Graph& g, const OpDef* root, Match match,
    std::unordered_set<const ir::Node*>& absorbed) {
  std::unordered_set<const ir::Value*> outs(g.outputs().begin(), g.outputs().end());
  std::vector<ir::Node*> order = g.nodes();
  std::unordered_map<const ir::Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::unordered_map<const ir::Node*, Chain> by_last;
  for (const ir::Node* n : order) {
    if (!is_op(n, root) || absorbed.count(n)) continue;
    // Two chains may reach the same residual add (conv -> bn -> add <- bn <- conv): the first
    // one in graph order takes it, the other stops before it.
    Chain c = match(n, ChainLimits{outs, absorbed});
    if (c.nodes.size() < 2 || writes_inside(c.nodes, order, position)) continue;
    for (const ir::Node* m : c.nodes) absorbed.insert(m);
    by_last.emplace(c.nodes.back(), std::move(c));
  }
  return by_last;
}

}  // namespace lathe::backend::cpu
