#include "lathe/trace/compile_cache.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "lathe/core/device_registry.h"
#include "lathe/core/dispatch_mode.h"
#include "lathe/core/grad_mode.h"
#include "lathe/ir/passes.h"
#include "lathe/kernels/compile_time.h"
#include "lathe/nn/module.h"
#include "lathe/sym/sym_error.h"
#include "lathe/trace/compile_logs.h"
#include "lathe/trace/dim_hints.h"
#include "lathe/trace/module_guards.h"
#include "lathe/trace/trace_errors.h"
#include "lathe/trace/verify.h"

namespace lathe::detail {

namespace {

// Argument views live on the stack for the usual small argument counts.
class ArgViews {
 public:
  explicit ArgViews(const std::vector<Arg>& args) {
    if (args.size() > kInline) heap_.resize(args.size());
    data_ = args.size() > kInline ? heap_.data() : inline_;
    size_ = args.size();
    make_arg_views(args, data_);
  }
  std::span<const sym::ArgView> span() const { return {data_, size_}; }

 private:
  static constexpr size_t kInline = 8;
  sym::ArgView inline_[kInline];
  std::vector<sym::ArgView> heap_;
  sym::ArgView* data_;
  size_t size_;
};

const Tensor& tensor_at(const std::vector<Arg>& args, int i) { return std::get<Tensor>(args[i]); }

// The first argument holding the same tensor object as argument i.
size_t first_same(const std::vector<Arg>& args, size_t i) {
  const Tensor& t = std::get<Tensor>(args[i]);
  for (size_t j = 0; j < i; ++j)
    if (const Tensor* u = std::get_if<Tensor>(&args[j]); u && u->is_same(t)) return j;
  return i;
}

// On a device other than the CPU (its data is reached through the device registry).
bool on_lazy(const Tensor& t) { return t.defined() && !t.device().is_cpu(); }

// Pending lazy arguments are computed first: guards and the executable read their data.
void sync_pending_lazy(const std::vector<Arg>& args) {
  for (const Arg& a : args) {
    const Tensor* t = std::get_if<Tensor>(&a);
    if (t && on_lazy(*t) && !t->has_storage()) {
      sync_devices();
      return;
    }
  }
}

// Re-resolves every symbolic size of the graph through the ShapeEnv. A symbol pinned or equated
// by a guard recorded after a value's type (or a node's symbolic attribute) was recorded is
// rewritten there too, so the graph states what its guards allow, and Graph::verify, whose shape
// rules see the replacements, agrees with it.
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

// Per graph input: whether it requires grad (a floating argument or capture, grad mode on).
std::vector<uint8_t> inputs_requiring_grad(const Tracer& tracer, const std::vector<Arg>& args) {
  std::vector<uint8_t> rg;
  if (!GradMode::is_enabled()) return rg;
  for (int o : tracer.input_origin()) {
    const Tensor& t = o >= 0 ? tensor_at(args, o) : tracer.captured()[-1 - o];
    rg.push_back(t.requires_grad() && is_floating(t.dtype()) ? 1 : 0);
  }
  return rg;
}

// A new tensor with t's values, sizes and strides (t is dense: a factory made it).
Tensor fresh_copy(const Tensor& t) {
  Tensor c = empty_like(t);
  c.copy_(t);
  return c;
}

}  // namespace

// Lazy tensors run as CPU views of their device buffers (the kernels read and write the device
// memory in place: nothing is copied); lazy results come back as device data.
std::vector<Tensor> CacheEntry::run(const std::vector<Arg>& args) const {
  std::vector<Tensor> inputs;
  inputs.reserve(input_origin.size());
  for (int o : input_origin) {
    if (o >= 0) {
      const Tensor& t = tensor_at(args, o);
      inputs.push_back(on_lazy(t) ? device_buffer(t) : t);
      continue;
    }
    const Tensor& c = capture(-1 - o);
    const Tensor& b = captured_buffers[-1 - o];
    if (fresh_capture[-1 - o]) {
      inputs.push_back(fresh_copy(c));
    } else if (!on_lazy(c)) {
      inputs.push_back(c);
    } else if (c.impl().storage == b.impl().storage && c.storage_offset() == b.storage_offset()) {
      inputs.push_back(b);
    } else {
      // The capture was written lazily since the trace (pending) or holds a new buffer.
      if (!c.has_storage()) sync_devices();
      inputs.push_back(device_buffer(c));
    }
  }
  int64_t inline_syms[16];
  std::vector<int64_t> heap_syms;
  int64_t* syms = inline_syms;
  if (num_symbols > 16) {
    heap_syms.resize(num_symbols);
    syms = heap_syms.data();
  }
  for (const SymbolBinding& b : bindings)
    syms[b.symbol] = *tensor_at(args, b.arg).sizes()[b.dim].maybe_int();
  std::vector<Tensor> outs;
  if (aot) {
    NoGradGuard no_grad;  // the one node aot_attach records stands for the whole graph
    outs = executable->run(inputs, backend::SymbolValues(syms, num_symbols));
  } else {
    outs = executable->run(inputs, backend::SymbolValues(syms, num_symbols));
  }
  if (aot) aot_attach(aot, inputs, outs, backend::SymbolValues(syms, num_symbols));
  for (size_t i = 0; i < outs.size() && i < output_device.size(); ++i)
    if (!output_device[i].is_cpu()) outs[i] = wrap_device_buffer(outs[i], output_device[i]);
  std::vector<Tensor> result;
  result.reserve(outputs.size());
  for (const OutputSpec& o : outputs) {
    switch (o.kind) {
      case OutputSpec::Kind::kGraph:
        result.push_back(outs.at(o.index));
        break;
      case OutputSpec::Kind::kArgument:
        result.push_back(tensor_at(args, o.index));
        break;
      case OutputSpec::Kind::kCaptured:
        result.push_back(fresh_capture[o.index] ? inputs[capture_input[o.index]]
                                                : capture(o.index));
        break;
      case OutputSpec::Kind::kUndefined:
        result.emplace_back();
        break;
    }
  }
  return result;
}

CompileCache::CompileCache(CompiledFunction::Fn fn, CompileOptions options,
                           std::shared_ptr<nn::Module> module)
    : fn_(std::move(fn)), options_(std::move(options)), module_(std::move(module)) {
  LATHE_CHECK(options_.recompile_limit >= 1, "[compile] recompile_limit must be at least 1, got ",
              options_.recompile_limit);
  backend::create_backend(options_.backend);  // fails early on an unknown name
  verify_calls_ = verify_call_count(options_);
}

std::shared_ptr<const CacheEntry> CompileCache::lookup(const std::vector<Arg>& args,
                                                       std::span<const sym::ArgView> views,
                                                       std::string* reason) {
  std::shared_ptr<const CacheEntry> hit;
  size_t hit_index = 0;
  {
    std::shared_lock lock(mu_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      GuardFailure f = entries_[i]->guards.check(args, views);
      if (f.ok()) {
        hit = entries_[i];
        hit_index = i;
        break;
      }
      if (i == 0 && reason) *reason = entries_[0]->guards.explain(args, views, f);
    }
  }
  if (hit && hit_index > 0) {
    std::unique_lock lock(mu_);
    auto it =
        std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e == hit; });
    if (it != entries_.end()) std::rotate(entries_.begin(), it, it + 1);
  }
  return hit;
}

