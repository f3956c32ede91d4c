#include "lathe/backend/cpu/fuse_attention.h"

#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

struct Chain {
  std::vector<const ir::Node*> nodes;  // the first matmul first, in graph order
  const ir::Value* scale = nullptr;
  bool divide = false;
  const ir::Value* mask = nullptr;
  const ir::Value* v = nullptr;
};

bool is_f32_rank(const ir::Value* v, size_t rank) {
  return v && v->type().dtype == DType::f32 && v->type().sizes.size() == rank;
}

// The other operand of a binary node n reading `v`, when it is a 0-d f32 value.
const ir::Value* scalar_operand(const ir::Node* n, const ir::Value* v, bool first_only) {
  if (n->inputs().size() != 2) return nullptr;
  const ir::Value* other = nullptr;
  if (n->inputs()[0] == v)
    other = n->inputs()[1];
  else if (!first_only && n->inputs()[1] == v)
    other = n->inputs()[0];
  return other != v && is_f32_rank(other, 0) ? other : nullptr;
}

Chain match_chain(const ir::Node* mm, const ChainLimits& limits) {
  Chain c;
  const ir::Value* q = mm->inputs()[0];
  const ir::Value* kt = mm->inputs()[1];
  if (!is_f32_rank(q, 4) || !is_f32_rank(kt, 4) || !is_f32_rank(mm->output(), 4)) return c;
  std::vector<const ir::Node*> nodes{mm};
  const ir::Value* x = mm->output();
  const ir::Node* next = sole_user(x, limits);
  if (is_op(next, cpu_ops().mul) && !next->attrs().has("alpha")) {
    if ((c.scale = scalar_operand(next, x, false))) {
      nodes.push_back(next);
      x = next->output();
      next = sole_user(x, limits);
    }
  } else if (is_op(next, cpu_ops().div)) {
    if ((c.scale = scalar_operand(next, x, true))) {
      c.divide = true;
      nodes.push_back(next);
      x = next->output();
      next = sole_user(x, limits);
    }
  }
  if (is_op(next, cpu_ops().add) && next->inputs().size() == 2 &&
      (!next->attrs().has("alpha") || next->attrs().get_double("alpha") == 1.0)) {
    const ir::Value* m = next->inputs()[0] == x ? next->inputs()[1] : next->inputs()[0];
    if (m != x && m->type().dtype == DType::f32 && m->type().sizes.size() <= 4 &&
        same_sizes(next->output()->type().sizes, x->type().sizes)) {
      c.mask = m;
      nodes.push_back(next);
      x = next->output();
      next = sole_user(x, limits);
    }
  }
  if (!is_op(next, cpu_ops().softmax)) return c;
  const int64_t dim = next->attrs().get_int("dim");
  if (dim != -1 && dim != 3) return c;
  nodes.push_back(next);
  x = next->output();
  next = sole_user(x, limits);
  if (!is_op(next, cpu_ops().matmul) || next->inputs()[0] != x || next->inputs()[1] == x) return c;
  const ir::Value* v = next->inputs()[1];
  if (!is_f32_rank(v, 4) || !is_f32_rank(next->output(), 4)) return c;
  nodes.push_back(next);
  c.v = v;
  c.nodes = std::move(nodes);
  return c;
}

// The permute(0, 2, 1, 3) that is the only reader of the attention's result (heads back next to
// the embedding: bert and vit then reshape to [B, L, H * E]), when the result is no graph output.
const ir::Node* head_transpose(const ir::Graph& g, const ir::Value* y) {
  if (y->users().size() != 1) return nullptr;
  for (const ir::Value* o : g.outputs())
    if (o == y) return nullptr;
  const ir::Node* p = y->users()[0];
  if (!is_op(p, cpu_ops().permute) || p->attrs().get_ints("dims") != std::vector<int64_t>{0, 2, 1, 3})
    return nullptr;
  return p;
}

}  // namespace

std::unique_ptr<ir::Graph> fuse_attention(const ir::Graph& g, FuseAttentionStats* stats) {
  const OpDef& fused_op = *cpu_ops().sdpa_fused;
  std::unordered_set<const ir::Node*> absorbed;
  auto by_last = collect_chains<Chain>(g, cpu_ops().matmul, match_chain, absorbed);

  FuseAttentionStats s;
  std::unordered_set<const ir::Node*> transposes;  // permutes the fused node absorbs
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    if (transposes.count(&n)) return true;  // its output is mapped to the fused node's
    auto it = by_last.find(&n);
    if (it == by_last.end()) return absorbed.count(&n) != 0;  // inside a chain: dropped
    const Chain& c = it->second;
    const ir::Node* mm = c.nodes.front();
    std::vector<ir::Value*> inputs{copy[mm->inputs()[0]], copy[mm->inputs()[1]], copy[c.v],
                                   c.scale ? copy[c.scale] : nullptr,
                                   c.mask ? copy[c.mask] : nullptr};
    Attrs attrs{{"scale", 1.0}, {"divide", c.divide}};
    // Writing [B, L, H, E] directly makes the permute a plain value and the reshape after it a
    // view instead of a copy.
    const ir::Node* p = head_transpose(g, n.output());
    ir::ValueType type = n.output()->type();
    if (p) {
      attrs.set("transpose_out", true);
      type = p->output()->type();
      type.strides = contiguous_strides(type.sizes);
    }
    ir::Node* f = copy.graph->add_node(fused_op, std::move(inputs), std::move(attrs), {type});
    copy.map[p ? p->output() : n.output()] = f->output();
    if (p) {
      transposes.insert(p);
      ++s.transposed;
    }
    ++s.fused;
    s.masked += c.mask != nullptr;
    return true;
  });
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
