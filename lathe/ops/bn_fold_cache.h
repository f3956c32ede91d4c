// Batch norm folded into a convolution (conv2d_fused's eager kernel): the folded weight and
// bias, computed in f64 and cached against the six tensors (the weight's storage, offset and
// version, the exact bytes of the five per-channel vectors), so an in-place update refolds.
#pragma once

#include <utility>

#include "lathe/core/tensor.h"

namespace lathe::detail {

// ts: weight, bias (may be undefined), running mean, running var, gamma, beta.
std::pair<Tensor, Tensor> folded_weight_bias(const Tensor* ts, double eps);

}  // namespace lathe::detail
