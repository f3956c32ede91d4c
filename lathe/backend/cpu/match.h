// Small matching helpers shared by the fusion passes.
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

inline bool is_op(const ir::Node* n, const char* name) { return n && n->op().name == name; }

// The only user of v, when v has exactly one and is not a graph output.
inline const ir::Node* sole_user(const ir::Value* v,
                                 const std::unordered_set<const ir::Value*>& outs) {
  if (v->users().size() != 1 || outs.count(v)) return nullptr;
  return v->users()[0];
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
  if (!is_op(add, "add") || add->inputs().size() != 2) return nullptr;
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

}  // namespace lathe::backend::cpu
