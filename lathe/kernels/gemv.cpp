#include "lathe/kernels/gemv.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include <algorithm>

#include "lathe/core/threads.h"

namespace lathe::detail {
namespace {

#if defined(__AVX2__) && defined(__FMA__)
float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

// R weight rows starting at row n against the M rows of x: sums[m * R + r] = x[m] . w[n + r].
// Two accumulators per (m, r) pair along K hide the FMA latency; the order of the sum is fixed.
template <int M, int R>
void dot_rows(const float* x, int64_t xs, const float* w, int64_t ws, int64_t K, float* sums) {
  int64_t k = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc[M * R];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (; k + 8 <= K; k += 8) {
    __m256 xv[M];
    for (int m = 0; m < M; ++m) xv[m] = _mm256_loadu_ps(x + m * xs + k);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_loadu_ps(w + r * ws + k);
      for (int m = 0; m < M; ++m) acc[m * R + r] = _mm256_fmadd_ps(xv[m], wv, acc[m * R + r]);
    }
  }
  for (int i = 0; i < M * R; ++i) sums[i] = hsum(acc[i]);
#else
  for (int i = 0; i < M * R; ++i) sums[i] = 0;
#endif
  for (; k < K; ++k)
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < R; ++r) sums[m * R + r] += x[m * xs + k] * w[r * ws + k];
}

template <int M>
void gemv_rows(const float* x, int64_t xs, const float* w, int64_t ws, const float* bias,
               int64_t bs, float* out, int64_t os0, int64_t os1, int64_t K, int64_t N,
               const PostOps& post) {
  // Up to 8 accumulator pairs in the 16 AVX2 registers: 4 weight rows per step for M <= 2.
  constexpr int R = M <= 2 ? 4 : 2;
  const int64_t blocks = (N + R - 1) / R;
  auto finish = [&](int64_t m, int64_t n, float v) {
    if (bias) v += bias[n * bs];
    float& o = out[m * os0 + n * os1];
    v = apply_post_act(v, post.act, post.act_lo, post.act_hi);
    if (post.sum) v += o;
    o = apply_post_act(v, post.act2, post.act2_lo, post.act2_hi);
  };
  const int nt = int64_t{M} * N * K >= (int64_t{1} << 16) ? lathe::num_threads() : 1;
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n0 = b * R;
    float sums[M * R];
    if (n0 + R <= N) {
      dot_rows<M, R>(x, xs, w + n0 * ws, ws, K, sums);
      for (int m = 0; m < M; ++m)
        for (int r = 0; r < R; ++r) finish(m, n0 + r, sums[m * R + r]);
    } else {
      for (int64_t n = n0; n < N; ++n) {
        dot_rows<M, 1>(x, xs, w + n * ws, ws, K, sums);
        for (int m = 0; m < M; ++m) finish(m, n, sums[m]);
      }
    }
  }
}

}  // namespace

bool linear_gemv(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                 const PostOps& post) {
  if (x.dtype() != DType::f32 || w.dtype() != DType::f32 || out.dtype() != DType::f32) return false;
  if (x.dim() != 2 || w.dim() != 2 || out.dim() != 2) return false;
  const int64_t M = x.shape()[0], K = x.shape()[1], N = w.shape()[0];
  if (M < 1 || M > kGemvMaxRows || K < 8 || N < 1) return false;
  if (N * K * 4 < kGemvMinWeightBytes) return false;
  if (bias.defined() && bias.dtype() != DType::f32) return false;
  const auto xt = x.int_strides(), wt = w.int_strides(), ot = out.int_strides();
  if ((K > 1 && (xt[1] != 1 || wt[1] != 1)) || wt[0] < K || (M > 1 && xt[0] < K)) return false;
  const float* xp = static_cast<const float*>(x.raw_data());
  const float* wp = static_cast<const float*>(w.raw_data());
  const float* bp = bias.defined() ? static_cast<const float*>(bias.raw_data()) : nullptr;
  const int64_t bs = bias.defined() ? bias.int_strides()[0] : 0;
  float* op = static_cast<float*>(out.raw_data());
  switch (M) {
    case 1:
      gemv_rows<1>(xp, xt[0], wp, wt[0], bp, bs, op, ot[0], ot[1], K, N, post);
      break;
    case 2:
      gemv_rows<2>(xp, xt[0], wp, wt[0], bp, bs, op, ot[0], ot[1], K, N, post);
      break;
    case 3:
      gemv_rows<3>(xp, xt[0], wp, wt[0], bp, bs, op, ot[0], ot[1], K, N, post);
      break;
    default:
      gemv_rows<4>(xp, xt[0], wp, wt[0], bp, bs, op, ot[0], ot[1], K, N, post);
      break;
  }
  return true;
}

}  // namespace lathe::detail
