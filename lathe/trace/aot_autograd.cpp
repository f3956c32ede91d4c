#include "lathe/trace/aot_autograd.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "lathe/core/grad_mode.h"
#include "lathe/ir/functionalize.h"
#include "lathe/ir/passes.h"
#include "lathe/ops/autograd.h"
#include "lathe/ops/ops.h"

namespace lathe::detail {
namespace {

using BackwardInput = AotPlan::BackwardInput;

// The per-call part of a compiled backward, carried in the autograd node's attributes: the plan
// (which owns the node's OpDef, so the node keeps it alive) and the call's symbol values.
struct CompiledBackwardCall : ParsedAttrs {
  std::shared_ptr<const AotPlan> plan;
  std::vector<int64_t> symbols;
};

// Records the backward graph. Fakes standing for forward values are resolved by `resolve_`
// (a new graph input, or a value prepared before the vjps run); other concrete tensors (a
// vjp's zeros or scalar constants) are lifted as the tracer lifts captures.
class BackwardTracer : public Tracer {
 public:
  using Resolve = std::function<ir::Value*(const Tensor&)>;
  BackwardTracer(sym::ShapeEnv& env, ir::Graph& graph, Resolve resolve)
      : Tracer(env, graph, nullptr), resolve_(std::move(resolve)) {}
  void bind_to(const Tensor& t, ir::Value* v) { bind(t, v); }

 protected:
  ir::Value* lift(const Tensor& t) override {
    if (ir::Value* v = resolve_(t)) {
      bind(t, v);
      return v;
    }
    return Tracer::lift(t);
  }

 private:
  Resolve resolve_;
};

// One fake tensor per forward value, shared by both recording passes (kept alive: the tracers
// map tensors by their TensorImpl address).
class ForwardFakes {
 public:
  const Tensor& of(const ir::Value* v) {
    auto it = fake_.find(v);
    if (it != fake_.end()) return it->second;
    Tensor t = ir::fake_tensor(v->type());
    value_.emplace(t.impl_ptr().get(), v);
    return fake_.emplace(v, std::move(t)).first->second;
  }
  // The forward value a fake stands for, or null.
  const ir::Value* value(const Tensor& t) const {
    auto it = value_.find(t.impl_ptr().get());
    return it == value_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<const ir::Value*, Tensor> fake_;
  std::unordered_map<const TensorImpl*, const ir::Value*> value_;
};

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

std::string value_label(const ir::Value* v) {
  if (v->is_input()) return str("graph input %", v->id());
  return str("%", v->id(), " (the result of ", v->producer()->op().name, ")");
}

// The recompute rule (a simple form of AOTAutograd's min-cut partition): a value the backward
// needs is recomputed there, not saved, when a pointwise or view op (no writes, not random)
// makes it from values the backward has anyway (forward inputs or other needed values). Saving
// its inputs instead costs nothing more, and the recomputation is one cheap pass.
bool recomputable(const ir::Value* v, const std::unordered_set<const ir::Value*>& needed) {
  const ir::Node* p = v->producer();
  if (!p) return false;
  const OpCategory c = p->op().category;
  if ((c != OpCategory::pointwise && c != OpCategory::view) || p->has_side_effects() ||
      ir::is_random_op(p->op()))
    return false;
  for (const ir::Value* in : p->inputs())
    if (in && !in->is_input() && !needed.count(in)) return false;
  return true;
}

struct JointBuilder {
  ir::Graph& forward;
  const Tracer& tracer;
  AotPlan& plan;
  std::vector<ir::Node*> grad_nodes;  // nodes that record a gradient, in forward order
  std::unordered_set<const ir::Value*> requires_grad;
  ForwardFakes fakes;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(
        str("[compile] '", plan.name, "' cannot be compiled for training (AOT autograd): ", what));
  }

