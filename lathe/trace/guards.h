// EntryGuards: everything one compile-cache entry assumes about a call, checked before the entry
// is reused: the arguments' kinds, tensor metadata, aliasing, scalar values, grad mode, the
// structure of captured modules, and the ShapeEnv's guard program over the sizes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lathe/core/autocast_state.h"
#include "lathe/sym/guard_program.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/tracer.h"

namespace lathe::detail {

// The failing check of a call, or none.
struct GuardFailure {
  enum class Stage : uint8_t {
    kNone,
    kArgCount,
    kArgKind,
    kTensor,
    kAlias,
    kScalar,
    kGradMode,
    kAutocast,
    kModule,
    kSlot,
    kCaptureGrad,
    kFrozen,
    kProgram,
    kOverlap
  };
  Stage stage = Stage::kNone;
  int32_t index = 0;  // the argument, module or program instruction
  bool ok() const { return stage == Stage::kNone; }
};

class EntryGuards {
 public:
  enum class ArgKind : uint8_t { kTensor, kInt, kDouble, kBool };
  struct TensorCheck {
    int32_t arg = 0;
    DType dtype = DType::f32;
    Device device;
    int32_t rank = 0;
    bool requires_grad = false;
    Layout layout = Layout::kContiguous;
    std::vector<int64_t> strides;  // kStrided: exact strides
    std::vector<int8_t> order;     // kDense: the dims innermost first
  };
  struct ModuleCheck {
    const nn::Module* module = nullptr;
    uint64_t version = 0;
    bool training = false;
    std::string path;
  };

  // A parameter or buffer slot of a guarded module, and the tensor it held while tracing.
  struct SlotCheck {
    const Tensor* slot = nullptr;
    std::shared_ptr<TensorImpl> traced;  // kept alive so that its address is not reused
    // A new tensor with the traced dtype, device, sizes and strides passes (the entry reads the
    // slot at each call); otherwise only the traced object does.
    bool may_rebind = false;
    DType dtype = DType::f32;
    Device device;
    std::vector<int64_t> sizes, strides;
    std::string name;  // "module 'fc'.weight"
  };

  // A capture frozen into the executable (a constant of the compiled graph): the tensor that
  // stands for it at a call (`holder`: a module slot or the entry's own handle) must still be
  // the tensor traced, with the storage version it had (an in-place update makes the entry
  // stale for good: see frozen_stale).
  struct FrozenCheck {
    const Tensor* holder = nullptr;
    std::shared_ptr<TensorImpl> traced;
    const Storage* storage = nullptr;  // the storage frozen (compared, never dereferenced)
    uint64_t version = 0;
    std::string name;  // "captured tensor 'fc.weight'"
  };

  // A captured tensor's requires_grad as traced (grad mode on): freezing or unfreezing a
  // parameter changes what the entry computes (a training entry's gradients, or none), so the
  // call traces again instead of running the entry.
  struct CaptureGradCheck {
    const Tensor* holder = nullptr;  // a module slot or the entry's own handle
    bool requires_grad = false;
    std::string name;  // "captured tensor '0.weight'"
  };

  // Records what the traced call looked like (everything but the program and the modules).
  void record_call(const std::vector<Arg>& args);
  // Records a module of the compiled tree (kept alive by `module`).
  void record_module(std::shared_ptr<nn::Module> module, std::string path);
  // Records a parameter or buffer slot of a recorded module.
  void record_slot(SlotCheck check) { slots_.push_back(std::move(check)); }
  void record_frozen(FrozenCheck check) { frozen_.push_back(std::move(check)); }
  void record_capture_grad(CaptureGradCheck check) { capture_grads_.push_back(std::move(check)); }
  // True when a frozen capture changed since the trace: the entry can never pass again (versions
  // only grow, and the traced tensor is kept alive so that its address is not reused).
  bool frozen_stale() const;
  // True when at least one module was recorded and every recorded module is in eval mode.
  bool modules_in_eval() const;
  void set_program(sym::GuardProgram program) { program_ = std::move(program); }
  // The arguments the graph writes in place. With any, a call passes only when none of them
  // shares memory with another tensor argument: the trace took distinct tensors for independent
  // ones, so a write through one would not reach the other's reads (checked last).
  void record_written_arguments(std::vector<int32_t> args) { written_args_ = std::move(args); }
  // Two tensor arguments of the call that share memory (their byte ranges in one storage meet),
  // one of them written by the graph, the first such pair found; {-1, -1} when there is none or
  // the graph writes no argument.
  std::pair<int32_t, int32_t> shared_memory(const std::vector<Arg>& args) const;
  std::string written_list() const;  // "arg0, arg2"

  // Checks a call; `views` are the arguments as the guard program reads them.
  GuardFailure check(const std::vector<Arg>& args, std::span<const sym::ArgView> views) const;
  // "guard failed: <printed form>; expected ..., actual ..." for a failure of check().
  std::string explain(const std::vector<Arg>& args, std::span<const sym::ArgView> views,
                      GuardFailure f) const;
  // Every check, one per line (the guard program last).
  std::string to_string() const;

 private:
  std::vector<ArgKind> kinds_;
  std::vector<TensorCheck> tensors_;
  std::vector<std::pair<int32_t, Arg>> scalars_;
  std::vector<int32_t> alias_of_;  // per argument: the earlier argument holding the same tensor
  bool grad_enabled_ = true;
  detail::AutocastState autocast_;  // lathe::AutocastGuard's state at trace time
  std::vector<ModuleCheck> modules_;
  std::vector<SlotCheck> slots_;
  std::vector<FrozenCheck> frozen_;
  std::vector<CaptureGradCheck> capture_grads_;
  std::vector<std::shared_ptr<nn::Module>> keep_alive_;
  sym::GuardProgram program_;
  std::vector<int32_t> written_args_;
};

// The guard program's view of a call's arguments (tensors: sizes and strides; ints: value).
// Writes args.size() views into `out`.
void make_arg_views(const std::vector<Arg>& args, sym::ArgView* out);

}  // namespace lathe::detail
