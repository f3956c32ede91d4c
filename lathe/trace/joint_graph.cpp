#include "lathe/trace/joint_graph.h"

#include <algorithm>

#include "lathe/ir/functionalize.h"
#include "lathe/ir/passes.h"
#include "lathe/ops/ops.h"

namespace lathe::detail {
namespace {

using BackwardInput = AotPlan::BackwardInput;

ir::ValueType contiguous_type(const ir::ValueType& t) {
  ir::ValueType c = t;
  c.strides = contiguous_strides(t.sizes);
  c.requires_grad = false;
  return c;
}

// Backward inputs print by name (their kind and index are not read: `sources` says where each
// comes from).
ir::InputSource source_named(int index, std::string name) {
  ir::InputSource s;
  s.kind = ir::InputSource::Kind::captured;
  s.index = index;
  s.name = std::move(name);
  return s;
}

// The gradient of node n's inputs from `grads` of its outputs (the vjp traced under the
// current mode), accumulated into `accumulate`.
void run_node_vjp(JointGraph& jg, const ir::Node* n,
                  std::unordered_map<const ir::Value*, Tensor>& grads,
                  const std::function<void(const ir::Value*, const Tensor&)>& accumulate) {
  std::vector<Tensor> ins, outs_f, gouts;
  std::vector<bool> needs;
  for (const ir::Value* v : n->inputs()) {
    ins.push_back(v ? jg.fakes.of(v) : Tensor());
    needs.push_back(v && jg.requires_grad.count(v));
  }
  for (const ir::Value* o : n->outputs()) {
    outs_f.push_back(jg.fakes.of(o));
    auto g = grads.find(o);
    // An output no gradient reaches gets zeros (a broadcast scalar: no size to allocate).
    gouts.push_back(g != grads.end() ? g->second
                                     : zeros({}, o->type().dtype).expand(o->type().sizes));
  }
  std::vector<Tensor> in_grads;
  try {
    in_grads = n->op().vjp(ins, outs_f, gouts, n->attrs(), needs);
  } catch (const Error& e) {
    jg.fail(
        str("the vjp of '", n->op().name, "' (node ", n->name(), ") cannot be traced: ", e.what()));
  }
  for (size_t i = 0; i < in_grads.size() && i < needs.size(); ++i) {
    if (!needs[i] || !in_grads[i].defined()) continue;
    Tensor g = in_grads[i];
    const ir::Value* v = n->inputs()[i];
    if (g.dtype() != v->type().dtype) g = g.to(v->type().dtype);
    accumulate(v, g);
  }
}

}  // namespace

const Tensor& ForwardFakes::of(const ir::Value* v) {
  auto it = fake_.find(v);
  if (it != fake_.end()) return it->second;
  Tensor t = ir::fake_tensor(v->type());
  value_.emplace(t.impl_ptr().get(), v);
  return fake_.emplace(v, std::move(t)).first->second;
}

std::string value_label(const ir::Value* v) {
  if (v->is_input()) return str("graph input %", v->id());
  return str("%", v->id(), " (the result of ", v->producer()->op().name, ")");
}

void JointGraph::fail(const std::string& what) const {
  throw Error(
      str("[compile] '", plan.name, "' cannot be compiled for training (AOT autograd): ", what));
}

void JointGraph::mark_requires_grad() {
  const std::vector<ir::Value*>& inputs = forward.inputs();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (plan.input_requires_grad[i]) requires_grad.insert(inputs[i]);
  for (ir::Node* n : forward.nodes()) {
    bool any = false;
    if (!tracer.recorded_without_grad(n))
      for (const ir::Value* v : n->inputs()) any = any || (v && requires_grad.count(v));
    if (!any) continue;
    const OpDef& op = n->op();
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const ir::Value* v = n->inputs()[i];
      if (!v || !n->mutates_input(static_cast<int>(i))) continue;
      const bool aliases = std::find(op.output_aliases.begin(), op.output_aliases.end(),
                                     static_cast<int>(i)) != op.output_aliases.end();
      if (requires_grad.count(v) || aliases)
        fail(str("the in-place op '", op.name, "' (node ", n->name(), ") writes ", value_label(v),
                 " on the gradient path; use the out-of-place op (eager autograd refuses it too)"));
    }
    if (ir::is_random_op(op))
      fail(str("the random op '", op.name, "' (node ", n->name(),
               ") is on the gradient path; compiled training does not replay its random draws "
               "yet: run the module in eval mode (no dropout), or train it eagerly"));
    if (!op.vjp) fail(str("op '", op.name, "' (node ", n->name(), ") has no vjp"));
    grad_nodes.push_back(n);
    for (ir::Value* o : n->outputs())
      if (is_floating(o->type().dtype)) requires_grad.insert(o);
  }
}