  // Which values require grad, as eager's recording would decide, and what cannot be compiled.
  void mark_requires_grad() {
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
          fail(str(
              "the in-place op '", op.name, "' (node ", n->name(), ") writes ", value_label(v),
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

  // Runs the vjps of grad_nodes in reverse under `bt` (already the current dispatch mode),
  // seeding each user output that requires grad with a new graph input. Returns the gradient
  // of each forward input (undefined where none flows).
  std::vector<Tensor> run_vjps(BackwardTracer& bt, ir::Graph& bg,
                               std::unordered_map<const ir::Value*, BackwardInput>& sources) {
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
      if (!any) continue;
      std::vector<Tensor> ins, outs_f, gouts;
      std::vector<bool> needs;
      for (const ir::Value* v : n->inputs()) {
        ins.push_back(v ? fakes.of(v) : Tensor());
        needs.push_back(v && requires_grad.count(v));
      }
      for (const ir::Value* o : n->outputs()) {
        outs_f.push_back(fakes.of(o));
        auto g = grads.find(o);
        // An output no gradient reaches gets zeros (a broadcast scalar: no size to allocate).
        gouts.push_back(g != grads.end() ? g->second
                                         : zeros({}, o->type().dtype).expand(o->type().sizes));
      }
      std::vector<Tensor> in_grads;
      try {
        in_grads = n->op().vjp(ins, outs_f, gouts, n->attrs(), needs);
      } catch (const Error& e) {
        fail(str("the vjp of '", n->op().name, "' (node ", n->name(),
                 ") cannot be traced: ", e.what()));
      }
      for (size_t i = 0; i < in_grads.size() && i < needs.size(); ++i) {
        if (!needs[i] || !in_grads[i].defined()) continue;
        Tensor g = in_grads[i];
        const ir::Value* v = n->inputs()[i];
        if (g.dtype() != v->type().dtype) g = g.to(v->type().dtype);
        accumulate(v, g);
      }
    }
    std::vector<Tensor> result(forward.inputs().size());
    for (size_t i = 0; i < result.size(); ++i) {
      if (!plan.input_requires_grad[i]) continue;
      auto g = grads.find(forward.inputs()[i]);
      if (g != grads.end()) result[i] = g->second;
    }
    return result;
  }
};

}  // namespace

bool aot_wanted(const ir::Graph& forward, const std::vector<uint8_t>& input_requires_grad) {
  if (!GradMode::is_enabled()) return false;
  for (size_t i = 0; i < input_requires_grad.size() && i < forward.inputs().size(); ++i)
    if (input_requires_grad[i] && is_floating(forward.inputs()[i]->type().dtype)) return true;
  return false;
}

std::shared_ptr<AotPlan> build_aot_plan(ir::Graph& forward, std::shared_ptr<sym::ShapeEnv> env,
                                        const Tracer& tracer,
                                        std::vector<uint8_t> input_requires_grad,
                                        const std::string& name) {
  auto plan = std::make_shared<AotPlan>();
  plan->env = env;
  plan->name = name;
  plan->num_forward_inputs = forward.inputs().size();
  plan->input_requires_grad = std::move(input_requires_grad);
  plan->input_requires_grad.resize(plan->num_forward_inputs, 0);
  for (size_t i = 0; i < plan->num_forward_inputs; ++i)
    plan->input_names.push_back(forward.input_sources()[i].to_string());
  JointBuilder jb{forward, tracer, *plan, {}, {}, {}};
  jb.mark_requires_grad();
  const std::vector<ir::Value*> user_outputs = forward.outputs();
  plan->num_user_outputs = user_outputs.size();
  bool any_output = false;
  for (const ir::Value* v : user_outputs) {
    plan->output_requires_grad.push_back(jb.requires_grad.count(v) ? 1 : 0);
    any_output = any_output || jb.requires_grad.count(v);
  }
  if (!any_output) return nullptr;  // nothing to differentiate: an inference entry

  std::unordered_map<const ir::Value*, int> input_pos;
  for (size_t i = 0; i < forward.inputs().size(); ++i) input_pos[forward.inputs()[i]] = i;

  // Pass 1: which forward values the vjps read (each becomes a graph input on first use).
  std::vector<const ir::Value*> needed;
  {
    ir::Graph probe;
    std::unordered_map<const ir::Value*, BackwardInput> sources;
    BackwardTracer bt(*env, probe, [&](const Tensor& t) -> ir::Value* {
      const ir::Value* f = jb.fakes.value(t);
      if (!f) return nullptr;
      needed.push_back(f);
      return probe.add_input(f->type(), source_named(0, "probe"));
    });
    Tracer::Scope scope(bt);
    jb.run_vjps(bt, probe, sources);
  }
  std::sort(needed.begin(), needed.end(),
            [](const ir::Value* a, const ir::Value* b) { return a->id() < b->id(); });
  const std::unordered_set<const ir::Value*> needed_set(needed.begin(), needed.end());

  // Partition: forward inputs are read in place; recomputable values are recomputed; the rest
  // are saved (extra forward outputs).
  std::unordered_set<const ir::Value*> recomputed;
  std::vector<ir::Value*> saved;
  for (const ir::Value* v : needed) {
    if (v->is_input()) continue;
    if (recomputable(v, needed_set))
      recomputed.insert(v);
    else
      saved.push_back(const_cast<ir::Value*>(v));
  }
  // Forward inputs a recomputation reads are backward inputs too.
  for (const ir::Value* v : std::vector<const ir::Value*>(needed))
    if (recomputed.count(v))
      for (const ir::Value* in : v->producer()->inputs())
        if (in && in->is_input() && !needed_set.count(in) &&
            std::find(needed.begin(), needed.end(), in) == needed.end())
          needed.push_back(in);
  // A value the backward reads must still hold what the vjp saw: refuse in-place writes to it.
  {
    ir::AliasAnalysis aliases(forward);
    std::unordered_set<const ir::Value*> written;
    for (const ir::Node* n : forward.nodes())
      for (size_t i = 0; i < n->inputs().size(); ++i)
        if (n->inputs()[i] && n->mutates_input(static_cast<int>(i)))
          written.insert(aliases.base_of(n->inputs()[i]));
    for (const ir::Value* v : needed)
      if (written.count(aliases.base_of(v)))
        jb.fail(str("the backward reads ", value_label(v),
                    ", which an in-place op of the function overwrites; use the out-of-place op"));
  }
  plan->num_saved = saved.size();
  plan->num_recomputed = recomputed.size();
  plan->input_read.assign(plan->num_forward_inputs, 0);

  // Pass 2: the backward graph itself.
  auto bg = std::make_unique<ir::Graph>();
  std::unordered_map<const ir::Value*, BackwardInput> sources;
  BackwardTracer bt(*env, *bg, [&](const Tensor& t) -> ir::Value* {
    if (const ir::Value* f = jb.fakes.value(t))
      jb.fail(str("internal error: the backward read ", value_label(f),
                  " only in its second recording"));
    return nullptr;
  });
  for (const ir::Value* v : needed) {
    if (!v->is_input()) continue;
    const int pos = input_pos.at(v);
    plan->input_read[pos] = 1;
    ir::Value* in =
        bg->add_input(v->type(), source_named(pos, "forward." + plan->input_names[pos]));
    sources[in] = {BackwardInput::Kind::kForwardInput, pos};
    bt.bind_to(jb.fakes.of(v), in);
  }
  for (size_t j = 0; j < saved.size(); ++j) {
    ir::Value* in =
        bg->add_input(saved[j]->type(), source_named(static_cast<int>(j), str("saved", j)));
    sources[in] = {BackwardInput::Kind::kSaved, static_cast<int>(j)};
    bt.bind_to(jb.fakes.of(saved[j]), in);
  }
  std::vector<Tensor> grads;
  {
    Tracer::Scope scope(bt);
    for (const ir::Node* n : forward.nodes()) {
      bool any = false;
      for (const ir::Value* o : n->outputs()) any = any || recomputed.count(o);
      if (!any) continue;
      std::vector<Tensor> ins;
      for (const ir::Value* v : n->inputs()) ins.push_back(v ? jb.fakes.of(v) : Tensor());
      std::vector<Tensor> outs = dispatch(n->op(), ins, n->attrs());
      for (size_t k = 0; k < outs.size() && k < n->outputs().size(); ++k)
        bt.bind_to(jb.fakes.of(n->output(k)), bt.value_of(outs[k]));
    }
    grads = jb.run_vjps(bt, *bg, sources);
  }
  std::vector<ir::Value*> outputs;
  {
    Tracer::Scope scope(bt);  // value_of may lift a constant gradient
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      outputs.push_back(bt.value_of(grads[i]));
      plan->gradient_of_input.push_back(static_cast<int>(i));
    }
  }
  bg->set_outputs(outputs);
  ir::dead_code_elimination(*bg);
  // Its inputs are saved values, parameters and shared constants: the backward must not write
  // them (the vjp rules are functional; a write would change what the next call reads).
  for (const ir::Node* n : bg->nodes())
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (n->inputs()[i] && n->mutates_input(static_cast<int>(i)))
        jb.fail(str("the backward's '", n->op().name, "' (node ", n->name(),
                    ") writes in place; the vjp rules must be functional"));
  for (size_t i = 0; i < bg->inputs().size(); ++i) {
    const ir::Value* in = bg->inputs()[i];
    auto it = sources.find(in);
    if (it != sources.end()) {
      plan->backward_inputs.push_back(it->second);
      continue;
    }
    // Not one of ours: a constant the tracer lifted (its capture slot).
    plan->backward_inputs.push_back({BackwardInput::Kind::kConstant, bg->input_sources()[i].index});
  }
  plan->constants = bt.captured();
  for (size_t j = 0; j < user_outputs.size(); ++j)
    if (plan->output_requires_grad[j]) plan->grad_output_of.push_back(static_cast<int>(j));
  plan->backward_graph = std::move(bg);

