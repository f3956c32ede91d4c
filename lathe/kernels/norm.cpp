#include "lathe/kernels/norm.h"

#include <cmath>

#include "lathe/core/threads.h"
#include "lathe/kernels/parallel_chunks.h"

namespace lathe::kernels {

namespace {
template <class T>
void softmax_impl(const Tensor& x, const Tensor& out, int64_t M, int64_t R, bool log) {
  const T* px = static_cast<const T*>(x.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  int threads = M * R >= 16384 && M > 1 ? num_threads() : 1;
  parallel_items(M, threads, [&](int64_t m) {
    const T* row = px + m * R;
    T* o = po + m * R;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t r = 0; r < R; ++r) mx = row[r] > mx ? row[r] : mx;
    if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf row: avoid inf - inf
    double s = 0;
    if (log) {
      for (int64_t r = 0; r < R; ++r) s += std::exp(row[r] - mx);
      T lse = static_cast<T>(std::log(s)) + mx;
      for (int64_t r = 0; r < R; ++r) o[r] = row[r] - lse;
    } else {
      for (int64_t r = 0; r < R; ++r) {
        T e = std::exp(row[r] - mx);
        o[r] = e;
        s += e;
      }
      T inv = static_cast<T>(1.0 / s);
      for (int64_t r = 0; r < R; ++r) o[r] *= inv;
    }
  });
}

// Mean and (biased) variance of a row, two passes. f64 accumulates serially; f32 in 16
// independent lanes (vectorized: a serial double chain costs ~4 cycles per element) that are
// summed in double, each lane adding at most R / 16 terms.
void row_moments(const double* row, int64_t R, double& mean, double& var) {
  double s = 0;
  for (int64_t r = 0; r < R; ++r) s += row[r];
  mean = s / static_cast<double>(R);
  double q = 0;
  for (int64_t r = 0; r < R; ++r) q += (row[r] - mean) * (row[r] - mean);
  var = q / static_cast<double>(R);
}

void row_moments(const float* row, int64_t R, double& mean, double& var) {
  constexpr int64_t L = 16;
  float lanes[L] = {};
  int64_t r = 0;
  for (; r + L <= R; r += L)
    for (int64_t l = 0; l < L; ++l) lanes[l] += row[r + l];
  double s = 0;
  for (int64_t l = 0; l < L; ++l) s += lanes[l];
  for (; r < R; ++r) s += row[r];
  mean = s / static_cast<double>(R);
  const float mu = static_cast<float>(mean);
  float sq[L] = {};
  for (r = 0; r + L <= R; r += L)
    for (int64_t l = 0; l < L; ++l) sq[l] += (row[r + l] - mu) * (row[r + l] - mu);
  double q = 0;
  for (int64_t l = 0; l < L; ++l) q += sq[l];
  for (; r < R; ++r) q += static_cast<double>(row[r] - mu) * (row[r] - mu);
  var = q / static_cast<double>(R);
}

template <class T>
void layer_norm_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                     int64_t M, int64_t R, double eps) {
  const T* px = static_cast<const T*>(x.raw_data());
  const T* pw = weight.defined() ? static_cast<const T*>(weight.raw_data()) : nullptr;
  const T* pb = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
  T* po = static_cast<T*>(out.raw_data());
  int threads = M * R >= 16384 && M > 1 ? num_threads() : 1;
  parallel_items(M, threads, [&](int64_t m) {
    const T* row = px + m * R;
    T* o = po + m * R;
    double mean = 0, var = 0;
    row_moments(row, R, mean, var);
    T rstd = static_cast<T>(1.0 / std::sqrt(var + eps));
    T mu = static_cast<T>(mean);
    for (int64_t r = 0; r < R; ++r) {
      T y = (row[r] - mu) * rstd;
      if (pw) y *= pw[r];
      if (pb) y += pb[r];
      o[r] = y;
    }
  });
}
}  // namespace

void softmax_rows(const Tensor& x, const Tensor& out, int64_t M, int64_t R, bool log) {
  LATHE_DISPATCH_FLOATING(x.dtype(), log ? "log_softmax" : "softmax",
                          [&] { softmax_impl<scalar_t>(x, out, M, R, log); });
}

void layer_norm_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                     int64_t M, int64_t R, double eps) {
  LATHE_DISPATCH_FLOATING(x.dtype(), "layer_norm",
                          [&] { layer_norm_impl<scalar_t>(x, weight, bias, out, M, R, eps); });
}

}  // namespace lathe::kernels