void JointGraph::find_reaching_outputs() {
  const std::vector<ir::Value*>& inputs = forward.inputs();
  plan.grad_outputs_reaching.assign(inputs.size(), {});
  int slot = 0;
  for (size_t j = 0; j < user_outputs.size(); ++j) {
    if (!plan.output_requires_grad[j]) continue;
    // Eager runs a node's vjp when a gradient reaches any of its outputs, and it then gives
    // every input that requires grad one (zeros for the outputs no gradient reached).
    std::unordered_set<const ir::Value*> reached{user_outputs[j]};
    for (auto it = grad_nodes.rbegin(); it != grad_nodes.rend(); ++it) {
      const ir::Node* n = *it;
      bool any = false;
      for (const ir::Value* o : n->outputs()) any = any || reached.count(o);
      if (!any) continue;
      for (const ir::Value* v : n->inputs())
        if (v && requires_grad.count(v)) reached.insert(v);
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      if (reached.count(inputs[i])) plan.grad_outputs_reaching[i].push_back(slot);
    ++slot;
  }
}

std::vector<Tensor> JointGraph::run_vjps(BackwardTracer& bt, ir::Graph& bg,
                                         BackwardSources& sources) {
  std::unordered_map<const ir::Value*, Tensor> grads;
  std::vector<Tensor> keep;
  auto accumulate = [&](const ir::Value* v, const Tensor& g) {
    auto it = grads.find(v);
    if (it == grads.end())
      grads.emplace(v, g);
    else
      it->second = add(it->second, g);
  };
  const std::vector<ir::Value*>& outs = forward.outputs();
  int slot = 0;
  for (size_t j = 0; j < outs.size(); ++j) {
    if (!plan.output_requires_grad[j]) continue;
    ir::Value* gv = bg.add_input(contiguous_type(outs[j]->type()),
                                 source_named(slot, str("grad_output", slot)));
    sources[gv] = {BackwardInput::Kind::kGradOutput, slot};
    Tensor g = ir::fake_tensor(gv->type());
    bt.bind_to(g, gv);
    keep.push_back(g);
    accumulate(outs[j], g);
    ++slot;
  }
  for (auto it = grad_nodes.rbegin(); it != grad_nodes.rend(); ++it) {
    const ir::Node* n = *it;
    bool any = false;
    for (const ir::Value* o : n->outputs()) any = any || grads.count(o);
    if (any) run_node_vjp(*this, n, grads, accumulate);
  }
  std::vector<Tensor> result(forward.inputs().size());
  for (size_t i = 0; i < result.size(); ++i) {
    if (!plan.input_requires_grad[i]) continue;
    auto g = grads.find(forward.inputs()[i]);
    if (g != grads.end()) result[i] = g->second;
  }
  return result;
}

std::unique_ptr<JointGraph> build_joint_graph(ir::Graph& forward, sym::ShapeEnv& env,
                                              const Tracer& tracer, AotPlan& plan) {
  auto jg = std::unique_ptr<JointGraph>(
      new JointGraph{forward, tracer, env, plan, {}, {}, {}, {}, {}, nullptr, {}});
  jg->mark_requires_grad();
  jg->user_outputs = forward.outputs();
  plan.num_user_outputs = jg->user_outputs.size();
  bool any_output = false;
  for (const ir::Value* v : jg->user_outputs) {
    plan.output_requires_grad.push_back(jg->requires_grad.count(v) ? 1 : 0);
    any_output = any_output || jg->requires_grad.count(v);
  }
  if (!any_output) return nullptr;  // nothing to differentiate: an inference entry
  jg->find_reaching_outputs();

  // The probe: the backward recorded once, to learn which forward values the vjps read (each
  // becomes a backward input on first use).
  jg->backward = std::make_unique<ir::Graph>();
  ir::Graph& probe = *jg->backward;
  BackwardSources sources;
  BackwardTracer bt(env, probe, [&](const Tensor& t) -> ir::Value* {
    const ir::Value* f = jg->fakes.value(t);
    if (!f) return nullptr;
    jg->needed.push_back(f);
    ir::Value* in = probe.add_input(f->type(), source_named(0, "probe"));
    jg->forward_value_of.emplace(in, f);
    return in;
  });
  {
    Tracer::Scope scope(bt);
    jg->run_vjps(bt, probe, sources);
  }
  std::sort(jg->needed.begin(), jg->needed.end(),
            [](const ir::Value* a, const ir::Value* b) { return a->id() < b->id(); });
  return jg;
}

namespace {

// A value the backward reads must still hold what the vjp saw: refuse in-place writes to it
// after it was made. (A write that makes it, as `x.mul_(2)` makes the x a later op reads, is
// fine: the backward reads the storage after the forward, which holds that value.)
void check_not_overwritten(const JointGraph& jg, const std::vector<const ir::Value*>& reads) {
  ir::AliasAnalysis aliases(jg.forward);
  std::unordered_map<const ir::Node*, int> position;
  std::unordered_map<const ir::Value*, int> last_write;  // per base: the last node writing it
  int pos = 0;
  for (const ir::Node* n : jg.forward.nodes()) {
    position[n] = pos;
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (n->inputs()[i] && n->mutates_input(static_cast<int>(i)))
        last_write[aliases.base_of(n->inputs()[i])] = pos;
    ++pos;
  }
  for (const ir::Value* v : reads) {
    auto w = last_write.find(aliases.base_of(v));
    const int made = v->is_input() ? -1 : position.at(v->producer());
    if (w != last_write.end() && w->second > made)
      jg.fail(str("the backward reads ", value_label(v),
                  ", which an in-place op of the function overwrites; use the out-of-place op"));
  }
}

// Its inputs are saved values, parameters and shared constants: the backward must not write
// them (the vjp rules are functional; a write would change what the next call reads).
void check_functional(const JointGraph& jg, const ir::Graph& bg) {
  for (const ir::Node* n : bg.nodes())
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (n->inputs()[i] && n->mutates_input(static_cast<int>(i)))
        jg.fail(str("the backward's '", n->op().name, "' (node ", n->name(),
                    ") writes in place; the vjp rules must be functional"));
}

}  // namespace

std::unique_ptr<ir::Graph> JointGraph::record_backward(
    const std::vector<const ir::Value*>& reads, const std::vector<ir::Value*>& saved,
    const std::unordered_set<const ir::Value*>& recomputed, BackwardSources& sources,
    std::vector<Tensor>& constants) {
  std::unordered_map<const ir::Value*, int> input_pos;
  for (size_t i = 0; i < forward.inputs().size(); ++i) input_pos[forward.inputs()[i]] = i;
  auto bg = std::make_unique<ir::Graph>();
  BackwardTracer bt(env, *bg, [&](const Tensor& t) -> ir::Value* {
    if (const ir::Value* f = fakes.value(t))
      fail(str("internal error: the backward read ", value_label(f),
               " only in its second recording"));
    return nullptr;
  });
  for (const ir::Value* v : reads) {
    if (!v->is_input()) continue;
    const int pos = input_pos.at(v);
    plan.input_read[pos] = 1;
    ir::Value* in = bg->add_input(v->type(), source_named(pos, "forward." + plan.input_names[pos]));
    sources[in] = {BackwardInput::Kind::kForwardInput, pos};
    bt.bind_to(fakes.of(v), in);
  }
  for (size_t j = 0; j < saved.size(); ++j) {
    ir::Value* in =
        bg->add_input(saved[j]->type(), source_named(static_cast<int>(j), str("saved", j)));
    sources[in] = {BackwardInput::Kind::kSaved, static_cast<int>(j)};
    bt.bind_to(fakes.of(saved[j]), in);
  }
  std::vector<Tensor> grads;
  {
    Tracer::Scope scope(bt);
    for (const ir::Node* n : forward.nodes()) {
      bool any = false;
      for (const ir::Value* o : n->outputs()) any = any || recomputed.count(o);
      if (!any) continue;
      std::vector<Tensor> ins;
      for (const ir::Value* v : n->inputs()) ins.push_back(v ? fakes.of(v) : Tensor());
      std::vector<Tensor> outs = dispatch(n->op(), ins, n->attrs());
      for (size_t k = 0; k < outs.size() && k < n->outputs().size(); ++k)
        bt.bind_to(fakes.of(n->output(k)), bt.value_of(outs[k]));
    }
    grads = run_vjps(bt, *bg, sources);
  }
  std::vector<ir::Value*> outputs;
  {
    Tracer::Scope scope(bt);  // value_of may lift a constant gradient
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      outputs.push_back(bt.value_of(grads[i]));
      plan.gradient_of_input.push_back(static_cast<int>(i));
    }
  }
  bg->set_outputs(outputs);
  ir::dead_code_elimination(*bg);
  constants = bt.captured();
  return bg;
}

