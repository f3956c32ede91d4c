#include "lathe/backend/cpu/merge_linear.h"

#include <map>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

struct Group {
  std::vector<const ir::Node*> members;  // in graph order
  std::string act;
};

// The activation of a mergeable linear node ("none" for linear), or "" when it cannot merge.
std::string mergeable_act(const ir::Node* n) {
  if (is_op(n, cpu_ops().linear)) return "none";
  if (is_op(n, cpu_ops().linear_fused) && n->inputs().size() == 4 && n->inputs()[3] == nullptr)
    return n->attrs().get_string("act");
  return "";
}

}  // namespace

std::unique_ptr<ir::Graph> merge_linear(const ir::Graph& g, GraphConstants& constants,
                                        MergeLinearStats* stats) {
  const std::unordered_map<const ir::Value*, Tensor> value = constant_values(g, constants);
  const std::unordered_set<const ir::Value*> outs(g.outputs().begin(), g.outputs().end());
  // Candidates keyed by (input, activation, weight dtype, in_features); each group is emitted
  // at its first member's place, so the key order does not affect the result.
  std::map<std::tuple<const ir::Value*, std::string, int, int64_t>, Group> by_key;
  for (const ir::Node* n : g.nodes()) {
    const std::string act = mergeable_act(n);
    if (act.empty() || outs.count(n->output())) continue;
    const ir::Value *x = n->inputs()[0], *w = n->inputs()[1], *b = n->inputs()[2];
    if (!x || !w || !value.count(w) || (b && !value.count(b))) continue;
    const Tensor& wt = value.at(w);
    if (wt.dim() != 2 || !wt.sizes()[1].maybe_int()) continue;
    if (b && value.at(b).dtype() != wt.dtype()) continue;
    const auto key =
        std::make_tuple(x, act, static_cast<int>(wt.dtype()), *wt.sizes()[1].maybe_int());
    Group& grp = by_key[key];
    grp.act = act;
    grp.members.push_back(n);
  }
  // Groups by their first member; the other members are dropped (their outputs map to slices).
  std::unordered_map<const ir::Node*, const Group*> by_first;
  std::unordered_set<const ir::Node*> absorbed;
  for (const auto& [key, grp] : by_key) {
    if (grp.members.size() < 2) continue;
    by_first[grp.members.front()] = &grp;
    for (const ir::Node* m : grp.members) absorbed.insert(m);
  }

  MergeLinearStats s;
  GraphConstants out_constants = constants;
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    auto it = by_first.find(&n);
    if (it == by_first.end()) return absorbed.count(&n) != 0;
    const Group& grp = *it->second;
    bool any_bias = false;
    for (const ir::Node* m : grp.members) any_bias |= m->inputs()[2] != nullptr;
    std::vector<Tensor> ws, bs;
    std::vector<int64_t> widths;
    for (const ir::Node* m : grp.members) {
      const Tensor& w = value.at(m->inputs()[1]);
      ws.push_back(w);
      widths.push_back(w.size(0).expect_int());
      if (any_bias)
        bs.push_back(m->inputs()[2] ? value.at(m->inputs()[2]) : zeros({w.size(0)}, w.dtype()));
    }
    const Tensor w = cat(ws, 0).contiguous();
    ir::Value* wv = add_constant(copy, out_constants, w, ir::ValueType::of(w),
                                 lathe::detail::str("merged_weight(%", n.output()->id(), ")"));
    ir::Value* bv = nullptr;
    if (any_bias) {
      const Tensor b = cat(bs, 0).contiguous();
      bv = add_constant(copy, out_constants, b, ir::ValueType::of(b),
                        lathe::detail::str("merged_bias(%", n.output()->id(), ")"));
    }
    // The merged output: the first member's type with the widths summed, layout left open.
    ir::ValueType t = n.output()->type();
    const int64_t rank = static_cast<int64_t>(t.sizes.size());
    int64_t total = 0;
    for (int64_t wd : widths) total += wd;
    t.sizes.back() = total;
    t.strides = {};
    ir::Value* x = copy[n.inputs()[0]];
    ir::Node* merged = grp.act == "none"
                           ? copy.graph->add_node(*cpu_ops().linear, {x, wv, bv}, Attrs{}, {t})
                           : copy.graph->add_node(*cpu_ops().linear_fused, {x, wv, bv, nullptr},
                                                  Attrs{{"act", grp.act}}, {t});
    int64_t start = 0;
    for (size_t i = 0; i < grp.members.size(); ++i) {
      const ir::Value* old = grp.members[i]->output();
      ir::ValueType st = old->type();
      st.strides = {};
      Attrs a{
          {"dim", rank - 1}, {"start", start}, {"end", start + widths[i]}, {"step", int64_t{1}}};
      ir::Node* slice =
          copy.graph->add_node(*cpu_ops().slice, {merged->output()}, std::move(a), {st});
      copy.map[old] = slice->output();
      start += widths[i];
    }
    ++s.groups;
    s.merged += static_cast<int>(grp.members.size());
    return true;
  });
  out_constants.resize(out->inputs().size());
  constants = std::move(out_constants);
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