  std::vector<ir::Value*> forward_outputs = user_outputs;
  forward_outputs.insert(forward_outputs.end(), saved.begin(), saved.end());
  forward.set_outputs(std::move(forward_outputs));

  plan->op.name = "compiled_backward";
  plan->op.category = OpCategory::other;
  const AotPlan* raw = plan.get();
  plan->op.vjp_reads_input = [raw](int i, const Attrs&) {
    return i >= static_cast<int>(raw->num_forward_inputs) || raw->input_read[i] != 0;
  };
  plan->op.vjp = [](TensorList in, TensorList, TensorList grad_outputs, const Attrs& attrs,
                    const std::vector<bool>&) {
    const CompiledBackwardCall* call = attrs.parsed<CompiledBackwardCall>();
    LATHE_CHECK(call != nullptr, "[compile] compiled_backward called without its plan");
    const AotPlan& p = *call->plan;
    std::vector<Tensor> args;
    args.reserve(p.backward_inputs.size());
    for (const BackwardInput& b : p.backward_inputs) {
      switch (b.kind) {
        case BackwardInput::Kind::kForwardInput:
          args.push_back(in[b.index]);
          break;
        case BackwardInput::Kind::kSaved:
          args.push_back(in[p.num_forward_inputs + b.index]);
          break;
        case BackwardInput::Kind::kGradOutput:
          args.push_back(grad_outputs[b.index].contiguous());
          break;
        case BackwardInput::Kind::kConstant:
          args.push_back(p.constants[b.index]);
          break;
      }
    }
    std::vector<Tensor> res = p.backward->run(args, backend::SymbolValues(call->symbols));
    std::vector<Tensor> grads(in.size());
    for (size_t k = 0; k < res.size() && k < p.gradient_of_input.size(); ++k)
      grads[p.gradient_of_input[k]] = res[k];
    return grads;
  };
  return plan;
}

void aot_attach(const std::shared_ptr<const AotPlan>& plan, std::span<const Tensor> inputs,
                std::vector<Tensor>& graph_outputs, backend::SymbolValues symbols) {
  const AotPlan& p = *plan;
  for (size_t i = 0; i < p.num_forward_inputs && i < inputs.size(); ++i) {
    const bool now = inputs[i].requires_grad() && is_floating(inputs[i].dtype());
    if (now != (p.input_requires_grad[i] != 0))
      throw Error(str("[compile] '", p.name, "': ", p.input_names[i], " ", inputs[i].shape_string(),
                      (now ? " requires grad now but did not when traced"
                           : " no longer requires grad but did when traced"),
                      "; call reset() on the compiled function after changing requires_grad of "
                      "a captured tensor"));
  }
  LATHE_CHECK(graph_outputs.size() == p.num_user_outputs + p.num_saved, "[compile] '", p.name,
              "': the forward returned ", graph_outputs.size(), " values, expected ",
              p.num_user_outputs + p.num_saved);
  std::vector<Tensor> node_inputs(inputs.begin(), inputs.end());
  node_inputs.insert(node_inputs.end(), graph_outputs.begin() + p.num_user_outputs,
                     graph_outputs.end());
  graph_outputs.resize(p.num_user_outputs);
  std::vector<Tensor> node_outputs;
  for (int j : p.grad_output_of) node_outputs.push_back(graph_outputs[j]);
  auto call = std::make_shared<CompiledBackwardCall>();
  call->plan = plan;
  call->symbols.assign(symbols.begin(), symbols.end());
  Attrs attrs;
  attrs.set_parsed(std::move(call));
  autograd_record(p.op, node_inputs, attrs, node_outputs, AutogradPreState{});
  for (size_t k = 0; k < node_outputs.size(); ++k)
    graph_outputs[p.grad_output_of[k]] = node_outputs[k];
}

}  // namespace lathe::detail
