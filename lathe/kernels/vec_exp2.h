// 2^x for eight f32 lanes at once (AVX2 + FMA), for the softmax inside fused kernels, where the
// library exp called once per score dominated the run time. Relative error below 2e-7 (a degree-7
// polynomial on [-0.5, 0.5] after splitting off the integer part); inputs below -126 (and -inf)
// give exactly 0, so masked scores contribute nothing; inputs of 128 and more (and +inf) give
// +inf; NaN gives NaN. Without AVX2 only the scalar form exists.
#pragma once

#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LATHE_HAVE_VEC_EXP2 1
#endif

namespace lathe::kernels {

// The scalar form (the reference the vector one is tested against, and the fallback).
inline float exp2_scalar(float x) { return x < -126.0f ? 0.0f : std::exp2(x); }

#ifdef LATHE_HAVE_VEC_EXP2
inline __m256 exp2_avx2(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-126.0f);
  // Zero below -126 (and for -inf); NaN stays NaN: the unordered compare keeps it, and min/max
  // return their second operand when one is NaN. Up to 128, where 2^n no longer fits a float's
  // exponent field: n = 128 is built as 2^127 * 2 (+inf from 128 on, as the overflow gives).
  const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_NLT_UQ);
  x = _mm256_min_ps(_mm256_set1_ps(128.0f), _mm256_max_ps(lo, x));
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(x, n);  // in [-0.5, 0.5]
  // 2^f = e^(f ln 2): Taylor coefficients (ln 2)^k / k!, truncation error < 6e-9 on the interval.
  __m256 p = _mm256_set1_ps(1.5252733804059841e-05f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393381608e-04f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076284772e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108664821580e-02f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650695910071e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718055994531e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  // 2^n as a float: n + 127 in the exponent field (n is in [-126, 127]).
  const __m256 top = _mm256_cmp_ps(n, _mm256_set1_ps(127.0f), _CMP_GT_OQ);
  const __m256 n127 = _mm256_min_ps(n, _mm256_set1_ps(127.0f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n127), _mm256_set1_epi32(127)), 23);
  const __m256 twice = _mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(2.0f), top);
  return _mm256_and_ps(_mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), twice), keep);
}
#endif

}  // namespace lathe::kernels