std::vector<Tensor> CompileCache::call(const std::vector<Arg>& args) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  // A compiled function called while another is traced is traced through.
  if (is_tracing()) return fn_(args);
  sync_pending_lazy(args);
  ArgViews views(args);
  if (std::shared_ptr<const CacheEntry> e = lookup(args, views.span(), nullptr)) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    return run_entry(*e, args);
  }
  std::unique_lock trace_lock(trace_mu_);
  std::string reason;
  if (std::shared_ptr<const CacheEntry> e = lookup(args, views.span(), &reason)) {
    trace_lock.unlock();  // compiled meanwhile
    hits_.fetch_add(1, std::memory_order_relaxed);
    return run_entry(*e, args);
  }
  const bool dropped = drop_stale_entries();
  if (!admit_recompile(reason, dropped)) {
    trace_lock.unlock();
    eager_calls_.fetch_add(1, std::memory_order_relaxed);
    return fn_(args);
  }
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const CacheEntry> e = compile_entry(args);
  trace_lock.unlock();
  return run_first(*e, args,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

std::vector<Tensor> CompileCache::run_first(const CacheEntry& e, const std::vector<Arg>& args,
                                            double compile_s) {
  if (!log_enabled(LogTopic::kPasses)) return run_entry(e, args);
  // The first call's breakdown: the trace, the backend's compile (its own line has the details),
  // the first run (the executor's plan, oneDNN primitives created and weights reordered there).
  const detail::CompileTimeCounters before = detail::compile_time_counters();
  const auto run_start = std::chrono::steady_clock::now();
  std::vector<Tensor> outs = run_entry(e, args);
  const double run_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  const detail::CompileTimeCounters d = detail::compile_time_counters() - before;
  log_message(
      LogTopic::kPasses,
      str("first call of '", options_.name, "': ", (compile_s + run_s) * 1e3,
          " ms = trace and guards ", (compile_s - e.backend_compile_s) * 1e3,
          " ms + backend compile ", e.backend_compile_s * 1e3, " ms + first run ", run_s * 1e3,
          " ms (oneDNN primitives created ", d.primitive_s * 1e3, " ms (", d.primitives,
          "), weights reordered ", d.weight_reorder_s * 1e3, " ms (", d.weight_reorders, "))"));
  return outs;
}

bool CompileCache::drop_stale_entries() {
  std::unique_lock lock(mu_);
  return std::erase_if(entries_, [](const auto& e) { return e->guards.frozen_stale(); }) > 0;
}

bool CompileCache::admit_recompile(const std::string& reason, bool dropped) {
  size_t n;
  {
    std::shared_lock lock(mu_);
    n = entries_.size();
  }
  if (n > 0 || dropped) {
    std::unique_lock lock(mu_);
    last_reason_ = reason;
  }
  if (n >= static_cast<size_t>(options_.recompile_limit)) {
    std::string msg = str("[compile] '", options_.name, "' reached its recompile limit (",
                          options_.recompile_limit, " entries); last failing guard: ", reason);
    if (options_.error_on_recompile_limit) throw Error(msg);
    if (!warned_) {
      warned_ = true;
      log_warning(msg + "; running it eagerly from now on");
    }
    return false;
  }
  if (n > 0 && log_enabled(LogTopic::kRecompiles))
    log_message(LogTopic::kRecompiles,
                str("recompiling '", options_.name, "' (entry ", n + 1, " of at most ",
                    options_.recompile_limit, "): ", reason));
  return true;
}

std::shared_ptr<const CacheEntry> CompileCache::compile_entry(const std::vector<Arg>& args) {
  update_auto_dynamic(args);
  // Counts the trace as failed unless it produces an entry.
  struct FailedTraceCount {
    std::atomic<int64_t>& count;
    bool failed = true;
    ~FailedTraceCount() {
      if (failed) count.fetch_add(1, std::memory_order_relaxed);
    }
  } failed_trace{failed_traces_};
  std::unique_ptr<CacheEntry> entry;
  try {
    entry = trace(args, true);
  } catch (const sym::ConstraintViolation&) {
    throw;  // the user's mark_dynamic, contradicted by the code
  } catch (const sym::DataDependentError&) {
    throw;  // reading data while tracing fails with any sizes
  } catch (const std::exception& e) {
    // A dynamic trace that fails where a static one may not (a shape rule or kernel that needs
    // concrete sizes, or any other limitation of tracing with symbols) is traced again with
    // static sizes; if that fails too, the error is the program's and the static one is thrown.
    if (!traces_dynamic()) throw;
    std::string why = e.what();
    if (log_enabled(LogTopic::kRecompiles))
      log_message(LogTopic::kRecompiles,
                  str("'", options_.name, "' cannot be traced with dynamic sizes (", why,
                      "); tracing it with static sizes from now on"));
    auto_dynamic_failed_ = true;
    entry = trace(args, false);
  }
  failed_trace.failed = false;
  entry->id = compiles_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (log_enabled(LogTopic::kGuards))
    log_message(LogTopic::kGuards, str("guards of '", options_.name, "':\n", entry->guards_text));
  if (log_enabled(LogTopic::kGraph))
    log_message(LogTopic::kGraph, str("graph of '", options_.name, "':\n", entry->graph_text));
  std::shared_ptr<CacheEntry> e(std::move(entry));
  std::unique_lock lock(mu_);
  entries_.insert(entries_.begin(), e);
  return e;
}

std::vector<Tensor> CompileCache::run_entry(const CacheEntry& e, const std::vector<Arg>& args) {
  if (verify_calls_ <= 0 || e.on_lazy_device) return e.run(args);
  const int64_t call = e.calls.fetch_add(1, std::memory_order_relaxed);
  if (call >= verify_calls_) return e.run(args);
  verified_calls_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::pair<std::string, Tensor>> written;
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor* t = std::get_if<Tensor>(&args[i]);
    if (!t || !t->defined() || first_same(args, i) != i) continue;
    written.emplace_back(str("argument ", i), *t);
  }
  for (int k : e.written_captures) written.emplace_back(e.capture_names[k], e.capture(k));
  return verified_call(
      options_, str("call ", call + 1, " of cache entry #", e.id), written,
      [&] { return e.run(args); }, [&] { return fn_(args); });
}

