// Registration entry points, one per op family; OpRegistry::global() calls them all once.
#pragma once

#include "lathe/core/tensor_methods.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/ops/op_def.h"

namespace lathe::detail {

void register_view_ops(OpRegistry& r);         // view_ops.cpp
void register_copy_ops(OpRegistry& r);         // copy_ops.cpp
void register_elementwise_ops(OpRegistry& r);  // elementwise_ops.cpp
void register_reduction_ops(OpRegistry& r);    // reduction_ops.cpp
void register_shape_ops(OpRegistry& r);        // shape_ops.cpp (cat, stack)
void register_nn_ops(OpRegistry& r);           // nn_ops.cpp (softmax, norms, dropout, ...)
void register_dnnl_ops(OpRegistry& r);         // dnnl_ops.cpp (conv, matmul, linear, pooling)
void register_fused_ops(OpRegistry& r);        // fused_ops.cpp (conv2d_fused)
void register_functional_ops(OpRegistry& r);   // functional_ops.cpp (copy, fill, scatter)
void register_attention_ops(OpRegistry& r);    // attention_ops.cpp (sdpa_fused)
void register_backward_ops(OpRegistry& r);     // backward_ops.cpp (conv / pool backward, ...)
void register_vjps(OpRegistry& r);             // vjp_*.cpp: attaches OpDef::vjp (last)

// The functions behind Tensor's op members (core/tensor_methods.h), one setter per family;
// tensor_methods.cpp registers the table with core.
void set_view_functions(TensorOpFunctions& f);      // view_ops.cpp
void set_copy_functions(TensorOpFunctions& f);      // copy_ops.cpp
void set_autograd_functions(TensorOpFunctions& f);  // autograd.cpp

// An OpDef with its category and attribute schema (other properties are set on the result).
inline OpDef define_op(const char* name, int num_inputs, ShapeRule shape, EagerKernel kernel,
                       OpCategory category, std::vector<AttrSpec> attrs) {
  OpDef op;
  op.name = name;
  op.num_inputs = num_inputs;
  op.shape = std::move(shape);
  op.kernel = std::move(kernel);
  op.category = category;
  op.attr_schema = std::move(attrs);
  return op;
}
// A required / optional attribute of a schema.
inline AttrSpec required(const char* name, AttrType t) { return AttrSpec{name, t, true}; }
inline AttrSpec optional(const char* name, AttrType t) { return AttrSpec{name, t, false}; }

// stride / padding / dilation / groups of a conv2d (or conv2d_fused) call, validated as pairs:
// from the parsed form when attached, else by name.
Conv2dParams conv_params(const Attrs& a);  // dnnl_ops.cpp
// The optional "precision" attribute of a contraction (conv2d, linear and their fused forms):
// true for "bf16" (operands rounded to bf16, f32 accumulation and output: the cpu backend's
// precision pass), false when absent or "f32"; throws naming the op for anything else.
bool precision_bf16(const Attrs& a, const char* op);  // dnnl_ops.cpp
// conv2d's parsed attributes; conv2d_fused's extend them, so conv2d's rule reads those too.
struct Conv2dAttrs : ParsedAttrs {
  Conv2dParams params;
};
std::shared_ptr<const ParsedAttrs> parse_conv2d_attrs(const Attrs& a);  // dnnl_ops.cpp
// kernel / stride / padding / dilation / ceil_mode / count_include_pad of a pooling call.
struct Pool2dParams;
Pool2dParams pool2d_params(const Attrs& a, const char* op, bool has_dilation);  // dnnl_ops.cpp
// The attribute schema of conv2d (conv2d_fused extends it).
std::vector<AttrSpec> conv2d_attrs();  // dnnl_ops.cpp

// Looks up a registered op once and caches the pointer (for the free functions).
#define LATHE_OP(name_literal)                                                         \
  ([]() -> const ::lathe::OpDef& {                                                     \
    static const ::lathe::OpDef& op = ::lathe::OpRegistry::global().get(name_literal); \
    return op;                                                                         \
  }())

}  // namespace lathe::detail
