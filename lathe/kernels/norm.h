// Row-wise kernels: softmax, log-softmax and layer norm over the innermost contiguous dim.
#pragma once

#include "lathe/core/tensor.h"

namespace lathe::kernels {

// out = softmax (or log_softmax) of each contiguous row of length R in x ([M, R] flat).
void softmax_rows(const Tensor& x, const Tensor& out, int64_t M, int64_t R, bool log);
// Normalizes each row of length R; weight/bias (length R) may be undefined.
void layer_norm_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                     int64_t M, int64_t R, double eps);

}  // namespace lathe::kernels
