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

// The same on oneDNN's 8-channel blocked layout (nChw8c), for f32 only: x is [N, C/8, H, W, 8]
// and out [N, O/8, OH, OW, 8], both contiguous (C and O multiples of 8); w and bias as above.
// With post.sum, out holds the residual (in the same layout) on entry.
void conv2d_forward_blocked8(const Tensor& x, const Tensor& w, const Tensor& bias,
                             const Conv2dParams& p, const Tensor& out,
                             const ConvPostOps& post = {});

}  // namespace lathe::detail
