#include "lathe/trace/aot_autograd.h"

#include "lathe/core/grad_mode.h"
#include "lathe/ops/autograd.h"
#include "lathe/trace/capture.h"
#include "lathe/trace/joint_graph.h"
#include "lathe/trace/partition.h"

namespace lathe::detail {
namespace {

using BackwardInput = AotPlan::BackwardInput;

// The per-call part of a compiled backward, carried in the autograd node's attributes: the plan
// (which owns the node's OpDef, so the node keeps it alive) and the call's symbol values.
struct CompiledBackwardCall : ParsedAttrs {
  std::shared_ptr<const AotPlan> plan;
  std::vector<int64_t> symbols;
};

// The "compiled_backward" op of a plan: its vjp runs the plan's compiled backward on the inputs
// the autograd node kept (forward inputs, then saved values) and the output gradients.
void make_backward_op(AotPlan& plan) {
  plan.op.name = "compiled_backward";
  plan.op.category = OpCategory::other;
  const AotPlan* raw = &plan;
  plan.op.vjp_reads_input = [raw](int i, const Attrs&) {
    return i >= static_cast<int>(raw->num_forward_inputs) || raw->input_read[i] != 0;
  };
  plan.op.vjp_takes_undefined_grads = true;
  plan.op.vjp = [](TensorList in, TensorList outs, TensorList grad_outputs, const Attrs& attrs,
                   const std::vector<bool>&) {
    const CompiledBackwardCall* call = attrs.parsed<CompiledBackwardCall>();
    LATHE_CHECK(call != nullptr, "[compile] compiled_backward called without its plan");
    const AotPlan& p = *call->plan;
    auto grad_output = [&](int slot) {
      const Tensor& g = grad_outputs[slot];
      return g.defined() ? g.contiguous() : zeros(outs[slot].sizes(), outs[slot].dtype());
    };
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
          args.push_back(grad_output(b.index));
          break;
        case BackwardInput::Kind::kConstant:
          args.push_back(p.constants[b.index]);
          break;
      }
    }
    std::vector<Tensor> res = p.backward->run(args, backend::SymbolValues(call->symbols));
    std::vector<Tensor> grads(in.size());
    for (size_t k = 0; k < res.size() && k < p.gradient_of_input.size(); ++k) {
      // No gradient reached the outputs that reach this input: eager gives it none.
      const int i = p.gradient_of_input[k];
      bool reached = false;
      for (int slot : p.grad_outputs_reaching[i]) reached = reached || grad_outputs[slot].defined();
      if (reached) grads[i] = res[k];
    }
    return grads;
  };
}

// Per graph input: whether it requires grad (a floating argument or capture, grad mode on).
std::vector<uint8_t> inputs_requiring_grad(const Tracer& tracer, const std::vector<Arg>& args) {
  std::vector<uint8_t> rg;
  if (!GradMode::is_enabled()) return rg;
  for (int o : tracer.input_origin()) {
    const Tensor& t = o >= 0 ? std::get<Tensor>(args[o]) : tracer.captured()[-1 - o];
    rg.push_back(t.requires_grad() && is_floating(t.dtype()) ? 1 : 0);
  }
  return rg;
}

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
                                        const std::string& name, const Partitioner& partitioner) {
  auto plan = std::make_shared<AotPlan>();
  plan->env = env;
  plan->name = name;
  plan->num_forward_inputs = forward.inputs().size();
  plan->input_requires_grad = std::move(input_requires_grad);
  plan->input_requires_grad.resize(plan->num_forward_inputs, 0);
  for (size_t i = 0; i < plan->num_forward_inputs; ++i)
    plan->input_names.push_back(forward.input_sources()[i].to_string());
  std::unique_ptr<JointGraph> joint = build_joint_graph(forward, *env, tracer, *plan);
  if (!joint) return nullptr;
  Partition p = partitioner.partition(*joint);
  LATHE_CHECK(p.backward != nullptr, "[compile] '", name, "': partitioner '", partitioner.name(),
              "' returned no backward graph");
  plan->backward_graph = std::move(p.backward);
  make_backward_op(*plan);
  return plan;
}

std::shared_ptr<AotPlan> plan_training(CapturedGraph& captured, const std::vector<Arg>& args,
                                       const CompileOptions& options) {
  std::vector<uint8_t> rg = inputs_requiring_grad(*captured.tracer, args);
  if (!aot_wanted(*captured.graph, rg)) return nullptr;
  std::shared_ptr<AotPlan> aot =
      build_aot_plan(*captured.graph, captured.env, *captured.tracer, std::move(rg), options.name,
                     partitioner_of(options));
  if (aot) {
    resolve_symbols(*captured.graph, *captured.env);
    resolve_symbols(*aot->backward_graph, *captured.env);
    captured.graph->verify();
    aot->backward_graph->verify();
  }
  return aot;
}

void aot_check_inputs(const AotPlan& p, std::span<const Tensor> inputs) {
  for (size_t i = 0; i < p.num_forward_inputs && i < inputs.size(); ++i) {
    const bool now = inputs[i].requires_grad() && is_floating(inputs[i].dtype());
    if (now != (p.input_requires_grad[i] != 0))
      throw Error(str("[compile] '", p.name, "': ", p.input_names[i], " ", inputs[i].shape_string(),
                      (now ? " requires grad now but did not when traced"
                           : " no longer requires grad but did when traced"),
                      "; call reset() on the compiled function after changing requires_grad of "
                      "a captured tensor"));
  }
}

void aot_attach(const std::shared_ptr<const AotPlan>& plan, std::span<const Tensor> inputs,
                std::vector<Tensor>& graph_outputs, backend::SymbolValues symbols) {
  const AotPlan& p = *plan;
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
