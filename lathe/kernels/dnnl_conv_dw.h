// A 1x1 convolution and the 3x3 depthwise convolution that reads it, run as one oneDNN primitive
// (the depthwise post-op, post_ops::append_dw): the expanded tensor between them is made a few
// rows at a time and stays in cache. Measured on oneDNN 2.6 (bench/bench_dw_fusion.cpp): a real
// fused kernel exists only on nChw16c (AVX-512), mostly at batch 8; elsewhere oneDNN runs the two
// convolutions one after the other ("ref_fused_convolution", no gain), and its nhwc fused kernel
// returns wrong results, so only the blocked layouts are taken here.
#pragma once

#include <cstdint>
#include <string>

#include "lathe/core/tensor.h"
#include "lathe/kernels/post_ops.h"

namespace lathe::detail {

// out = act2(dwconv3x3(act(conv1x1(x, w, bias)), dw_weight, dw_bias)), the depthwise one with
// stride dw_stride (1 or 2) and padding 1. x [N, C/B, H, W, B] and out [N, M/B, OH, OW, B]
// contiguous f32 with the same block B (8 or 16), w [M, C, 1, 1], dw_weight [M, 1, 3, 3], the
// biases [M] or undefined. post.act applies to the 1x1 result, post.act2 to the depthwise one
// (post.sum must be false). Shapes must already be validated.
void conv2d_1x1_dw_forward_blocked(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   const Tensor& dw_weight, const Tensor& dw_bias,
                                   int64_t dw_stride, const PostOps& post, const Tensor& out);

// The oneDNN implementation that would run that fusion for these shapes at the current thread
// count (e.g. "jit_1x1:avx512_core"), or "" when oneDNN has none. A name starting with "ref"
// is the two convolutions one after the other. The answer is cached per shape.
std::string dnnl_dw_fusion_impl(int64_t n, int64_t c, int64_t m, int64_t h, int64_t w,
                                int64_t block, int64_t dw_stride, bool bias, bool dw_bias,
                                const PostOps& post);

}  // namespace lathe::detail
