// Shape helpers shared by shape rules: broadcasting and dim wrapping.
#pragma once

#include <string>

#include "lathe/core/tensor.h"
#include "lathe/ops/op_def.h"

namespace lathe {

// numpy broadcasting of two shapes; throws "[op] shapes [..] and [..] do not broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Wraps a possibly negative dim into [0, ndim); throws naming the op when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Sorted unique wrapped dims; empty `dims` means all dims.
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op);
// Metadata for a fresh (non-view) result.
TensorMeta result_meta(Shape sizes, DType dtype, Device device = Device::cpu());
// Allocates an output with `sizes` and dtype, following the memory order of the first
// operand that has exactly these sizes and is dense (so channels-last stays channels-last).
Tensor alloc_output(const Shape& sizes, DType dtype, TensorList like);

}  // namespace lathe