bool CompileCache::traces_dynamic() const {
  if (auto_dynamic_failed_) return false;
  if (options_.dynamic == DynamicPolicy::kDynamic) return true;
  if (options_.dynamic != DynamicPolicy::kAuto) return false;
  for (const auto& dims : auto_dynamic_)
    for (bool d : dims)
      if (d) return true;
  return false;
}

void CompileCache::update_auto_dynamic(const std::vector<Arg>& args) {
  if (options_.dynamic != DynamicPolicy::kAuto) return;
  if (frame_sizes_.size() < args.size()) {
    frame_sizes_.resize(args.size());
    auto_dynamic_.resize(args.size());
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor* t = std::get_if<Tensor>(&args[i]);
    if (!t || !t->defined()) continue;
    std::vector<int64_t> sizes = t->shape();
    if (frame_sizes_[i].size() == sizes.size()) {
      for (size_t d = 0; d < sizes.size(); ++d)
        if (frame_sizes_[i][d] != sizes[d]) auto_dynamic_[i][d] = true;
    } else {
      auto_dynamic_[i].assign(sizes.size(), false);
    }
    frame_sizes_[i] = std::move(sizes);
  }
}

std::vector<DimChoice> CompileCache::dim_choices(size_t arg, const Tensor& t,
                                                 bool allow_auto_dynamic) const {
  std::vector<DimChoice> dims(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) {
    bool dynamic = false;
    if (options_.dynamic == DynamicPolicy::kDynamic && allow_auto_dynamic && !auto_dynamic_failed_)
      dynamic = true;
    if (options_.dynamic == DynamicPolicy::kAuto && allow_auto_dynamic && !auto_dynamic_failed_ &&
        arg < auto_dynamic_.size() && static_cast<size_t>(d) < auto_dynamic_[arg].size())
      dynamic = auto_dynamic_[arg][d];
    dims[d].kind = dynamic ? DimChoice::Kind::kDynamic : DimChoice::Kind::kStatic;
    if (const DimHints* h = DimHints::of(t); h && static_cast<size_t>(d) < h->dims.size()) {
      const DimHints::Dim& hd = h->dims[d];
      if (hd.kind == DimHints::Kind::kStatic) dims[d].kind = DimChoice::Kind::kStatic;
      if (hd.kind == DimHints::Kind::kDynamic) {
        dims[d].kind = DimChoice::Kind::kMarked;
        dims[d].min = hd.min;
        dims[d].max = hd.max;
      }
    }
  }
  return dims;
}

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
  for (size_t pos = 0; pos < origin.size(); ++pos) {
    if (origin[pos] >= 0) {
      entry.on_lazy_device |= graph.inputs()[pos]->type().device.kind() == DeviceKind::lazy;
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

}  // namespace

std::unique_ptr<CacheEntry> CompileCache::trace(const std::vector<Arg>& args,
                                                bool allow_auto_dynamic) {
  // Captured lazy tensors (parameters on the device) must hold their data to be lifted.
  sync_devices();
  auto entry = std::make_unique<CacheEntry>();
  entry->env = std::make_shared<sym::ShapeEnv>();
  std::unordered_map<const TensorImpl*, std::string> names;
  if (module_) {
    for (auto& [name, t] : module_->named_parameters()) names.emplace(t.impl_ptr().get(), name);
    for (auto& [name, t] : module_->named_buffers()) names.emplace(t.impl_ptr().get(), name);
  }
  ir::Graph graph;
  Tracer tracer(*entry->env, graph, module_ ? &names : nullptr);
  std::vector<Arg> fake_args = args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      LATHE_CHECK(t->defined(), "[compile] argument ", i, " is an undefined tensor");
      LATHE_CHECK(t->has_storage(), "[compile] argument ", i, " ", t->shape_string(),
                  " has no data (a fake or lazy tensor)");
      fake_args[i] =
          tracer.add_argument(*t, static_cast<int>(i), dim_choices(i, *t, allow_auto_dynamic));
    }
  }
  std::vector<Tensor> outs;
  ModuleCollector modules_read;
  {
    Tracer::Scope scope(tracer);
    ModuleCollector::Scope module_scope(modules_read);
    try {
      outs = fn_(fake_args);
    } catch (const Error& e) {
      rethrow_traced_error(e, traced_sizes(args, fake_args), options_);
    }
  }

  // Outputs: arguments and captured tensors returned as they are (same handle, as in eager);
  // computed values become graph outputs, each once.
  std::vector<ir::Value*> graph_outputs;
  for (const Tensor& o : outs) {
    OutputSpec spec;
    if (!o.defined()) {
      spec.kind = OutputSpec::Kind::kUndefined;
      entry->outputs.push_back(spec);
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
    entry->outputs.push_back(spec);
  }
  for (const ir::Value* v : graph_outputs) entry->output_device.push_back(v->type().device);
  graph.set_outputs(graph_outputs);
  ir::dead_code_elimination(graph);
  resolve_symbols(graph, *entry->env);
  graph.verify();
  log_specialized_dims(tracer, *entry->env);
  // Training (grad on and an input requiring grad): the joint graph, partitioned. Built before
  // the guards are produced: the vjps' shape rules may add guards.
  std::shared_ptr<AotPlan> aot;
  if (std::vector<uint8_t> rg = inputs_requiring_grad(tracer, args); aot_wanted(graph, rg)) {
    aot = build_aot_plan(graph, entry->env, tracer, std::move(rg), options_.name);
    if (aot) {
      resolve_symbols(graph, *entry->env);
      resolve_symbols(*aot->backward_graph, *entry->env);
      graph.verify();
      aot->backward_graph->verify();
    }
  }

  entry->guards.record_call(args);
  entry->guards.set_program(entry->env->produce_guards(tracer.sources()));

  entry->captured = tracer.captured();
  for (const Tensor& c : entry->captured)
    entry->captured_buffers.push_back(on_lazy(c) ? device_buffer(c) : c);
  plan_captures(*entry, tracer, graph);
  guard_modules(*entry, module_.get(), modules_read);
  entry->input_origin = tracer.input_origin();
  entry->bindings = tracer.bindings();
  for (const SymbolBinding& b : entry->bindings)
    entry->num_symbols = std::max(entry->num_symbols, static_cast<size_t>(b.symbol) + 1);
  std::unique_ptr<backend::Backend> backend = backend::create_backend(options_.backend);
  backend::CompileContext context;
  // Training entries freeze too: only captures that neither require grad nor are written (an
  // eval-mode BatchNorm's statistics); the backward reads the same tensors as node inputs.
  if (options_.freeze && backend->uses_constants()) freeze_captures(*entry, graph, context);
  entry->graph_text = graph.to_string();
  if (aot) {
    LATHE_CHECK(!entry->on_lazy_device, "[compile] '", options_.name,
                "': training (AOT autograd) with tensors on the lazy device is not supported; "
                "compile it with CPU tensors");
    aot->backward_text = aot->backward_graph->to_string();
    const auto backward_start = std::chrono::steady_clock::now();
    aot->backward = backend->compile(*aot->backward_graph);
    entry->backend_compile_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - backward_start).count();
    aot->backward_graph.reset();
    entry->graph_text += "backward (" + std::to_string(aot->num_saved) + " saved, " +
                         std::to_string(aot->num_recomputed) + " recomputed):\n" +
                         aot->backward_text;
    entry->aot = aot;
  }
  entry->guards_text = entry->guards.to_string();
  const auto backend_start = std::chrono::steady_clock::now();
  entry->executable = backend->compile_with_context(graph, context);
  entry->backend_compile_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - backend_start).count();
  return entry;
}

