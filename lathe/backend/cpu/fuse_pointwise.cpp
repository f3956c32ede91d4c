#include "lathe/backend/cpu/fuse_pointwise.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "lathe/backend/cpu/match.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ops/register.h"

namespace lathe::backend::cpu {
namespace {

// The instruction of n, when n can be part of a fused program.
std::optional<kernels::PwInstr> instr_of(const ir::Node* n) {
  const CpuKernelInfo* k = cpu_kernel(&n->op());
  if (!k || !k->pointwise_instr || n->outputs().size() != 1 || n->has_side_effects())
    return std::nullopt;
  if (n->output()->type().dtype != DType::f32) return std::nullopt;
  std::optional<kernels::PwInstr> in = k->pointwise_instr(n->attrs());
  if (!in || static_cast<int>(n->inputs().size()) != kernels::pw_arity(in->op)) return std::nullopt;
  for (const ir::Value* v : n->inputs())
    if (!v || v->type().dtype != DType::f32) return std::nullopt;
  return in;
}

const ir::Node* root_of(std::unordered_map<const ir::Node*, const ir::Node*>& parent,
                        const ir::Node* n) {
  while (parent[n] != n) n = parent[n] = parent[parent[n]];
  return n;
}

// Static sizes and strides, non-overlapping and dense (what the fused kernel can write).
bool dense_static(const ir::ValueType& t) {
  if (t.strides.empty() || t.strides.size() != t.sizes.size()) return false;
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (!t.sizes[d].maybe_int() || !t.strides[d].maybe_int()) return false;
  return ir::fake_tensor(t).is_non_overlapping_and_dense();
}

}  // namespace

std::unique_ptr<ir::Graph> fuse_pointwise(const ir::Graph& g, FusePointwiseStats* stats) {
  const std::unordered_set<const ir::Value*> outs(g.outputs().begin(), g.outputs().end());
  std::unordered_map<const ir::Node*, kernels::PwInstr> instr;
  for (const ir::Node* n : g.nodes())
    if (auto in = instr_of(n)) instr.emplace(n, *in);
  // Union-find: a producer joins its only user's group.
  std::unordered_map<const ir::Node*, const ir::Node*> parent;
  for (const auto& [n, in] : instr) parent[n] = n;
  for (const ir::Node* n : g.nodes()) {
    if (!instr.count(n)) continue;
    for (const ir::Value* v : n->inputs()) {
      const ir::Node* p = v->producer();
      if (!p || !instr.count(p) || outs.count(v) || v->users().empty()) continue;
      bool only_n = true;
      for (const ir::Node* u : v->users()) only_n &= u == n;
      if (!only_n || !same_sizes(v->type().sizes, n->output()->type().sizes)) continue;
      parent[root_of(parent, p)] = root_of(parent, n);
    }
  }
  // Groups of two or more, keyed by their root (the node whose result leaves the group).
  std::unordered_map<const ir::Node*, std::vector<const ir::Node*>> groups;
  for (const ir::Node* n : g.nodes())
    if (instr.count(n)) groups[root_of(parent, n)].push_back(n);  // graph (topological) order
  // The fused node runs where the group's root was, so every member moves down to it: a group
  // whose span holds a node that writes (a graph functionalize left with writes, such as one
  // writing through a view with symbolic sizes) could read a value after its update, and is
  // left alone. So is a group whose result has no static dense layout on record (symbolic
  // sizes): the layout eager gives it follows the root's own inputs, which the fused node no
  // longer has.
  std::unordered_map<const ir::Node*, size_t> position;
  for (size_t i = 0; i < g.nodes().size(); ++i) position[g.nodes()[i]] = i;
  for (auto it = groups.begin(); it != groups.end();) {
    const std::vector<const ir::Node*>& members = it->second;
    bool ok = members.size() >= 2 && dense_static(it->first->output()->type());
    for (size_t i = position.at(members.front()); ok && i < position.at(it->first); ++i)
      ok = !g.nodes()[i]->has_side_effects();
    it = ok ? std::next(it) : groups.erase(it);
  }
  std::unordered_set<const ir::Node*> absorbed;
  for (const auto& [root, members] : groups)
    for (const ir::Node* m : members)
      if (m != root) absorbed.insert(m);

  FusePointwiseStats s;
  const OpDef& fused_op = *cpu_ops().pointwise_fused;
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    if (absorbed.count(&n)) return true;  // computed inside its group's program
    auto it = groups.find(&n);
    if (it == groups.end()) return false;
    const std::vector<const ir::Node*>& members = it->second;
    kernels::PointwiseProgram program;
    std::vector<ir::Value*> inputs;
    std::unordered_map<const ir::Value*, int> reg;  // value -> register
    auto operand = [&](const ir::Value* v) {
      auto r = reg.find(v);
      if (r != reg.end()) return r->second;
      kernels::PwInstr load{kernels::PwOp::input};
      load.input = static_cast<int32_t>(inputs.size());
      inputs.push_back(copy[v]);
      program.code.push_back(load);
      const int k = static_cast<int>(program.code.size()) - 1;
      reg.emplace(v, k);
      return k;
    };
    for (const ir::Node* m : members) {
      kernels::PwInstr in = instr.at(m);
      if (!m->inputs().empty()) in.a = operand(m->inputs()[0]);
      if (m->inputs().size() > 1) in.b = operand(m->inputs()[1]);
      program.code.push_back(in);
      reg[m->output()] = static_cast<int>(program.code.size()) - 1;
    }
    program.num_inputs = static_cast<int>(inputs.size());
    const ir::ValueType& type = n.output()->type();
    Attrs attrs{{"program", program.to_string()}, {"strides", type.strides}};
    ir::Node* f = copy.graph->add_node(fused_op, std::move(inputs), std::move(attrs), {type});
    copy.map[n.output()] = f->output();
    ++s.groups;
    s.nodes += static_cast<int>(members.size());
    return true;
  });
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
