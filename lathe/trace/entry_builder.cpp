#include "lathe/trace/entry_builder.h"

#include <algorithm>
#include <chrono>

#include "lathe/core/device_registry.h"
#include "lathe/core/grad_mode.h"
#include "lathe/trace/module_guards.h"

namespace lathe::detail {

namespace {

// Fills the per-capture fields of `entry` (captured already set) from the trace.
void plan_captures(CacheEntry& entry, const Tracer& tracer, const ir::Graph& graph) {
  const size_t n = entry.captured.size();
  entry.capture_slots.assign(n, nullptr);
  entry.fresh_capture.assign(n, 0);
  entry.capture_input.assign(n, -1);
  entry.capture_names.assign(n, "");
  const std::vector<int>& origin = tracer.input_origin();
  // Graph inputs that an output is or views: an output must not alias a constant of the trace.
  std::vector<uint8_t> returned(origin.size(), 0);
  for (const ir::Value* v : graph.outputs())
    if (int r = tracer.root_input(v); r >= 0) returned[r] = 1;
  for (const OutputSpec& o : entry.outputs)
    if (o.kind == OutputSpec::Kind::kCaptured) {
      for (size_t pos = 0; pos < origin.size(); ++pos)
        if (origin[pos] == -1 - o.index) returned[pos] = 1;
    }
  std::vector<int32_t> written_args;
  for (size_t pos = 0; pos < origin.size(); ++pos) {
    if (origin[pos] >= 0) {
      entry.on_lazy_device |= graph.inputs()[pos]->type().device.kind() == DeviceKind::lazy;
      if (tracer.input_written(pos)) written_args.push_back(origin[pos]);
      continue;
    }
    const size_t k = static_cast<size_t>(-1 - origin[pos]);
    entry.capture_input[k] = static_cast<int>(pos);
    entry.capture_names[k] = "captured tensor '" + graph.input_sources()[pos].name + "'";
    // A tensor the function made (zeros, full, ...) is new at every eager call: when the graph
    // writes it or returns it (or a view of it), each call gets a fresh copy of it.
    const bool written = tracer.input_written(pos);
    if (tracer.made_while_tracing(k) && (written || returned[pos]))
      entry.fresh_capture[k] = 1;
    else if (written)
      entry.written_captures.push_back(static_cast<int>(k));
    entry.on_lazy_device |= on_lazy(entry.captured[k]);
  }
  for (Device d : entry.output_device) entry.on_lazy_device |= !d.is_cpu();
  entry.guards.record_written_arguments(std::move(written_args));
}

// With grad on, each capture's requires_grad as traced (checked before the entry runs: a
// parameter frozen between steps traces again, before anything, BatchNorm statistics included,
// is computed).
void guard_capture_grads(CacheEntry& entry) {
  if (!GradMode::is_enabled()) return;
  for (size_t k = 0; k < entry.captured.size(); ++k) {
    if (entry.capture_input[k] < 0 || entry.fresh_capture[k]) continue;
    EntryGuards::CaptureGradCheck check;
    check.holder = entry.capture_slots[k] ? entry.capture_slots[k] : &entry.captured[k];
    check.requires_grad = check.holder->requires_grad();
    check.name = entry.capture_names[k];
    entry.guards.record_capture_grad(std::move(check));
  }
}

// Hands the captures that cannot change under the entry (see CompileOptions::freeze) to the
// backend as constants, and guards each by identity and storage version.
void freeze_captures(CacheEntry& entry, const ir::Graph& graph, backend::CompileContext& context) {
  std::vector<uint8_t> written(entry.captured.size(), 0);
  for (int k : entry.written_captures) written[k] = 1;
  // Inference: grad mode off, or every module read in eval mode (then captures that require
  // grad stay inputs). A training-style call (modules in train mode, or plain captured tensors
  // with grad on) freezes nothing: its weights change between calls.
  const bool grad = GradMode::is_enabled();
  if (grad && !entry.guards.modules_in_eval()) return;
  for (size_t k = 0; k < entry.captured.size(); ++k) {
    const Tensor& c = entry.captured[k];
    const int pos = entry.capture_input[k];
    // A capture on the lazy device (a module moved there) freezes as its device buffer: the
    // parameters live where the executable wants them.
    if (pos < 0 || written[k] || entry.fresh_capture[k] || !c.has_storage() ||
        (grad && c.requires_grad()))
      continue;
    if (context.constants.empty()) context.constants.resize(graph.inputs().size());
    context.constants[pos] = on_lazy(c) ? device_buffer(c) : c;
    EntryGuards::FrozenCheck check;
    check.holder = entry.capture_slots[k] ? entry.capture_slots[k] : &entry.captured[k];
    check.traced = c.impl_ptr();
    check.storage = c.impl().storage.get();
    check.version = c.impl().storage->version();
    check.name = entry.capture_names[k];
    entry.guards.record_frozen(std::move(check));
  }
}

// The backend's compiles: the backward (training), then the forward with the frozen constants.
void compile_graphs(CacheEntry& entry, ir::Graph& graph, const std::shared_ptr<AotPlan>& aot,
                    const CompileOptions& options) {
  std::unique_ptr<backend::Backend> backend = backend::create_backend(options.backend);
  backend::CompileContext context;
  // Training entries compute in f32 (their backward has no bf16 form yet).
  if (!aot) context.precision = options.precision;
  // Training entries freeze too: only captures that neither require grad nor are written (an
  // eval-mode BatchNorm's statistics); the backward reads the same tensors as node inputs.
  if (options.freeze && backend->uses_constants()) freeze_captures(entry, graph, context);
  entry.graph_text = graph.to_string();
  entry.num_nodes = graph.num_nodes();
  if (aot) {
    LATHE_CHECK(!entry.on_lazy_device, "[compile] '", options.name,
                "': training (AOT autograd) with tensors on the lazy device is not supported; "
                "compile it with CPU tensors");
    aot->backward_text = aot->backward_graph->to_string();
    const auto backward_start = std::chrono::steady_clock::now();
    aot->backward = backend->compile(*aot->backward_graph);
    entry.backend_compile_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - backward_start).count();
    aot->backward_graph.reset();
    entry.graph_text += "backward (" + std::to_string(aot->num_saved) + " saved, " +
                        std::to_string(aot->num_recomputed) + " recomputed):\n" +
                        aot->backward_text;
    entry.aot = aot;
  }
  entry.guards_text = entry.guards.to_string();
  const auto backend_start = std::chrono::steady_clock::now();
  entry.executable = backend->compile_with_context(graph, context);
  entry.backend_compile_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - backend_start).count();
}

}  // namespace

std::unique_ptr<CacheEntry> build_entry(CapturedGraph& captured, std::shared_ptr<AotPlan> aot,
                                        nn::Module* module, const CompileOptions& options) {
  const Tracer& tracer = *captured.tracer;
  auto entry = std::make_unique<CacheEntry>();
  entry->env = captured.env;
  entry->guards = std::move(captured.guards);
  entry->outputs = std::move(captured.outputs);
  entry->output_device = std::move(captured.output_device);
  entry->captured = tracer.captured();
  for (const Tensor& c : entry->captured)
    entry->captured_buffers.push_back(on_lazy(c) ? device_buffer(c) : c);
  plan_captures(*entry, tracer, *captured.graph);
  guard_modules(*entry, module, captured.modules_read);
  guard_capture_grads(*entry);
  entry->input_origin = tracer.input_origin();
  entry->bindings = tracer.bindings();
  for (const SymbolBinding& b : entry->bindings)
    entry->num_symbols = std::max(entry->num_symbols, static_cast<size_t>(b.symbol) + 1);
  compile_graphs(*entry, *captured.graph, aot, options);
  return entry;
}

}  // namespace lathe::detail