// A dim traced as a symbol that the code pinned to one value makes one entry per value: say
// which dim and why, so the user can change the code or mark the dim static.
void CompileCache::log_specialized_dims(const Tracer& tracer, sym::ShapeEnv& env) const {
  if (!log_enabled(LogTopic::kRecompiles)) return;
  for (size_t i = 0; i < tracer.bindings().size(); ++i) {
    const SymbolBinding& b = tracer.bindings()[i];
    const sym::Expr* symbol = tracer.binding_symbols()[i];
    std::string why = env.specialization_reason(symbol);
    if (why.empty()) continue;
    log_message(LogTopic::kRecompiles,
                str("'", options_.name, "': arg", b.arg, ".size(", b.dim,
                    ") was traced as dynamic but the code specialized it to ", env.hint_of(symbol),
                    " (", why, "); each new value of it will recompile (mark_static(t, ", b.dim,
                    ") or DynamicPolicy::kStatic says so up front)"));
  }
}

CompileStats CompileCache::stats() const {
  CompileStats s;
  s.calls = calls_.load();
  s.hits = hits_.load();
  s.compiles = compiles_.load();
  s.eager_calls = eager_calls_.load();
  s.failed_traces = failed_traces_.load();
  s.verified_calls = verified_calls_.load();
  return s;
}

