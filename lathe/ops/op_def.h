// OpDef: the one definition of an op (schema, shape rule, eager kernel, vjp slot), and the
// dispatch point every op call goes through.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lathe/core/dispatch_mode.h"
#include "lathe/core/tensor.h"
#include "lathe/ops/attrs.h"

namespace lathe {

// Metadata of an op result. Views also carry strides and an offset relative to input 0.
struct TensorMeta {
  Shape sizes;
  DType dtype = DType::f32;
  Device device;
  bool is_view = false;  // output aliases input 0 (views, and in-place ops' results)
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
// The same computation writing into outputs the caller allocated: sizes and dtype from the
// metadata, strides as the allocating kernel gives them (what a first run of EagerKernel
// returned), offset 0. Optional: backends use it to run a graph in a preplanned arena. For
// pointwise ops an output may be the very buffer of a same-shaped, same-strided input.
using OutKernel = std::function<void(TensorList inputs, const Attrs&,
                                     const std::vector<TensorMeta>&, TensorList outputs)>;
// Vector-Jacobian product, written with ops (lathe/ops/vjp_*.cpp): one gradient per input
// (undefined for inputs that get none, or whose needs_grad entry is false). Inputs and outputs
// the op does not declare it reads (OpDef::vjp_reads_input / vjp_reads_outputs) arrive as
// tensors with their sizes and dtype but no data. Every grad_output is defined (zeros where no
// gradient reached the output) unless the op sets vjp_takes_undefined_grads.
using VjpRule = std::function<std::vector<Tensor>(TensorList inputs, TensorList outputs,
                                                  TensorList grad_outputs, const Attrs&,
                                                  const std::vector<bool>& needs_grad)>;

// What kind of computation an op is; passes and backends read it instead of lists of op names.
enum class OpCategory : uint8_t {
  unknown,        // not declared (ops registered outside lathe/ops, e.g. by tests)
  pointwise,      // elementwise over broadcast inputs (unary, binary, compare, where)
  reduction,      // reduces dims (sum, mean, amax, argmax, var, ...)
  view,           // output 0 is a view of input 0 (shares its storage)
  in_place,       // writes into an input and returns it
  random,         // draws from a generator: two calls with the same inputs differ (dropout)
  copy,           // fresh copies and data movement (clone, cat, as_strided_scatter, ...)
  normalization,  // softmax, layer_norm, batch_norm
  contraction,    // conv2d, linear, matmul
  pooling,        // max / avg / adaptive pooling
  fused,          // fusions made by backend passes (conv2d_fused, linear_fused)
  other,          // anything else with its own kernel (embedding, nll_loss)
};
const char* category_name(OpCategory c);

// The type of an attribute value.
enum class AttrType : uint8_t {
  boolean,   // bool
  integer,   // int64
  real,      // double (an int64 is accepted too)
  int_list,  // Shape (ints or symbolic sizes)
  sym_int,   // int64, or a one-element Shape holding a symbolic value (slice bounds)
  string,
  dtype,
};
const char* attr_type_name(AttrType t);

// One attribute of an op's schema.
struct AttrSpec {
  const char* name;
  AttrType type;
  bool required = true;
};

// An activation that a fused conv / matmul can apply as a post-op (oneDNN eltwise post-ops).
struct PostOp {
  enum class Kind : uint8_t { relu, clip, gelu_erf, gelu_tanh };
  Kind kind = Kind::relu;
  double lo = 0, hi = 0;  // bounds for clip
};
// The name the fused ops' "act" attributes use: "relu", "clip", "gelu", "gelu_tanh".
const char* post_op_name(PostOp::Kind k);

struct OpDef {
  std::string name;
  int num_inputs = -1;  // -1: variadic
  ShapeRule shape;
  EagerKernel kernel;
  VjpRule vjp;
  // Inputs the op may write in place (add_, copy_: input 0; batch_norm: running_mean and
  // running_var, inputs 1 and 2). `mutates_when` narrows it by the attributes.
  std::vector<int> mutated_inputs;

