#include "lathe/trace/regions.h"

#include "lathe/core/device_registry.h"
#include "lathe/core/dispatch_mode.h"
#include "lathe/core/grad_mode.h"
#include "lathe/ir/passes.h"
#include "lathe/nn/module.h"
#include "lathe/ops/autograd.h"
#include "lathe/trace/compile_logs.h"
#include "lathe/trace/tracer.h"

namespace lathe::detail {

namespace {

// Runs a region's nodes with the eager kernels (and autograd) on real tensors: a training region.
std::vector<Tensor> replay_eagerly(const ir::Graph& g, const std::vector<Tensor>& inputs,
                                   const Tracer& tracer) {
  std::unordered_map<const ir::Value*, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) values.emplace(g.inputs()[i], inputs[i]);
  for (const ir::Node* n : g.nodes()) {
    std::vector<Tensor> ins;
    ins.reserve(n->inputs().size());
    for (const ir::Value* v : n->inputs()) ins.push_back(v ? values.at(v) : Tensor());
    std::vector<Tensor> outs;
    if (tracer.recorded_without_grad(n)) {
      NoGradGuard no_grad;
      outs = dispatch(n->op(), ins, n->attrs());
    } else {
      outs = dispatch(n->op(), ins, n->attrs());
    }
    LATHE_CHECK(outs.size() == n->outputs().size(), "[compile.regions] ", n->name(), " (",
                n->op().name, ") returned ", outs.size(), " tensors eagerly, the graph has ",
                n->outputs().size());
    for (size_t k = 0; k < outs.size(); ++k) values[n->output(static_cast<int>(k))] = outs[k];
  }
  std::vector<Tensor> results;
  results.reserve(g.outputs().size());
  for (const ir::Value* v : g.outputs()) results.push_back(values.at(v));
  return results;
}

}  // namespace

// The dispatch mode of one call of a function with graph breaks: records ops into the current
// region (a Tracer over real tensors), and ends the region at every read of pending data.
class RegionRecorder final : public DispatchMode {
 public:
  RegionRecorder(RegionCache& cache, RegionTrace& trace) : cache_(cache), trace_(trace) { begin(); }

  std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                               std::vector<TensorMeta>&& metas) override {
    return tracer_->dispatch(op, inputs, attrs, std::move(metas));
  }
  void on_allocation(const TensorImpl* impl) override { tracer_->note_allocation(impl); }
  bool is_tracing() const override { return true; }
  int64_t recorded_writes() const override { return earlier_writes_ + tracer_->num_writes(); }

  bool materialize(const Tensor& t, const char* what) override {
    if (!t.has_storage()) {
      const ir::Value* v = tracer_->recorded_value(t);
      if (!v) return false;  // not of this call: the read is an error
      std::string where = v->producer() ? str(" computed by ", v->producer()->op().name) : "";
      flush(str(what, " of ", t.shape_string(), where));
      return true;
    }
    // Real data, but the region may write tensors in place: their readers must see the writes.
    if (tracer_->num_writes() > 0) flush(str(what, " of ", t.shape_string(), " after a write"));
    return true;
  }

  // The last region, at the function's return.
  void finish() { flush("return"); }

 private:
  void begin() {
    if (tracer_) earlier_writes_ += tracer_->num_writes();
    tracer_.reset();
    graph_ = std::make_unique<ir::Graph>();
    // One ShapeEnv per call: regions have static sizes, so it only owns what a shape rule makes.
    if (!env_) env_ = std::make_shared<sym::ShapeEnv>();
    tracer_ = std::make_unique<Tracer>(*env_, *graph_, &cache_.names_);
  }

  void flush(const std::string& ends_at) {
    ModeGuard eager(nullptr);  // what runs now (kernels, autograd replay) runs for real
    // The pending tensors the code still holds: the tracer keeps one reference to each.
    std::vector<std::shared_ptr<TensorImpl>> live;
    for (const std::shared_ptr<TensorImpl>& f : tracer_->fakes())
      if (f.use_count() > 1 && !f->storage) live.push_back(f);
    std::vector<ir::Value*> outputs;
    outputs.reserve(live.size());
    for (const auto& f : live) outputs.push_back(tracer_->recorded_value(Tensor(f)));
    graph_->set_outputs(std::move(outputs));
    ir::dead_code_elimination(*graph_);
    if (graph_->num_nodes() == 0) {
      begin();
      return;
    }
    std::vector<Tensor> inputs;
    inputs.reserve(graph_->inputs().size());
    bool needs_grad = false, off_cpu = false;
    for (int origin : tracer_->input_origin()) {
      const Tensor& t = tracer_->captured()[static_cast<size_t>(-1 - origin)];
      inputs.push_back(t);
      needs_grad |= t.requires_grad();
      off_cpu |= !t.device().is_cpu();
    }
    needs_grad &= GradMode::is_enabled();
    // Gradients, tensors on the lazy device (which records them itself), or in-place writes
    // where two inputs share memory (a backend takes inputs for independent): the eager path.
    const bool eager_path = needs_grad || off_cpu || writes_shared_memory(inputs);
    const size_t nodes = graph_->num_nodes();
    std::vector<Tensor> results;
    bool compiled = false;
    if (eager_path) {
      results = replay_eagerly(*graph_, inputs, *tracer_);
      if (off_cpu) sync_devices();  // lazy results get their device data before it is shared
    } else {
      Region& r = cache_.find_or_compile(std::move(graph_), env_, ends_at, &compiled);
      r.runs.fetch_add(1, std::memory_order_relaxed);
      results = r.executable->run(inputs, {});
    }
    for (size_t i = 0; i < live.size(); ++i) {
      TensorImpl& impl = *live[i];
      const Tensor& r = results.at(i);
      impl.storage = r.impl().storage;
      impl.sizes = r.sizes();
      impl.strides = r.strides();
      impl.offset = r.storage_offset();
      // A result of the autograd replay carries its history (never a leaf's own state).
      const AutogradMeta* meta = autograd_meta(r.impl());
      if (needs_grad && meta && meta->grad_fn) {
        impl.requires_grad = r.impl().requires_grad;
        impl.extension(TensorSlot::autograd) = r.impl().extension(TensorSlot::autograd);
      }
    }
    trace_.nodes.push_back(nodes);
    trace_.ends_at.push_back(ends_at);
    trace_.compiled_now.push_back(compiled ? 1 : 0);
    trace_.eager.push_back(eager_path ? 1 : 0);
    begin();
  }

  bool writes_shared_memory(const std::vector<Tensor>& inputs) const {
    if (tracer_->num_writes() == 0) return false;
    for (size_t i = 0; i < inputs.size(); ++i)
      for (size_t j = i + 1; j < inputs.size(); ++j)
        if (inputs[i].impl().storage && inputs[i].impl().storage == inputs[j].impl().storage)
          return true;
    return false;
  }

  RegionCache& cache_;
  RegionTrace& trace_;
  std::shared_ptr<sym::ShapeEnv> env_;
  std::unique_ptr<ir::Graph> graph_;
  std::unique_ptr<Tracer> tracer_;
  int64_t earlier_writes_ = 0;  // recorded by the regions before this one
};

