// CompileCache: the entries of one compiled function (cache_entry.h), the lookup (most recently
// used first) and the recompile policy: on a miss it runs the staged compile path (capture.h ->
// aot_autograd.h's joint graph and partition -> entry_builder.h), within the recompile limit and
// with automatic dynamic shapes.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/trace/cache_entry.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/compile_logs.h"
#include "lathe/trace/regions.h"
#include "lathe/trace/tracer.h"

namespace lathe::detail {

class CompileCache {
 public:
  CompileCache(CompiledFunction::Fn fn, CompileOptions options, std::shared_ptr<nn::Module> module);
  std::vector<Tensor> call(const std::vector<Arg>& args);

  CompileStats stats() const;
  size_t num_entries() const;
  int check_guards(const std::vector<Arg>& args) const;
  std::string last_recompile_reason() const;
  std::string graph_string(size_t i) const;
  std::string guards_string(size_t i) const;
  ExplainReport explain_last_call() const;
  void reset();

 private:
  // The entry whose guards pass, moved to the front; null on a miss. On a miss, `reason` gets
  // the failing guard of the most recently used entry, and `shared_memory` (when given) whether
  // some entry failed only because arguments it writes share memory (see run_aliased).
  std::shared_ptr<const CacheEntry> lookup(const std::vector<Arg>& args,
                                           std::span<const sym::ArgView> views, std::string* reason,
                                           bool* shared_memory = nullptr);
  // A call whose tensor arguments share memory (views of one storage) while the entry's graph
  // writes an argument: the trace took them for independent tensors, so the call runs eagerly
  // (a trace would take them so again), with a warning the first time.
  std::vector<Tensor> run_aliased(const CacheEntry& e, const std::vector<Arg>& args);
  // After a miss (trace_mu_ held): records `reason` and logs the recompile; false, after a
  // one-time warning, once the recompile limit is reached (throws instead when configured so).
  // `dropped`: drop_stale_entries removed entries (the reason is still recorded).
  bool admit_recompile(const std::string& reason, bool dropped = false);
  // Drops the entries whose frozen captures changed (they can never be hit again), so that
  // re-freezing after in-place updates does not count against the recompile limit (trace_mu_
  // held). True when it dropped any.
  bool drop_stale_entries();
  // Traces and compiles a new entry for args (static sizes if a dynamic trace fails) and puts it
  // first (trace_mu_ held).
  std::shared_ptr<const CacheEntry> compile_entry(const std::vector<Arg>& args);
  std::unique_ptr<CacheEntry> trace(const std::vector<Arg>& args, bool allow_auto_dynamic);
  // Runs entry e, beside eager for its first calls when verification is on.
  std::vector<Tensor> run_entry(const CacheEntry& e, const std::vector<Arg>& args);
  // The first run of a new entry; with LATHE_LOGS=passes it also logs where the first call's time
  // went (`compile_s`: trace and backend compile, measured by the caller).
  std::vector<Tensor> run_first(const CacheEntry& e, const std::vector<Arg>& args,
                                double compile_s);
  std::vector<DimChoice> dim_choices(size_t arg, const Tensor& t, bool allow_auto_dynamic) const;
  void update_auto_dynamic(const std::vector<Arg>& args);
  // True when the next trace makes some argument size a symbol (besides mark_dynamic).
  bool traces_dynamic() const;
  bool logging(LogTopic topic) const { return log_enabled(topic, options_); }
  // A trace read tensor data (a graph break; trace_mu_ held): from now on every call runs as
  // regions. Returns the region cache.
  RegionCache* begin_regions(const std::string& why);

  CompiledFunction::Fn fn_;
  CompileOptions options_;
  int verify_calls_ = 0;  // calls of each entry to verify (options or the process default)
  std::shared_ptr<nn::Module> module_;

  mutable std::shared_mutex mu_;                      // entries_ and last_reason_
  std::vector<std::shared_ptr<CacheEntry>> entries_;  // most recently used first
  std::string last_reason_;
  std::vector<std::string> recompile_reasons_;  // every recompile's failing guard, in order

  std::mutex trace_mu_;  // serializes tracing, auto-dynamic state and the warning
  std::vector<std::vector<int64_t>> frame_sizes_;  // per argument: sizes of the last trace
  std::vector<std::vector<bool>> auto_dynamic_;    // per argument and dim
  bool auto_dynamic_failed_ = false;  // a dynamic trace failed (kAuto, kDynamic): stay static
  bool warned_ = false;
  std::atomic<bool> warned_aliased_{false};

  std::atomic<int64_t> calls_{0}, hits_{0}, compiles_{0}, eager_calls_{0};
  std::atomic<int64_t> failed_traces_{0}, verified_calls_{0};
  std::atomic<int64_t> region_calls_{0};
  // Set once the function has graph breaks (regions_owner_ keeps every one made, reset() included,
  // for calls still running one).
  std::atomic<RegionCache*> regions_{nullptr};
  std::vector<std::unique_ptr<RegionCache>> regions_owner_;  // under trace_mu_
  std::string first_break_;                                  // the first trace's read
  std::atomic<int64_t> last_call_entry_{0};  // id of the entry the last call ran (0: none)
};

}  // namespace lathe::detail
