#include "lathe/backend/cpu/concat_blocked.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

// The output type `op`'s shape rule gives for `in` (metadata only).
ir::ValueType rule_type(const OpDef& op, const std::vector<ir::Value*>& in, const Attrs& a) {
  std::vector<Tensor> fakes;
  for (const ir::Value* v : in) fakes.push_back(ir::fake_tensor(v->type()));
  std::vector<TensorMeta> m = op.shape(fakes, a);
  ir::ValueType t;
  t.dtype = m[0].dtype;
  t.device = m[0].device;
  t.sizes = m[0].sizes;
  t.strides = m[0].strides;
  return t;
}

bool matches(const ir::Node* cat) {
  if (!is_op(cat, cpu_ops().cat) || cat->inputs().size() < 2) return false;
  const ir::ValueType& t = cat->output()->type();
  if (t.sizes.size() != 4 || t.dtype != DType::f32) return false;
  const int64_t d = cat->attrs().get_int("dim");
  if (d != 1 && d != -3) return false;
  std::optional<int64_t> block;
  for (const ir::Value* v : cat->inputs()) {
    if (!v || !v->producer() || !is_op(v->producer(), cpu_ops().from_blocked)) return false;
    const auto b = v->producer()->inputs()[0]->type().sizes[4].maybe_int();
    if (!b || (block && *b != *block)) return false;  // one block for every input
    block = b;
  }
  // A user reading the concat channels-last gets from_blocked's layout: it must be the same.
  if (!t.strides.empty() && !same_sizes(t.strides, channels_last_strides(t.sizes))) return false;
  return true;
}

}  // namespace

std::unique_ptr<ir::Graph> concat_blocked(const ir::Graph& g, ConcatBlockedStats* stats) {
  const std::unordered_set<const ir::Value*> outs(g.outputs().begin(), g.outputs().end());
  std::unordered_set<const ir::Node*> cats;
  for (const ir::Node* n : g.nodes())
    if (matches(n)) cats.insert(n);
  const OpDef& cat_op = *cpu_ops().cat;
  const OpDef& from_op = *cpu_ops().from_blocked;
  const OpDef& pool_op = *cpu_ops().max_pool2d_blocked;
  ConcatBlockedStats s;
  // old channels-last value (a concat, a pooling of one) -> its blocked replacement
  std::unordered_map<const ir::Value*, ir::Value*> blocked_of;
  // Users of n's value other than a to_blocked (a pooling left channels-last, a graph output)
  // read one from_blocked of its blocked replacement (dead, and removed by dce, when none does).
  auto add_channels_last_view = [&](const ir::Node& n, ir::Value* blocked, GraphCopy& copy) {
    bool channels_last_user = outs.count(n.output()) != 0;
    for (const ir::Node* u : n.output()->users()) channels_last_user |= !is_op(u, cpu_ops().to_blocked);
    if (!channels_last_user) return;
    ir::ValueType t = rule_type(from_op, {blocked}, Attrs{});
    if (n.output()->type().strides.empty()) t.strides = {};
    copy.map[n.output()] = copy.graph->add_node(from_op, {blocked}, Attrs{}, {t})->output();
  };
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    if (is_op(&n, cpu_ops().to_blocked)) {
      auto it = blocked_of.find(n.inputs()[0]);
      if (it == blocked_of.end() ||
          it->second->type().sizes[4].maybe_int() != n.attrs().get_int("block"))
        return false;
      copy.map[n.output()] = it->second;  // already blocked: the reorder goes
      ++s.reorders_removed;
      return true;
    }
    if (is_op(&n, cpu_ops().max_pool2d)) {
      // Pooling a blocked concat (squeezenet's Fire outputs): pool the blocked value itself.
      auto it = blocked_of.find(n.inputs()[0]);
      const ir::ValueType& t = n.output()->type();
      if (it == blocked_of.end() ||
          (!t.strides.empty() && !same_sizes(t.strides, channels_last_strides(t.sizes))))
        return false;
      ir::Value* b = it->second;
      ir::Node* bp =
          copy.graph->add_node(pool_op, {b}, n.attrs(), {rule_type(pool_op, {b}, n.attrs())});
      blocked_of[n.output()] = bp->output();
      add_channels_last_view(n, bp->output(), copy);
      ++s.pools;
      return true;
    }
    if (!cats.count(&n)) return false;
    std::vector<ir::Value*> in;
    for (const ir::Value* v : n.inputs()) in.push_back(copy[v->producer()->inputs()[0]]);
    const Attrs attrs{{"dim", int64_t{1}}};
    ir::Node* bc = copy.graph->add_node(cat_op, in, attrs, {rule_type(cat_op, in, attrs)});
    blocked_of[n.output()] = bc->output();
    add_channels_last_view(n, bc->output(), copy);
    for (const ir::Value* v : n.inputs())
      if (v->users().size() == 1 && !outs.count(v)) ++s.reorders_removed;
    ++s.concats;
    return true;
  });
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
