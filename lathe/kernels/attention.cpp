#include "lathe/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lathe/core/threads.h"
#include "lathe/kernels/vec_exp2.h"

namespace lathe::kernels {
namespace {

// Query rows per block: the packed K and V of a head are streamed once per block, so a wide block
// keeps that traffic low at long sequences; 32 rows of scores and accumulators stay in L1.
constexpr int64_t kRows = 32;
constexpr int64_t kKeys = 64;  // keys per block (the online softmax's step)
constexpr int64_t kLane = 16;  // columns per register tile (two AVX2 vectors)
constexpr float kLog2e = 1.4426950408889634f;

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// c[4][16] (+)= a[4][n] * b[n][16]: a rows `lda` apart, b rows `ldb` apart, c rows `ldc` apart.
// The 4 x 16 tile stays in registers across the reduction; kAccumulate false starts it at zero.
template <bool kAccumulate>
inline void tile_4x16(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n, float* c,
                      int64_t ldc) {
#ifdef LATHE_HAVE_VEC_EXP2
  __m256 c00, c01, c10, c11, c20, c21, c30, c31;
  if constexpr (kAccumulate) {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm256_setzero_ps();
  }
  for (int64_t e = 0; e < n; ++e) {
    const __m256 b0 = _mm256_loadu_ps(b + e * ldb), b1 = _mm256_loadu_ps(b + e * ldb + 8);
    __m256 x = _mm256_broadcast_ss(a + e);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a + lda + e);
    c10 = _mm256_fmadd_ps(x, b0, c10);
    c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a + 2 * lda + e);
    c20 = _mm256_fmadd_ps(x, b0, c20);
    c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a + 3 * lda + e);
    c30 = _mm256_fmadd_ps(x, b0, c30);
    c31 = _mm256_fmadd_ps(x, b1, c31);
  }
  _mm256_storeu_ps(c, c00);
  _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10);
  _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20);
  _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30);
  _mm256_storeu_ps(c + 3 * ldc + 8, c31);
#else
  for (int r = 0; r < 4; ++r) {
    float acc[kLane];
    for (int j = 0; j < kLane; ++j) acc[j] = kAccumulate ? c[r * ldc + j] : 0.0f;
    for (int64_t e = 0; e < n; ++e)
      for (int j = 0; j < kLane; ++j) acc[j] += a[r * lda + e] * b[e * ldb + j];
    for (int j = 0; j < kLane; ++j) c[r * ldc + j] = acc[j];
  }
#endif
}

// c[rows][cols] (+)= a[rows][n] * b[n][cols] (rows a multiple of 4, cols of kLane; row-major).
template <bool kAccumulate>
inline void block_gemm(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n,
                       float* c, int64_t ldc, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r += 4)
    for (int64_t j = 0; j < cols; j += kLane)
      tile_4x16<kAccumulate>(a + r * lda, lda, b + j, ldb, n, c + r * ldc + j, ldc);
}

// s[0..n) = 2^(s - m) in place; returns their sum. m is finite; n a multiple of kLane.
inline float exp2_row(float* s, int64_t n, float m) {
#ifdef LATHE_HAVE_VEC_EXP2
  const __m256 mv = _mm256_set1_ps(m);
  __m256 t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __m256 p0 = exp2_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    const __m256 p1 = exp2_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j + 8), mv));
    _mm256_storeu_ps(s + j, p0);
    _mm256_storeu_ps(s + j + 8, p1);
    t0 = _mm256_add_ps(t0, p0);
    t1 = _mm256_add_ps(t1, p1);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(t0, t1));
  float total = 0;
  for (float x : lanes) total += x;
  return total;
#else
  float total = 0;
  for (int64_t j = 0; j < n; ++j) total += (s[j] = exp2_scalar(s[j] - m));
  return total;
#endif
}

// The largest of s[0..n) (n a multiple of kLane).
inline float row_max(const float* s, int64_t n) {
#ifdef LATHE_HAVE_VEC_EXP2
  __m256 m0 = _mm256_loadu_ps(s), m1 = _mm256_loadu_ps(s + 8);
  for (int64_t j = 16; j < n; j += 16) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(s + j));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(s + j + 8));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
  float m = lanes[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, lanes[i]);
  return m;
