#include "lathe/trace/compile_cache.h"

#include <algorithm>
#include <chrono>

#include "lathe/core/device_registry.h"
#include "lathe/core/dispatch_mode.h"
#include "lathe/kernels/compile_time.h"
#include "lathe/sym/sym_error.h"
#include "lathe/trace/capture.h"
#include "lathe/trace/dim_hints.h"
#include "lathe/trace/entry_builder.h"
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

// The first argument holding the same tensor object as argument i.
size_t first_same(const std::vector<Arg>& args, size_t i) {
  const Tensor& t = std::get<Tensor>(args[i]);
  for (size_t j = 0; j < i; ++j)
    if (const Tensor* u = std::get_if<Tensor>(&args[j]); u && u->is_same(t)) return j;
  return i;
}

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

}  // namespace

CompileCache::CompileCache(CompiledFunction::Fn fn, CompileOptions options,
                           std::shared_ptr<nn::Module> module)
    : fn_(std::move(fn)), options_(std::move(options)), module_(std::move(module)) {
  LATHE_CHECK(options_.recompile_limit >= 1, "[compile] recompile_limit must be at least 1, got ",
              options_.recompile_limit);
  backend::create_backend(options_.backend);  // fails early on an unknown name
  parse_log_topics(options_.logs);            // and on an unknown log topic
  verify_calls_ = verify_call_count(options_);
}

