// CacheEntry: one compiled trace of a function (the last stage's product, built by
// entry_builder.h): its guards, its executables and the real tensors it captured, and how a call
// runs it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/sym/shape_env.h"
#include "lathe/trace/aot_autograd.h"
#include "lathe/trace/capture.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/guards.h"

namespace lathe::detail {

// On a device other than the CPU (its data is reached through the device registry).
inline bool on_lazy(const Tensor& t) { return t.defined() && !t.device().is_cpu(); }

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
  size_t num_nodes = 0;  // of the graph the backend compiled (lathe::explain)
  std::string guards_text;

  // The tensor capture slot k stands for at this call.
  const Tensor& capture(size_t k) const {
    return capture_slots[k] ? *capture_slots[k] : captured[k];
  }
  std::vector<Tensor> run(const std::vector<Arg>& args) const;
};

}  // namespace lathe::detail
