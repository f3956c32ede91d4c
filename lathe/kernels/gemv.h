// Matrix-vector products for linear layers with a few rows (batch-1 inference): the weight is
// read once, straight from its row-major [N, K] storage, at the machine's memory bandwidth.
// oneDNN's matmul, which linear_forward uses otherwise, packs the weight for GEMM and reads it
// at about 60% of the bandwidth a streaming loop reaches when M is 1 (alexnet's classifier:
// 234 MB of weights per call; docs/benchmarks.md, "Session 9").
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/kernels/post_ops.h"

namespace lathe::detail {

// The largest M linear_gemv takes.
inline constexpr int64_t kGemvMaxRows = 4;

// out[M, N] = post(x[M, K] @ w[N, K]^T + bias[N]) when the shapes suit a streaming GEMV:
// f32, 1 <= M <= kGemvMaxRows, rows of x and w contiguous (unit stride along K), and a weight
// large enough (at least kGemvMinWeightBytes) that reading it dominates. Returns false (and
// writes nothing) otherwise. Each output is one thread's sum in a fixed order, so results do
// not depend on the thread count.
bool linear_gemv(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                 const PostOps& post);

// Below this weight size oneDNN's packed-weight GEMM stays in cache and is as fast.
inline constexpr int64_t kGemvMinWeightBytes = int64_t{1} << 20;

}  // namespace lathe::detail
