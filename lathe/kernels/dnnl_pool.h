// 2-d pooling: oneDNN pooling for f32 where it expresses PyTorch's semantics exactly, direct
// loops elsewhere (f64, avg_pool2d windows clipped by ceil_mode, non-divisible adaptive sizes).
#pragma once

#include <cstdint>

#include "lathe/core/tensor.h"

namespace lathe::detail {

struct Pool2dParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};  // PyTorch convention (1 = dense)
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg only
};

// x [N,C,H,W] in any layout; out preallocated [N,C,OH,OW] with PyTorch's output size. Shapes
// must already be validated.
void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& out);
void avg_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& out);
// PyTorch's adaptive windows: start = floor(i*in/out), end = ceil((i+1)*in/out).
void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& out);

// Max pooling on oneDNN's channel-blocked layouts (the cpu backend's blocked regions): x is a
// contiguous f32 [N, C/B, H, W, B] and out [N, C/B, OH, OW, B] with the same block B (8 or 16).
void max_pool2d_forward_blocked(const Tensor& x, const Pool2dParams& p, const Tensor& out);

}  // namespace lathe::detail