Partition JointGraph::split(std::vector<ir::Value*> saved,
                            const std::unordered_set<const ir::Value*>& recomputed) {
  // Forward inputs a recomputation reads are backward inputs too.
  const std::unordered_set<const ir::Value*> needed_set(needed.begin(), needed.end());
  std::vector<const ir::Value*> reads = needed;
  for (const ir::Value* v : needed)
    if (recomputed.count(v))
      for (const ir::Value* in : v->producer()->inputs())
        if (in && in->is_input() && !needed_set.count(in) &&
            std::find(reads.begin(), reads.end(), in) == reads.end())
          reads.push_back(in);
  check_not_overwritten(*this, reads);
  plan.num_saved = saved.size();
  plan.num_recomputed = recomputed.size();
  plan.input_read.assign(plan.num_forward_inputs, 0);

  BackwardSources sources;
  std::vector<Tensor> constants;
  std::unique_ptr<ir::Graph> bg = record_backward(reads, saved, recomputed, sources, constants);
  check_functional(*this, *bg);
  for (size_t i = 0; i < bg->inputs().size(); ++i) {
    auto it = sources.find(bg->inputs()[i]);
    if (it != sources.end()) {
      plan.backward_inputs.push_back(it->second);
      continue;
    }
    // Not one of ours: a constant the tracer lifted (its capture slot).
    plan.backward_inputs.push_back({BackwardInput::Kind::kConstant, bg->input_sources()[i].index});
  }
  plan.constants = std::move(constants);
  for (size_t j = 0; j < user_outputs.size(); ++j)
    if (plan.output_requires_grad[j]) plan.grad_output_of.push_back(static_cast<int>(j));

  std::vector<ir::Value*> forward_outputs = user_outputs;
  forward_outputs.insert(forward_outputs.end(), saved.begin(), saved.end());
  forward.set_outputs(std::move(forward_outputs));
  Partition p;
  p.forward = &forward;
  p.backward = std::move(bg);
  p.saved = std::move(saved);
  p.num_recomputed = recomputed.size();
  return p;
}

}  // namespace lathe::detail