#else
  float m = s[0];
  for (int64_t j = 1; j < n; ++j) m = std::max(m, s[j]);
  return m;
#endif
}

// x[0..n) *= f (n a multiple of kLane).
inline void scale_row(float* x, int64_t n, float f) {
#ifdef LATHE_HAVE_VEC_EXP2
  const __m256 fv = _mm256_set1_ps(f);
  for (int64_t c = 0; c < n; c += 8)
    _mm256_storeu_ps(x + c, _mm256_mul_ps(_mm256_loadu_ps(x + c), fv));
#else
  for (int64_t c = 0; c < n; ++c) x[c] *= f;
#endif
}

struct Dims {
  int64_t B, H, L, S, E, Ev;
};

// Element (b, h, i, j) of a 4-d strided f32 tensor.
struct View4 {
  const float* p = nullptr;
  int64_t s[4] = {0, 0, 0, 0};
  explicit View4(const Tensor& t) {
    if (!t.defined()) return;
    p = static_cast<const float*>(t.raw_data());
    for (int d = 0; d < 4; ++d) s[d] = t.strides()[d].expect_int();
  }
  const float* at(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return p + b * s[0] + h * s[1] + i * s[2] + j * s[3];
  }
};

// Per-thread scratch: K packed as [S/kKeys][E][kKeys] (each key block contiguous, so the score
// tiles read it at a short stride), V as [Sp][Evp], one query block and its scores/accumulators.
struct Scratch {
  std::vector<float> buf;
  float *kp, *vp, *qb, *sc, *acc, *mx, *sum;
  void reserve(const Dims& d) {
    const int64_t Sp = round_up(d.S, kKeys), Evp = round_up(d.Ev, kLane), E = d.E;
    const size_t need = static_cast<size_t>(E * Sp + Sp * Evp + kRows * E + kRows * kKeys +
                                            kRows * Evp + 2 * kRows + 16);
    if (buf.size() < need) buf.resize(need);
    kp = buf.data();
    vp = kp + E * Sp;
    qb = vp + Sp * Evp;
    sc = qb + kRows * E;
    acc = sc + kRows * kKeys;
    mx = acc + kRows * Evp;
    sum = mx + kRows;
  }
};

void pack_kv(const Dims& d, int64_t b, int64_t h, const View4& k, const View4& v, Scratch& w) {
  const int64_t Sp = round_up(d.S, kKeys), Evp = round_up(d.Ev, kLane), E = d.E;
  for (int64_t j0 = 0; j0 < Sp; j0 += kKeys) {
    float* blk = w.kp + j0 * E;  // [E][kKeys]
    const int64_t keys = std::min(kKeys, d.S - j0);
    for (int64_t jj = 0; jj < kKeys; ++jj) {
      if (jj < keys) {
        const float* row = k.at(b, h, j0 + jj, 0);
        for (int64_t e = 0; e < E; ++e) blk[e * kKeys + jj] = row[e * k.s[3]];
      } else {
        for (int64_t e = 0; e < E; ++e) blk[e * kKeys + jj] = 0.0f;
      }
    }
  }
  for (int64_t j = 0; j < Sp; ++j) {
    float* row = w.vp + j * Evp;
    int64_t c = 0;
    if (j < d.S) {
      const float* src = v.at(b, h, j, 0);
      if (v.s[3] == 1)
        std::copy(src, src + d.Ev, row), c = d.Ev;
      else
        for (; c < d.Ev; ++c) row[c] = src[c * v.s[3]];
    }
    std::fill(row + c, row + Evp, 0.0f);
  }
}

