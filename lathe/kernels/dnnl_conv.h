// 2-d convolution: oneDNN for f32 (channels-last activations, weights reordered once into the
// primitive's preferred layout and cached), a direct loop for f64 (reference accuracy).
#pragma once

#include <cstdint>

#include "lathe/core/tensor.h"
#include "lathe/kernels/post_ops.h"

namespace lathe::detail {

struct Conv2dParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};  // PyTorch convention (1 = dense)
  int64_t groups = 1;
};

using ConvPostOps = PostOps;

// out = conv2d(x, w) + bias, then `post`. x [N,C,H,W] in any layout, w [O,C/groups,KH,KW], bias [O]
// or undefined; out is preallocated [N,O,OH,OW] (any dense layout; channels-last is the fast one).
// Shapes must already be validated.
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                    const Tensor& out, const ConvPostOps& post = {});

}  // namespace lathe::detail
