#include "lathe/trace/capture.h"

#include <algorithm>

#include "lathe/core/device_registry.h"
#include "lathe/ir/passes.h"
#include "lathe/nn/module.h"
#include "lathe/trace/compile_logs.h"
#include "lathe/trace/trace_errors.h"

namespace lathe::detail {

namespace {

// Where each output of the call comes from: arguments and captured tensors returned as they
// are (same handle, as in eager); computed values become graph outputs, each once.
std::vector<ir::Value*> place_outputs(CapturedGraph& c, const std::vector<Tensor>& outs,
                                      const std::vector<Arg>& fake_args) {
  Tracer& tracer = *c.tracer;
  std::vector<ir::Value*> graph_outputs;
  for (const Tensor& o : outs) {
    OutputSpec spec;
    if (!o.defined()) {
      spec.kind = OutputSpec::Kind::kUndefined;
      c.outputs.push_back(spec);
      continue;
    }
    bool found = false;
    for (size_t i = 0; i < fake_args.size() && !found; ++i) {
      const Tensor* f = std::get_if<Tensor>(&fake_args[i]);
      if (f && f->is_same(o)) {
        spec = {OutputSpec::Kind::kArgument, static_cast<int>(i)};
        found = true;
      }
    }
    if (!found && o.has_storage()) {
      tracer.value_of(o);  // lifts it if it was never used by an op
      for (size_t k = 0; k < tracer.captured().size() && !found; ++k) {
        if (tracer.captured()[k].is_same(o)) {
          spec = {OutputSpec::Kind::kCaptured, static_cast<int>(k)};
          found = true;
        }
      }
    }
    if (!found) {
      ir::Value* v = tracer.value_of(o);
      auto it = std::find(graph_outputs.begin(), graph_outputs.end(), v);
      spec = {OutputSpec::Kind::kGraph, static_cast<int>(it - graph_outputs.begin())};
      if (it == graph_outputs.end()) graph_outputs.push_back(v);
    }
    c.outputs.push_back(spec);
  }
  return graph_outputs;
}

// A dim traced as a symbol that the code pinned to one value makes one entry per value: say
// which dim and why, so the user can change the code or mark the dim static.
void log_specialized_dims(const Tracer& tracer, sym::ShapeEnv& env, const CompileOptions& options) {
  if (!log_enabled(LogTopic::kRecompiles, options)) return;
  for (size_t i = 0; i < tracer.bindings().size(); ++i) {
    const SymbolBinding& b = tracer.bindings()[i];
    const sym::Expr* symbol = tracer.binding_symbols()[i];
    std::string why = env.specialization_reason(symbol);
    if (why.empty()) continue;
    log_message(LogTopic::kRecompiles,
                str("'", options.name, "': arg", b.arg, ".size(", b.dim,
                    ") was traced as dynamic but the code specialized it to ", env.hint_of(symbol),
                    " (", why, "); each new value of it will recompile (mark_static(t, ", b.dim,
                    ") or DynamicPolicy::kStatic says so up front)"));
  }
}

}  // namespace

void resolve_symbols(ir::Graph& graph, sym::ShapeEnv& env) {
  auto resolve = [&](Shape& shape) {
    for (SymInt& v : shape)
      if (v.is_symbolic()) v = SymInt::from_expr(env.simplify(v.expr()));
  };
  auto resolve_type = [&](ir::Value* v) {
    resolve(v->mutable_type().sizes);
    resolve(v->mutable_type().strides);
  };
  for (ir::Value* v : graph.inputs()) resolve_type(v);
  for (ir::Node* n : graph.nodes()) {
    for (ir::Value* v : n->outputs()) resolve_type(v);
    Attrs& attrs = n->mutable_attrs();
    const std::vector<Attrs::Item> items(attrs.items().begin(), attrs.items().end());
    for (const auto& [name, value] : items) {
      const Shape* shape = std::get_if<Shape>(&value);
      if (!shape) continue;
      Shape resolved = *shape;
      resolve(resolved);
      attrs.set(name, std::move(resolved));
    }
  }
}

void CapturedGraph::produce_guards(const std::vector<Arg>& args) {
  guards.record_call(args);
  guards.set_program(env->produce_guards(tracer->sources()));
}

std::unique_ptr<CapturedGraph> capture_graph(const CompiledFunction::Fn& fn,
                                             const std::vector<Arg>& args, nn::Module* module,
                                             const CompileOptions& options,
                                             const DimChooser& dims) {
  // Captured lazy tensors (parameters on the device) must hold their data to be lifted.
  sync_devices();
  auto c = std::make_unique<CapturedGraph>();
  c->env = std::make_shared<sym::ShapeEnv>();
  c->graph = std::make_unique<ir::Graph>();
  if (module) {
    for (auto& [name, t] : module->named_parameters()) c->names.emplace(t.impl_ptr().get(), name);
    for (auto& [name, t] : module->named_buffers()) c->names.emplace(t.impl_ptr().get(), name);
  }
  if (!module) c->modules_read.name_tensors_into(&c->names);
  c->tracer = std::make_unique<Tracer>(*c->env, *c->graph, &c->names);
  std::vector<Arg> fake_args = args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      LATHE_CHECK(t->defined(), "[compile] argument ", i, " is an undefined tensor");
      LATHE_CHECK(t->has_storage(), "[compile] argument ", i, " ", t->shape_string(),
                  " has no data (a fake or lazy tensor)");
      fake_args[i] = c->tracer->add_argument(*t, static_cast<int>(i), dims(i, *t));
    }
  }
  std::vector<Tensor> outs;
  {
    Tracer::Scope scope(*c->tracer);
    ModuleCollector::Scope module_scope(c->modules_read);
    try {
      outs = fn(fake_args);
    } catch (const Error& e) {
      rethrow_traced_error(e, traced_sizes(args, fake_args), options);
    }
  }
  std::vector<ir::Value*> graph_outputs = place_outputs(*c, outs, fake_args);
  for (const ir::Value* v : graph_outputs) c->output_device.push_back(v->type().device);
  c->graph->set_outputs(graph_outputs);
  ir::dead_code_elimination(*c->graph);
  resolve_symbols(*c->graph, *c->env);
  c->graph->verify();
  log_specialized_dims(*c->tracer, *c->env, options);
  return c;
}

}  // namespace lathe::detail