// Query rows [i0, i0 + rows) of one (batch, head), K and V already packed. Scores are kept in
// base 2 (scaled by scale * log2 e) so the softmax needs 2^x only.
void attend_rows(const Dims& d, int64_t b, int64_t h, int64_t i0, int64_t rows, const View4& q,
                 const View4& mask, float scale, float* out, const int64_t* out_strides,
                 Scratch& w) {
  const int64_t Evp = round_up(d.Ev, kLane), E = d.E, rows4 = round_up(rows, 4);
  const float qscale = scale * kLog2e;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows4; ++r) {
    float* dst = w.qb + r * E;
    if (r < rows) {
      const float* src = q.at(b, h, i0 + r, 0);
      for (int64_t e = 0; e < E; ++e) dst[e] = src[e * q.s[3]] * qscale;
    } else {
      std::fill(dst, dst + E, 0.0f);
    }
  }
  std::fill(w.acc, w.acc + rows4 * Evp, 0.0f);
  std::fill(w.mx, w.mx + rows4, neg_inf);
  std::fill(w.sum, w.sum + rows4, 0.0f);
  for (int64_t j0 = 0; j0 < d.S; j0 += kKeys) {
    const int64_t keys = std::min(kKeys, d.S - j0);
    // The last block's columns up to the next multiple of kLane only: at vit's 197 keys, 208
    // columns of work instead of 256.
    const int64_t cols = round_up(keys, kLane);
    block_gemm<false>(w.qb, E, w.kp + j0 * E, kKeys, E, w.sc, kKeys, rows4, cols);
    for (int64_t r = 0; r < rows4; ++r) {
      float* s = w.sc + r * kKeys;
      if (r >= rows) {  // padding rows: no probabilities, so they add nothing
        std::fill(s, s + cols, 0.0f);
        continue;
      }
      if (mask.p) {
        const float* mrow = mask.at(b, h, i0 + r, j0);
        if (mask.s[3] == 1)
          for (int64_t j = 0; j < keys; ++j) s[j] += mrow[j] * kLog2e;
        else
          for (int64_t j = 0; j < keys; ++j) s[j] += mrow[j * mask.s[3]] * kLog2e;
      }
      std::fill(s + keys, s + cols, neg_inf);
      const float m_new = std::max(w.mx[r], row_max(s, cols));
      if (m_new == neg_inf) {  // every score so far is -inf: nothing to add yet
        std::fill(s, s + cols, 0.0f);
        continue;
      }
      const float corr = exp2_scalar(w.mx[r] - m_new);
      w.sum[r] = w.sum[r] * corr + exp2_row(s, cols, m_new);
      w.mx[r] = m_new;
      if (corr != 1.0f) scale_row(w.acc + r * Evp, Evp, corr);
    }
    block_gemm<true>(w.sc, kKeys, w.vp + j0 * Evp, Evp, cols, w.acc, Evp, rows4, Evp);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = 1.0f / w.sum[r];
    float* o = out + b * out_strides[0] + h * out_strides[1] + (i0 + r) * out_strides[2];
    for (int64_t c = 0; c < d.Ev; ++c) o[c * out_strides[3]] = w.acc[r * Evp + c] * inv;
  }
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                       float scale, const Tensor& out) {
  const Dims d{q.size(0).expect_int(), q.size(1).expect_int(), q.size(2).expect_int(),
               k.size(2).expect_int(), q.size(3).expect_int(), v.size(3).expect_int()};
  const View4 qv(q), kv(k), vv(v), mv(mask);
  int64_t os[4];
  for (int i = 0; i < 4; ++i) os[i] = out.strides()[i].expect_int();
  float* po = static_cast<float*>(out.raw_data());
  const int64_t heads = d.B * d.H;
  if (heads == 0 || d.L == 0) return;
  // Few heads on many threads: split each head's queries into chunks (each packs K and V again,
  // which is cheap next to a chunk's work as long as it spans a few query blocks).
  const int64_t nthreads = num_threads();
  const int64_t blocks = (d.L + kRows - 1) / kRows;
  const int64_t chunks = heads >= nthreads ? 1 : std::min(blocks, (nthreads + heads - 1) / heads);
  const int64_t rows_per_chunk = (blocks + chunks - 1) / chunks * kRows;
  const int64_t tasks = heads * chunks;
  const int threads = static_cast<int>(std::min(nthreads, tasks));
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    Scratch w;
    w.reserve(d);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t head = t / chunks, chunk = t % chunks;
      const int64_t b = head / d.H, h = head % d.H;
      const int64_t lo = chunk * rows_per_chunk, hi = std::min(d.L, lo + rows_per_chunk);
      if (lo >= hi) continue;
      pack_kv(d, b, h, kv, vv, w);
      for (int64_t i0 = lo; i0 < hi; i0 += kRows)
        attend_rows(d, b, h, i0, std::min(kRows, hi - i0), qv, mv, scale, po, os, w);
    }
  }
}

}  // namespace lathe::kernels