std::shared_ptr<const CacheEntry> CompileCache::lookup(const std::vector<Arg>& args,
                                                       std::span<const sym::ArgView> views,
                                                       std::string* reason, bool* shared_memory) {
  std::shared_ptr<const CacheEntry> hit, aliased;
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
      if (f.stage == GuardFailure::Stage::kOverlap && !aliased) aliased = entries_[i];
    }
  }
  if (!hit && aliased && shared_memory) {
    *shared_memory = true;
    return aliased;  // for the caller to run eagerly, not the entry
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
  if (RegionCache* regions = regions_.load(std::memory_order_acquire)) {
    region_calls_.fetch_add(1, std::memory_order_relaxed);
    return regions->call(args);
  }
  ArgViews views(args);
  if (std::shared_ptr<const CacheEntry> e = lookup(args, views.span(), nullptr)) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    return run_entry(*e, args);
  }
  std::unique_lock trace_lock(trace_mu_);
  std::string reason;
  bool shared_memory = false;
  if (std::shared_ptr<const CacheEntry> e = lookup(args, views.span(), &reason, &shared_memory)) {
    trace_lock.unlock();
    if (shared_memory) return run_aliased(*e, args);
    hits_.fetch_add(1, std::memory_order_relaxed);  // compiled meanwhile
    return run_entry(*e, args);
  }
  const bool dropped = drop_stale_entries();
  if (!admit_recompile(reason, dropped)) {
    trace_lock.unlock();
    eager_calls_.fetch_add(1, std::memory_order_relaxed);
    return fn_(args);
  }
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const CacheEntry> e;
  RegionCache* regions = nullptr;
  try {
    e = compile_entry(args);
  } catch (const DataReadWhileTracing& read) {
    if (options_.fullgraph) throw;
    regions = begin_regions(read.what());
  }
  trace_lock.unlock();
  if (regions) {
    region_calls_.fetch_add(1, std::memory_order_relaxed);
    return regions->call(args);
  }
  // Traced from this very call: the graph is right for calls without shared memory only.
  if (e->guards.shared_memory(args).first >= 0) return run_aliased(*e, args);
  return run_first(*e, args,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

std::vector<Tensor> CompileCache::run_first(const CacheEntry& e, const std::vector<Arg>& args,
                                            double compile_s) {
  if (!logging(LogTopic::kPasses)) return run_entry(e, args);
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

std::vector<Tensor> CompileCache::run_aliased(const CacheEntry& e, const std::vector<Arg>& args) {
  if (!warned_aliased_.exchange(true)) {
    auto [i, j] = e.guards.shared_memory(args);
    log_warning(str("[compile] '", options_.name, "': arguments ", i, " and ", j,
                    " share memory (views of one storage) and the compiled graph writes ",
                    e.guards.written_list(),
                    " in place; the trace treats arguments as independent, so such calls run "
                    "eagerly"));
  }
  eager_calls_.fetch_add(1, std::memory_order_relaxed);
  return fn_(args);
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
    recompile_reasons_.push_back(reason);
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
  if (n > 0 && logging(LogTopic::kRecompiles))
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
  } catch (const DataReadWhileTracing&) {
    failed_trace.failed = options_.fullgraph;  // else a graph break: the caller runs regions
    throw;
  } catch (const std::exception& e) {
    // A dynamic trace that fails where a static one may not (a shape rule or kernel that needs
    // concrete sizes, or any other limitation of tracing with symbols) is traced again with
    // static sizes; if that fails too, the error is the program's and the static one is thrown.
    if (!traces_dynamic()) throw;
    std::string why = e.what();
    if (logging(LogTopic::kRecompiles))
      log_message(LogTopic::kRecompiles,
                  str("'", options_.name, "' cannot be traced with dynamic sizes (", why,
                      "); tracing it with static sizes from now on"));
    auto_dynamic_failed_ = true;
    entry = trace(args, false);
  }
  failed_trace.failed = false;
  entry->id = compiles_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (logging(LogTopic::kGuards))
    log_message(LogTopic::kGuards, str("guards of '", options_.name, "':\n", entry->guards_text));
  if (logging(LogTopic::kGraph))
    log_message(LogTopic::kGraph, str("graph of '", options_.name, "':\n", entry->graph_text));
  std::shared_ptr<CacheEntry> e(std::move(entry));
  std::unique_lock lock(mu_);
  entries_.insert(entries_.begin(), e);
  return e;
}

RegionCache* CompileCache::begin_regions(const std::string& why) {
  first_break_ = why;
  if (logging(LogTopic::kGraphBreaks))
    log_message(LogTopic::kGraphBreaks,
                str("'", options_.name, "' reads tensor data while traced (", why,
                    "); running it as regions split at each such read from now on "
                    "(CompileOptions::fullgraph = true makes this an error)"));
  regions_owner_.push_back(std::make_unique<RegionCache>(fn_, options_, module_.get()));
  regions_.store(regions_owner_.back().get(), std::memory_order_release);
  return regions_owner_.back().get();
}

std::vector<Tensor> CompileCache::run_entry(const CacheEntry& e, const std::vector<Arg>& args) {
  last_call_entry_.store(e.id, std::memory_order_relaxed);
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

std::unique_ptr<CacheEntry> CompileCache::trace(const std::vector<Arg>& args,
                                                bool allow_auto_dynamic) {
  std::unique_ptr<CapturedGraph> captured = capture_graph(
      fn_, args, module_.get(), options_,
      [&](size_t i, const Tensor& t) { return dim_choices(i, t, allow_auto_dynamic); });
  // Training: the joint graph, partitioned (before the guards: the vjps may add some).
  std::shared_ptr<AotPlan> aot = plan_training(*captured, args, options_);
  captured->produce_guards(args);
  return build_entry(*captured, std::move(aot), module_.get(), options_);
}

CompileStats CompileCache::stats() const {
  CompileStats s;
  s.calls = calls_.load();
  s.hits = hits_.load();
  s.compiles = compiles_.load();
  s.eager_calls = eager_calls_.load();
  s.failed_traces = failed_traces_.load();
  s.verified_calls = verified_calls_.load();
  s.region_calls = region_calls_.load();
  if (RegionCache* r = regions_.load()) s.region_compiles = r->region_compiles();
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

ExplainReport CompileCache::explain_last_call() const {
  ExplainReport r;
  r.compiles = compiles_.load();
  if (RegionCache* regions = regions_.load()) {
    RegionTrace t = regions->last_call();
    r.compiles += regions->region_compiles();
    r.graph_count = static_cast<int64_t>(t.nodes.size());
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      r.ops_per_graph.push_back(static_cast<int64_t>(t.nodes[i]));
      r.eager_graphs.push_back(t.eager[i]);
      if (t.ends_at[i] != "return") r.break_reasons.push_back(t.ends_at[i]);
    }
    r.graph_break_count = static_cast<int64_t>(r.break_reasons.size());
  }
  std::shared_lock lock(mu_);
  r.recompile_reasons = recompile_reasons_;
  if (r.graph_count == 0) {
    const int64_t id = last_call_entry_.load();
    for (const auto& e : entries_)
      if (e->id == id) {
        r.graph_count = 1;
        r.ops_per_graph.push_back(static_cast<int64_t>(e->num_nodes));
        r.eager_graphs.push_back(0);
      }
  }
  return r;
}

void CompileCache::reset() {
  std::unique_lock trace_lock(trace_mu_);
  regions_.store(nullptr);
  first_break_.clear();
  std::unique_lock lock(mu_);
  recompile_reasons_.clear();
  entries_.clear();  // calls running an entry on other threads keep it alive until they return
  last_reason_.clear();
  frame_sizes_.clear();
  auto_dynamic_.clear();
  auto_dynamic_failed_ = false;
  warned_ = false;
  warned_aliased_ = false;
}

}  // namespace lathe::detail
