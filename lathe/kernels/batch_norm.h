// Batch-norm kernels: per-channel statistics, the per-channel affine map, and the training
// gradient, each a few passes over memory instead of one op per term.
//
// Operands are dense with the channels in dim 1, in one of two memory orders: row-major (NCHW:
// the channel planes of each sample) or channels-innermost (NHWC, and any [N, C]). The operands
// of one call share their strides; channel_layout says whether a tensor fits.
#pragma once

#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::kernels {

// A tensor's element (o, c, i) lies at (o * C + c) * inner + i: NCHW is [N, C, H*W],
// channels-last NHWC is [N*H*W, C, 1].
struct ChannelLayout {
  int64_t outer = 0, channels = 0, inner = 0;
};
// The layout of t (dim >= 2, dim 1 the channels), or channels == 0 when t is neither row-major
// nor dense with the channels innermost.
ChannelLayout channel_layout(const Tensor& t);
// x itself when channel_layout fits it, else a row-major copy.
Tensor channel_dense(const Tensor& x);
// t itself when it has like's strides, else a copy of t with them (same sizes).
Tensor with_strides_of(const Tensor& t, const Tensor& like);

// Per-channel mean and biased variance over every dim but 1, accumulated in double (two passes:
// the mean, then the centered squares). Deterministic: partial sums are taken over fixed blocks
// of the data and added in order, whatever the thread count.
void channel_moments(const Tensor& x, std::vector<double>& mean, std::vector<double>& var);

// out = x * scale[c] + shift[c]; x and out share their layout.
void channel_affine(const Tensor& x, const std::vector<double>& scale,
                    const std::vector<double>& shift, const Tensor& out);

// The training batch-norm gradient. With xhat = (x - mean) * rstd and y = xhat * w + b:
// grad_bias[c] = sum(g), grad_weight[c] = sum(g * xhat), and
// grad_x = w * rstd * (g - mean(g) - xhat * mean(g * xhat)), written into grad_x.
// weight may be empty (w = 1). g, x and grad_x share their layout.
void batch_norm_train_backward(const Tensor& g, const Tensor& x, const std::vector<double>& mean,
                               const std::vector<double>& rstd, const std::vector<double>& weight,
                               const Tensor& grad_x, std::vector<double>& grad_weight,
                               std::vector<double>& grad_bias);

}  // namespace lathe::kernels
