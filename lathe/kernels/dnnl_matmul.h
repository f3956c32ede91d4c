// Matrix products: oneDNN matmul for f32 (operands described by their strides, so transposed
// views need no copy; linear weights reordered once and cached), direct loops for f64.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/kernels/post_ops.h"

namespace lathe::detail {

// out[batch..., M, N] = a[batch..., M, K] @ b[batch..., K, N]. a, b and out have the same rank
// (>= 2); each batch dim of a and b equals out's or is 1 (broadcast). out is preallocated.
void matmul_forward(const Tensor& a, const Tensor& b, const Tensor& out);

// out[M, N] = x[M, K] @ w[N, K]^T + bias[N] (bias may be undefined), then `post` (with
// post.sum, out holds the addend before the call). out is preallocated.
// With `bf16` (the cpu backend's precision pass) an f32 x and w are rounded to bf16 (w once,
// cached with its reordered layout) and multiplied on oneDNN's bf16 kernels with f32
// accumulation, bias, post-ops and out in f32; only where dnnl_bf16_native(), else f32.
void linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                    const PostOps& post = {}, bool bf16 = false);

}  // namespace lathe::detail