size_t CompileCache::num_entries() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

int CompileCache::check_guards(const std::vector<Arg>& args) const {
  ArgViews views(args);
  std::shared_lock lock(mu_);
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i]->guards.check(args, views.span()).ok()) return static_cast<int>(i);
  return -1;
}

std::string CompileCache::last_recompile_reason() const {
  std::shared_lock lock(mu_);
  return last_reason_;
}

std::string CompileCache::graph_string(size_t i) const {
  std::shared_lock lock(mu_);
  LATHE_CHECK(i < entries_.size(), "[compile] no cache entry ", i, " (", entries_.size(),
              " entries)");
  return entries_[i]->graph_text;
}

std::string CompileCache::guards_string(size_t i) const {
  std::shared_lock lock(mu_);
  LATHE_CHECK(i < entries_.size(), "[compile] no cache entry ", i, " (", entries_.size(),
              " entries)");
  return entries_[i]->guards_text;
}

void CompileCache::reset() {
  std::unique_lock trace_lock(trace_mu_);
  std::unique_lock lock(mu_);
  entries_.clear();  // calls running an entry on other threads keep it alive until they return
  last_reason_.clear();
  frame_sizes_.clear();
  auto_dynamic_.clear();
  auto_dynamic_failed_ = false;
  warned_ = false;
}

}  // namespace lathe::detail
