// Shape helpers shared by shape rules: broadcasting, dim wrapping, and the layout rule every mode
// asks for fresh results.
#pragma once

#include <string>

#include "lathe/core/tensor.h"
#include "lathe/ops/op_def.h"

namespace lathe {

// numpy broadcasting of two shapes; throws "[op] shapes [..] and [..] do not broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Throws "[op] source f32[3] does not broadcast to destination f32[2,4]" unless src's sizes
// broadcast to dst's (copy_, copy).
void check_broadcasts_to(const Tensor& src, const Tensor& dst, const char* op);
// Wraps a possibly negative dim into [0, ndim); throws naming the op when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Sorted unique wrapped dims; empty `dims` means all dims.
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op);
// Metadata for a fresh (non-view) result.
TensorMeta result_meta(Shape sizes, DType dtype, Device device = Device::cpu());
// The layout rule: the strides of a fresh (non-view) result with `sizes`. The first operand with
// exactly these sizes decides: row-major when it is row-major or not dense, else its dim order in
// memory (channels-last, transposed, permuted), so layouts flow through pointwise ops. Eager
// allocation (alloc_output), the tracer's fake results and lazy pending tensors all ask this one
// function. Symbolic sizes and strides are read at their trace-time values (SymInt::hint, no
// guard: the argument layout guards make the decision hold); the returned strides are products
// of `sizes`.
Shape output_strides(const Shape& sizes, TensorList like);
// Strides for `sizes` in the dim order of a tensor with (like_sizes, like_strides): row-major
// when that tensor is row-major or not non-overlapping and dense (the rule of empty_like).
Shape strides_like(const Shape& sizes, const Shape& like_sizes, const Shape& like_strides);
// Allocates an output with `sizes` and dtype laid out by output_strides(sizes, like).
Tensor alloc_output(const Shape& sizes, DType dtype, TensorList like);

}  // namespace lathe
