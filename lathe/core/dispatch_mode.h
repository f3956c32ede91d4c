// The dispatch-mode stack: a thread-local stack of modes that take over op dispatch (the tracer
// records ops instead of running them). lathe::dispatch asks the top mode; with none, ops run
// eagerly (or on their device, see device_registry.h). Modes nest through RAII guards. A mode may
// forward an op to the mode below it (call_below), e.g. an autocast mode above the tracer that
// rewrites an op's dtypes and lets the tracer record the result.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lathe/base/error.h"

namespace lathe {

class Attrs;        // lathe/ops
struct OpDef;       // lathe/ops
struct TensorMeta;  // lathe/ops
class Tensor;
struct TensorImpl;

// A mode that intercepts every op dispatched on its thread while it is the top of the stack.
class DispatchMode {
 public:
  virtual ~DispatchMode() = default;
  // Runs or records `op` in place of its eager kernel; `metas` are the shape rule's outputs.
  virtual std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs,
                                       const Attrs& attrs, std::vector<TensorMeta>&& metas) = 0;
  // Called with every tensor a factory allocates on this thread (the tracer tells constants made
  // inside a traced function from captured tensors).
  virtual void on_allocation(const TensorImpl* /*impl*/) {}
  // True when tensors met under this mode are fake: reading their data is then an error with
  // advice instead of "no data".
  virtual bool is_tracing() const { return false; }
  // Called before code reads a tensor's data (item, to_vector, raw_data, printing) while this mode
  // traces. A mode that holds pending work may compute it here (a graph break: the region runner
  // of lathe::compile, lathe/trace/regions.h), so that `t` holds its current data; `what` names
  // the read ("item()"). False when the mode cannot: reading a tensor without data is then an
  // error (DataReadWhileTracing).
  virtual bool materialize(const Tensor& /*t*/, const char* /*what*/) { return false; }
  // In-place writes this mode has recorded so far (a tracing mode), or -1 when it records none
  // (lathe::cond checks that its branches write nothing).
  virtual int64_t recorded_writes() const { return -1; }
};

// Thrown when code reads the data of a traced tensor (item(), to_vector(), printing values) and
// the mode cannot compute it: lathe::compile's whole-graph trace. The compile cache catches it and
// runs the function as regions split at such reads (CompileOptions::fullgraph makes it the
// caller's error).
class DataReadWhileTracing : public Error {
 public:
  using Error::Error;
};

// The top of this thread's mode stack; nullptr when ops run eagerly.
DispatchMode* current_dispatch_mode();

// Pushes a mode for this thread until the guard ends (also when an exception unwinds it).
// A null mode pushes eager dispatch: ops run their kernels, hidden from the modes below.
class ModeGuard {
 public:
  explicit ModeGuard(DispatchMode* mode);
  ~ModeGuard();
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  friend class BelowModeGuard;
  DispatchMode* mode_;
  ModeGuard* below_;  // the guard pushed before this one on this thread, or null
};

// Pops this thread's top mode until the guard ends: ops dispatched meanwhile go to the mode
// below it (or run eagerly when there is none), and modes pushed meanwhile stack on that one.
// With an empty stack it does nothing.
class BelowModeGuard {
 public:
  BelowModeGuard();
  ~BelowModeGuard();
  BelowModeGuard(const BelowModeGuard&) = delete;
  BelowModeGuard& operator=(const BelowModeGuard&) = delete;

 private:
  ModeGuard* popped_;
};

// Runs fn() with the top mode popped (BelowModeGuard). A mode forwards an op to the mode below
// it from its dispatch by dispatching it again there:
//   return call_below([&] { return lathe::dispatch(op, inputs, attrs); });
template <class F>
auto call_below(F&& fn) {
  BelowModeGuard below;
  return fn();
}

namespace detail {
// True while the top mode of this thread traces (lathe::compile).
bool is_tracing();
}  // namespace detail

}  // namespace lathe