  // ---- properties (filled in for every built-in op; tests check it) ----
  OpCategory category = OpCategory::unknown;
  // For each output, the input it aliases (shares storage with), or -1. Views: {0}; in-place
  // ops: {0} (they return the mutated input itself). Empty: no output aliases an input.
  std::vector<int> output_aliases = {};
  // When set, the inputs in mutated_inputs are written only when it returns true for the
  // node's attributes (batch_norm writes its running stats only when training).
  std::function<bool(const Attrs&)> mutates_when = nullptr;
  // The attributes the op takes. Unset: unchecked (ops registered by tests). Checked by
  // ir::Graph::add_node and ir::Graph::verify (see attr_error).
  std::optional<std::vector<AttrSpec>> attr_schema = std::nullopt;
  // For an op that writes in place, the op computing the same without writing: it takes the
  // same inputs and attributes and returns the op's outputs that alias no input, followed by
  // the new value of each written input (in mutated_inputs order). add_ -> add; batch_norm ->
  // batch_norm_functional (y, new running_mean, new running_var).
  const char* functional_variant = nullptr;
  // The typed form of a call's attributes (see ParsedAttrs), for ops whose rule and kernel read
  // many attributes; attached by attach_parsed_attrs.
  std::function<std::shared_ptr<const ParsedAttrs>(const Attrs&)> parse_attrs = nullptr;
  // True when the eager kernel reads and writes bf16 / f16 itself (copies, casts, fills). For
  // any other op, run_eager_kernel hands the kernel f32 copies of 16-bit inputs and rounds its
  // results once to the dtypes the shape rule gave (views never compute).
  bool native_low_precision = false;
  // When set, decides per call instead (true: this call's kernel reads the 16-bit inputs itself):
  // conv2d, linear and matmul hand bf16 to oneDNN where the CPU runs it natively.
  std::function<bool(TensorList inputs)> native_low_precision_for = nullptr;

  // ---- autograd ----
  // The values autograd saves for the vjp: input i is saved when vjp_reads_input(i, attrs) is
  // true (unset: every input), the outputs when vjp_reads_outputs. Only saved values are checked
  // against in-place changes, so `y = x + 1; y.relu_()` stays legal as in PyTorch.
  std::function<bool(int input, const Attrs&)> vjp_reads_input = nullptr;
  bool vjp_reads_outputs = false;
  // When set, the grad_outputs no gradient reached arrive undefined instead of as zeros: the
  // compiled backward (AOT autograd) then leaves undefined the gradients of the inputs that only
  // those outputs reach, as eager's separate nodes would.
  bool vjp_takes_undefined_grads = false;

  // True when a call with these attributes writes into input `input`.
  bool mutates(const Attrs& attrs, int input) const;
  // True when a call with these attributes writes into any input.
  bool mutates_any(const Attrs& attrs) const;
  // The input output `output` aliases, or -1.
  int aliased_input(int output) const;
  // Empty when attrs fit attr_schema (or there is none); else what is wrong: "attribute
  // 'stride' must be an int list, got float", a missing required or an unknown attribute.
  std::string attr_error(const Attrs& attrs) const;
};

// Attaches op.parse_attrs(attrs) to attrs when the op has a parser and attrs have no parsed
// form yet. Attributes the parser rejects stay unparsed: the rule reports them when it runs.
void attach_parsed_attrs(const OpDef& op, Attrs& attrs);

// Runs op's eager kernel on CPU tensors with the metadata its shape rule gave: dispatch's last
// step, and what a backend calls for an op it has no kernel of its own for. A kernel that is not
// native_low_precision computes bf16 / f16 ops in f32 (lathe/ops/low_precision.cpp).
std::vector<Tensor> run_eager_kernel(const OpDef& op, TensorList inputs, const Attrs& attrs,
                                     const std::vector<TensorMeta>& metas);
// True when run_eager_kernel would compute this call in f32 and round (so a backend must not
// hand the op's destination-passing kernel 16-bit buffers).
bool runs_widened(const OpDef& op, TensorList inputs, const std::vector<TensorMeta>& metas);

// Looks ops up by name; all built-in ops are registered on first use.
class OpRegistry {
 public:
  static OpRegistry& global();
  // Registers op (throws if the name exists); returns the stored definition. `out`, when set,
  // is the op's kernel in destination-passing form (see OutKernel): not part of the OpDef, a
  // backend's kernel table picks it up through out_kernels().
  const OpDef& add(OpDef op, OutKernel out = nullptr);
  // The destination-passing kernels given to add(), in registration order.
  const std::vector<std::pair<const OpDef*, OutKernel>>& out_kernels() const { return outs_; }
  // The op named `name`, or throws "[ops] unknown op 'name'".
  const OpDef& get(const std::string& name) const;
  const OpDef* find(const std::string& name) const;
  std::vector<std::string> names() const;
  // For registration code only (the vjp rules attach to the ops registered before them).
  OpDef& get_mutable(const std::string& name);

 private:
  OpRegistry() = default;
  std::vector<std::unique_ptr<OpDef>> ops_;
  std::vector<std::pair<const OpDef*, OutKernel>> outs_;
};

// The one dispatch point: validates with the shape rule and runs the op in the current mode.
// The top of this thread's dispatch-mode stack (lathe/core/dispatch_mode.h; the tracer) comes
// first; else an op with an input on a device other than the CPU runs through that device's
// registered dispatch (lathe/core/device_registry.h; the lazy device records it); else the
// eager kernel runs. Inputs must share one device ("[add] inputs are on different devices: cpu
// and lazy"), except that a 0-dim CPU tensor may join device tensors (as PyTorch allows CPU
// scalars with device tensors).
std::vector<Tensor> dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs);
// Convenience for single-output ops.
Tensor dispatch1(const OpDef& op, TensorList inputs, const Attrs& attrs);

}  // namespace lathe
