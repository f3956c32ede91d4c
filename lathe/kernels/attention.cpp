#include "lathe/kernels/attention.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lathe/core/threads.h"

namespace lathe::kernels {
namespace {

constexpr int64_t kRows = 8;   // query rows per block (two 4-row register tiles)
constexpr int64_t kKeys = 64;  // keys per block (the online softmax's step)
constexpr int64_t kLane = 16;  // columns per register tile (two AVX2 vectors)

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// acc[r][0..16) += sum_e a[r][e] * b[e][0..16) for 4 rows: a rows `lda` apart, b rows `ldb` apart.
// The 4 x 16 tile stays in registers across the reduction.
inline void tile_4x16(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n, float* c,
                      int64_t ldc) {
  __m256 c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
  __m256 c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
  __m256 c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
  __m256 c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
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
}

// c[kRows][cols] += a[kRows][n] * b[n][cols] (cols a multiple of kLane; all row-major).
inline void block_gemm(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n,
                       float* c, int64_t ldc, int64_t cols) {
  for (int64_t r = 0; r < kRows; r += 4)
    for (int64_t j = 0; j < cols; j += kLane)
      tile_4x16(a + r * lda, lda, b + j, ldb, n, c + r * ldc + j, ldc);
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

// One (batch, head): packs K transposed and V (zero padded), then runs the query blocks.
void attend_head(const Dims& d, int64_t b, int64_t h, const View4& q, const View4& k,
                 const View4& v, const View4& mask, float scale, float* out,
                 const int64_t* out_strides, std::vector<float>& buf) {
  const int64_t Sp = round_up(d.S, kKeys), Evp = round_up(d.Ev, kLane), E = d.E;
  const size_t need =
      static_cast<size_t>(E * Sp + Sp * Evp + kRows * E + kRows * kKeys + kRows * Evp + 2 * kRows);
  if (buf.size() < need) buf.resize(need);
  float* kt = buf.data();           // [E][Sp]
  float* vp = kt + E * Sp;          // [Sp][Evp]
  float* qb = vp + Sp * Evp;        // [kRows][E]
  float* sc = qb + kRows * E;       // [kRows][kKeys] scores, then probabilities
  float* acc = sc + kRows * kKeys;  // [kRows][Evp]
  float* mx = acc + kRows * Evp;    // [kRows] running max
  float* sum = mx + kRows;          // [kRows] running sum of exp
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t j = 0; j < d.S; ++j) kt[e * Sp + j] = *k.at(b, h, j, e);
    std::fill(kt + e * Sp + d.S, kt + (e + 1) * Sp, 0.0f);
  }
  for (int64_t j = 0; j < Sp; ++j) {
    float* row = vp + j * Evp;
    if (j < d.S) {
      for (int64_t c = 0; c < d.Ev; ++c) row[c] = *v.at(b, h, j, c);
      std::fill(row + d.Ev, row + Evp, 0.0f);
    } else {
      std::fill(row, row + Evp, 0.0f);
    }
  }
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t i0 = 0; i0 < d.L; i0 += kRows) {
    const int64_t rows = std::min(kRows, d.L - i0);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t e = 0; e < E; ++e) qb[r * E + e] = r < rows ? *q.at(b, h, i0 + r, e) : 0.0f;
    std::fill(acc, acc + kRows * Evp, 0.0f);
    std::fill(mx, mx + kRows, neg_inf);
    std::fill(sum, sum + kRows, 0.0f);
    for (int64_t j0 = 0; j0 < d.S; j0 += kKeys) {
      const int64_t keys = std::min(kKeys, d.S - j0);
      std::fill(sc, sc + kRows * kKeys, 0.0f);
      block_gemm(qb, E, kt + j0, Sp, E, sc, kKeys, kKeys);
      for (int64_t r = 0; r < rows; ++r) {
        float* s = sc + r * kKeys;
        float m = neg_inf;
        if (mask.p) {
          const float* mrow = mask.at(b, h, i0 + r, j0);
          for (int64_t j = 0; j < keys; ++j) {
            s[j] = s[j] * scale + mrow[j * mask.s[3]];
            m = std::max(m, s[j]);
          }
        } else {
          for (int64_t j = 0; j < keys; ++j) {
            s[j] *= scale;
            m = std::max(m, s[j]);
          }
        }
        const float m_new = std::max(mx[r], m);
        if (m_new == neg_inf) {  // every score so far is -inf: nothing to add yet
          std::fill(s, s + kKeys, 0.0f);
          continue;
        }
        const float corr = std::exp(mx[r] - m_new);
        float total = 0;
        for (int64_t j = 0; j < keys; ++j) {
          s[j] = std::exp(s[j] - m_new);
          total += s[j];
        }
        std::fill(s + keys, s + kKeys, 0.0f);
        sum[r] = sum[r] * corr + total;
        mx[r] = m_new;
        if (corr != 1.0f)
          for (int64_t c = 0; c < Evp; ++c) acc[r * Evp + c] *= corr;
      }
      for (int64_t r = rows; r < kRows; ++r) std::fill(sc + r * kKeys, sc + (r + 1) * kKeys, 0.f);
      block_gemm(sc, kKeys, vp + j0 * Evp, Evp, kKeys, acc, Evp, Evp);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float inv = 1.0f / sum[r];
      float* o = out + b * out_strides[0] + h * out_strides[1] + (i0 + r) * out_strides[2];
      for (int64_t c = 0; c < d.Ev; ++c) o[c * out_strides[3]] = acc[r * Evp + c] * inv;
    }
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
  const int64_t tasks = d.B * d.H;
  if (tasks == 0 || d.L == 0) return;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), tasks));
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<float> buf;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t)
      attend_head(d, t / d.H, t % d.H, qv, kv, vv, mv, scale, po, os, buf);
  }
}

}  // namespace lathe::kernels
