// CompileCache: the entries of one compiled function (guards + executable each), the lookup
// (most recently used first), tracing on a miss, automatic dynamic shapes and the recompile limit.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/sym/shape_env.h"
#include "lathe/trace/aot_autograd.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/guards.h"
#include "lathe/trace/tracer.h"

namespace lathe::detail {

// Where a compiled call's output comes from.
struct OutputSpec {
  enum class Kind : uint8_t { kGraph, kArgument, kCaptured, kUndefined };
  Kind kind = Kind::kGraph;
  int index = 0;  // graph output, argument or capture slot
};

// One trace: its guards and its executable, with the real tensors it captured.
struct CacheEntry {
  // Owns the symbolic expressions the graph and the executable refer to: destroyed last.
  // Shared with the AOT plan, whose backward can run after the entry is gone.
  std::shared_ptr<sym::ShapeEnv> env;
  EntryGuards guards;
  std::unique_ptr<backend::Executable> executable;
  // Seconds the backend took to compile the graphs (LATHE_LOGS=passes' first-call breakdown).
  double backend_compile_s = 0;
  std::vector<Tensor> captured;  // by reference: parameters, buffers, constants
  // Per capture slot: the CPU view of a lazy capture's device buffer, made once at trace time
  // (used while the capture still holds that buffer); the capture itself for CPU tensors.
  std::vector<Tensor> captured_buffers;
  // Per graph output: the device the traced value lives on; the executable's buffer of an output
  // on a device other than the CPU is handed back as that device's data.
  std::vector<Device> output_device;
  // Per capture slot: the parameter or buffer slot of a guarded module that holds the capture.
  // Calls read the slot (the guards let it hold a new tensor of the traced type, as after
  // `w = w - lr * g`); null for other captures, used as they are.
  std::vector<const Tensor*> capture_slots;
  // Per capture slot: a tensor made while tracing (zeros, full, ...) that the graph writes or an
  // output aliases. Each call gets a fresh copy of its traced value, as eager makes it anew.
  std::vector<uint8_t> fresh_capture;
  std::vector<int> capture_input;          // per capture slot: its graph input position
  std::vector<std::string> capture_names;  // per capture slot: its graph input name
  std::vector<int> written_captures;       // capture slots the graph writes in place
  bool on_lazy_device = false;             // some input or output is on the lazy device
  int64_t id = 0;                          // 1 for the function's first trace, 2 for the next, ...
  mutable std::atomic<int64_t> calls{0};   // calls served, for verification
  std::vector<int> input_origin;           // per graph input: argument index, or -1 - capture slot
  std::vector<SymbolBinding> bindings;
  size_t num_symbols = 0;
  std::vector<OutputSpec> outputs;
  // Training entries (grad on, some input requiring grad): the compiled backward; the graph's
  // outputs end with the values it saves (see aot_autograd.h).
  std::shared_ptr<const AotPlan> aot;
  std::string graph_text;
  std::string guards_text;

  // The tensor capture slot k stands for at this call.
  const Tensor& capture(size_t k) const {
    return capture_slots[k] ? *capture_slots[k] : captured[k];
  }
  std::vector<Tensor> run(const std::vector<Arg>& args) const;
};

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
  void reset();

 private:
  // The entry whose guards pass, moved to the front; null on a miss. On a miss, `reason` gets
  // the failing guard of the most recently used entry.
  std::shared_ptr<const CacheEntry> lookup(const std::vector<Arg>& args,
                                           std::span<const sym::ArgView> views,
                                           std::string* reason);
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
  void log_specialized_dims(const Tracer& tracer, sym::ShapeEnv& env) const;

  CompiledFunction::Fn fn_;
  CompileOptions options_;
  int verify_calls_ = 0;  // calls of each entry to verify (options or LATHE_COMPILE_VERIFY)
  std::shared_ptr<nn::Module> module_;

  mutable std::shared_mutex mu_;                      // entries_ and last_reason_
  std::vector<std::shared_ptr<CacheEntry>> entries_;  // most recently used first
  std::string last_reason_;

  std::mutex trace_mu_;  // serializes tracing, auto-dynamic state and the warning
  std::vector<std::vector<int64_t>> frame_sizes_;  // per argument: sizes of the last trace
  std::vector<std::vector<bool>> auto_dynamic_;    // per argument and dim
  bool auto_dynamic_failed_ = false;  // a dynamic trace failed (kAuto, kDynamic): stay static
  bool warned_ = false;

  std::atomic<int64_t> calls_{0}, hits_{0}, compiles_{0}, eager_calls_{0};
  std::atomic<int64_t> failed_traces_{0}, verified_calls_{0};
};

}  // namespace lathe::detail
