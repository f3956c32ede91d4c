// Reductions over a set of dims: sum, mean, max, min, argmax, argmin, var.
#pragma once

#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::kernels {

enum class ReduceKind { sum, mean, amax, amin, argmax, argmin, var, std };

// Reduces x over `dims` (wrapped, sorted, unique; all dims when empty is not allowed here:
// pass every dim). The result has x's sizes without `dims`, or with 1s there when keepdim.
// out_dtype is the dtype of the result (i64 for arg reductions).
Tensor reduce(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, ReduceKind kind,
              DType out_dtype, int64_t correction = 0);

}  // namespace lathe::kernels
