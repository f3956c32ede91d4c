// OpDef: the one definition of an op (schema, shape rule, eager kernel, vjp slot), and the
// dispatch point every op call goes through.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/attrs.h"

namespace lathe {

// Metadata of an op result. Views also carry strides and an offset relative to input 0.
struct TensorMeta {
  Shape sizes;
  DType dtype = DType::f32;
  Device device;
  bool is_view = false;  // output aliases input 0 (view ops)
  Shape strides;         // set for views
  int64_t offset = 0;    // set for views (elements, absolute into input 0's storage)
};

using TensorList = std::span<const Tensor>;

// Validates the inputs and computes output metadata; throws lathe::Error naming the op, the
// shapes and what is wrong. Runs the same way on real, fake and lazy tensors.
using ShapeRule = std::function<std::vector<TensorMeta>(TensorList, const Attrs&)>;
// Computes the outputs on CPU from real inputs and the metadata the shape rule produced.
using EagerKernel =
    std::function<std::vector<Tensor>(TensorList, const Attrs&, const std::vector<TensorMeta>&)>;
// Vector-Jacobian product, written with ops (filled in by the autograd issue).
using VjpRule = std::function<std::vector<Tensor>(TensorList inputs, TensorList outputs,
                                                  TensorList grad_outputs, const Attrs&)>;

struct OpDef {
  std::string name;
  int num_inputs = -1;  // -1: variadic
  ShapeRule shape;
  EagerKernel kernel;
  VjpRule vjp;
  // Writes into input 0 in place (add_, batch-norm running stats on inputs 3 and 4, ...).
  std::vector<int> mutated_inputs;
};

// Looks ops up by name; all built-in ops are registered on first use.
class OpRegistry {
 public:
  static OpRegistry& global();
  // Registers op (throws if the name exists); returns the stored definition.
  const OpDef& add(OpDef op);
  // The op named `name`, or throws "[ops] unknown op 'name'".
  const OpDef& get(const std::string& name) const;
  const OpDef* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  OpRegistry() = default;
  std::vector<std::unique_ptr<OpDef>> ops_;
};

// The one dispatch point: validates with the shape rule and runs the op in the current mode
// (eager today; trace and lazy recording plug in here).
std::vector<Tensor> dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs);
// Convenience for single-output ops.
Tensor dispatch1(const OpDef& op, TensorList inputs, const Attrs& attrs);

// Interceptor for non-eager modes: when set for the current thread, dispatch calls it instead
// of the eager kernel (after running the shape rule).
using DispatchHook = std::vector<Tensor> (*)(const OpDef&, TensorList, const Attrs&,
                                             std::vector<TensorMeta>&&);
void set_dispatch_hook(DispatchHook hook);
DispatchHook dispatch_hook();

// Process-wide handler for ops with an input on the lazy device (installed by lathe/lazy before
// the first lazy tensor exists). Dispatch checks the inputs' devices first: mixing devices is an
// error ("[add] inputs are on different devices: cpu and lazy"), except that a 0-dim CPU tensor
// may join lazy tensors (as PyTorch allows CPU scalars with device tensors). A thread-local hook
// (tracing) still comes first.
void set_lazy_dispatch_hook(DispatchHook hook);

}  // namespace lathe