RegionCache::RegionCache(const CompiledFunction::Fn& fn, const CompileOptions& options,
                         nn::Module* module)
    : fn_(fn), options_(options) {
  if (module) {
    for (auto& [name, t] : module->named_parameters()) names_.emplace(t.impl_ptr().get(), name);
    for (auto& [name, t] : module->named_buffers()) names_.emplace(t.impl_ptr().get(), name);
  }
}

RegionCache::~RegionCache() = default;

Region& RegionCache::find_or_compile(std::unique_ptr<ir::Graph> graph,
                                     std::shared_ptr<sym::ShapeEnv> env, const std::string& ends_at,
                                     bool* compiled) {
  const uint64_t hash = graph->structural_hash();
  std::lock_guard lock(mu_);
  auto& bucket = by_hash_[hash];
  // A hash match is confirmed by the op at every position and the input count (as the lazy
  // device's cache does); the hash covers attributes, types and wiring.
  const std::vector<ir::Node*> nodes = graph->nodes();
  for (Region* r : bucket) {
    if (r->ops.size() != nodes.size() || r->graph->inputs().size() != graph->inputs().size())
      continue;
    bool same = true;
    for (size_t i = 0; i < nodes.size() && same; ++i) same = r->ops[i] == &nodes[i]->op();
    if (same) return *r;
  }
  graph->verify();
  if (!backend_) backend_ = backend::create_backend(options_.backend);
  auto r = std::make_unique<Region>();
  r->hash = hash;
  r->ends_at = ends_at;
  r->num_nodes = graph->num_nodes();
  for (const ir::Node* n : nodes) r->ops.push_back(&n->op());
  r->executable = backend_->compile(*graph);
  r->graph = std::move(graph);
  r->env = std::move(env);
  if (log_enabled(LogTopic::kGraphBreaks, options_))
    log_message(LogTopic::kGraphBreaks, str("'", options_.name, "': region ", regions_.size() + 1,
                                            " (", r->num_nodes, " ops) ends at ", ends_at));
  if (log_enabled(LogTopic::kGraph, options_))
    log_message(LogTopic::kGraph, str("region ", regions_.size() + 1, " of '", options_.name,
                                      "':\n", r->graph->to_string()));
  compiles_.fetch_add(1, std::memory_order_relaxed);
  *compiled = true;
  bucket.push_back(r.get());
  regions_.push_back(std::move(r));
  return *regions_.back();
}

std::vector<Tensor> RegionCache::call(const std::vector<Arg>& args) {
  RegionTrace trace;
  std::vector<Tensor> outs;
  {
    RegionRecorder recorder(*this, trace);
    {
      ModeGuard guard(&recorder);
      outs = fn_(args);
    }
    recorder.finish();
  }
  std::lock_guard lock(mu_);
  last_call_ = std::move(trace);
  return outs;
}

size_t RegionCache::num_regions() const {
  std::lock_guard lock(mu_);
  return regions_.size();
}

RegionTrace RegionCache::last_call() const {
  std::lock_guard lock(mu_);
  return last_call_;
}

std::string RegionCache::graph_string(size_t i) const {
  std::lock_guard lock(mu_);
  LATHE_CHECK(i < regions_.size(), "[compile] no region ", i, " (", regions_.size(), " regions)");
  return regions_[i]->graph->to_string();
}

}  // namespace lathe::detail
