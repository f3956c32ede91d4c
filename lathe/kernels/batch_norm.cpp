#include "lathe/kernels/batch_norm.h"

#include <cmath>

#include "lathe/core/threads.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/parallel_chunks.h"

namespace lathe::kernels {

ChannelLayout channel_layout(const Tensor& t) {
  const std::vector<int64_t> sizes = t.shape(), strides = t.int_strides();
  const int64_t dims = static_cast<int64_t>(sizes.size());
  const int64_t C = sizes[1];
  int64_t inner = 1;
  for (int64_t d = 2; d < dims; ++d) inner *= sizes[d];
  // Channels innermost: dim 1 has stride 1, the others row-major over C-element rows (size-1
  // dims may have any stride).
  bool innermost = C == 1 || strides[1] == 1;
  int64_t expect = C;
  for (int64_t d = dims - 1; d >= 0 && innermost; --d) {
    if (d == 1) continue;
    if (sizes[d] != 1 && strides[d] != expect) innermost = false;
    expect *= sizes[d];
  }
  if (innermost) return {sizes[0] * inner, C, 1};
  if (t.is_contiguous()) return {sizes[0], C, inner};
  return {};
}

Tensor channel_dense(const Tensor& x) {
  return channel_layout(x).channels > 0 ? x : x.contiguous();
}

Tensor with_strides_of(const Tensor& t, const Tensor& like) {
  if (t.int_strides() == like.int_strides()) return t;
  Tensor r = empty_strided(like.sizes(), like.strides(), t.dtype());
  copy(r, t);
  return r;
}

namespace {

constexpr int64_t kLanes = 8;         // independent accumulators along a channel plane
constexpr int64_t kRowBlock = 16384;  // elements per partial sum in the channels-innermost form

int threads_for(int64_t elements, int64_t work_items) {
  return elements >= kParallelGrain && work_items > 1 ? num_threads() : 1;
}

// sums[k * C + c] = sum over (o, i) of the k-th term of element (o, c, i), k < K. term(c, e, acc,
// stride) adds its K terms for channel c and flat element e into acc[0], acc[stride], ...
// Partial sums cover fixed pieces of the data (a block of rows; one channel plane) and are added
// in a fixed order, so the result does not depend on the thread count.
template <int K, class Term>
std::vector<double> channel_sums(const ChannelLayout& L, Term term) {
  const int64_t C = L.channels, numel = L.outer * C * L.inner;
  std::vector<double> sums(K * C, 0.0);
  if (L.inner == 1) {
    const int64_t rows = std::max<int64_t>(1, kRowBlock / std::max<int64_t>(C, 1));
    const int64_t blocks = (L.outer + rows - 1) / rows;
    std::vector<double> partial(blocks * K * C, 0.0);
    const int threads = threads_for(numel, blocks);
    parallel_items(blocks, threads, [&](int64_t b) {
      double* acc = partial.data() + b * K * C;
      const int64_t end = std::min(L.outer, (b + 1) * rows);
      for (int64_t o = b * rows; o < end; ++o) {
        const int64_t base = o * C;
        for (int64_t c = 0; c < C; ++c) term(c, base + c, acc + c, C);
      }
    });
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t j = 0; j < K * C; ++j) sums[j] += partial[b * K * C + j];
    return sums;
  }
  const int64_t planes = L.outer * C;
  std::vector<double> partial(planes * K, 0.0);
  const int threads = threads_for(numel, planes);
  parallel_items(planes, threads, [&](int64_t p) {
    const int64_t c = p % C, base = p * L.inner;
    double lanes[K * kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= L.inner; i += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) term(c, base + i + l, lanes + l, kLanes);
    for (; i < L.inner; ++i) term(c, base + i, lanes, kLanes);
    for (int k = 0; k < K; ++k) {
      double s = 0;
      for (int64_t l = 0; l < kLanes; ++l) s += lanes[k * kLanes + l];
      partial[p * K + k] = s;
    }
  });
  for (int64_t p = 0; p < planes; ++p)
    for (int k = 0; k < K; ++k) sums[k * C + p % C] += partial[p * K + k];
  return sums;
}

// out[e] = f(c, e) for every element (o, c, i).
template <class F>
void channel_map(const ChannelLayout& L, F f) {
  const int64_t C = L.channels, numel = L.outer * C * L.inner;
  if (L.inner == 1) {
    const int64_t rows = std::max<int64_t>(1, kRowBlock / std::max<int64_t>(C, 1));
    const int64_t blocks = (L.outer + rows - 1) / rows;
    const int threads = threads_for(numel, blocks);
    parallel_items(blocks, threads, [&](int64_t b) {
      const int64_t end = std::min(L.outer, (b + 1) * rows);
      for (int64_t o = b * rows; o < end; ++o)
        for (int64_t c = 0; c < C; ++c) f(c, o * C + c);
    });
    return;
  }
  const int64_t planes = L.outer * C;
  const int threads = threads_for(numel, planes);
  parallel_items(planes, threads, [&](int64_t p) {
    const int64_t c = p % C, base = p * L.inner;
    for (int64_t i = 0; i < L.inner; ++i) f(c, base + i);
  });
}

template <class T>
void moments_impl(const Tensor& x, const ChannelLayout& L, std::vector<double>& mean,
                  std::vector<double>& var) {
  const T* px = static_cast<const T*>(x.raw_data());
  const int64_t C = L.channels;
  const double n = static_cast<double>(L.outer * L.inner);
  std::vector<double> s = channel_sums<1>(
      L, [px](int64_t, int64_t e, double* acc, int64_t) { acc[0] += static_cast<double>(px[e]); });
  mean.resize(C);
  for (int64_t c = 0; c < C; ++c) mean[c] = s[c] / n;
  const double* pm = mean.data();
  std::vector<double> q = channel_sums<1>(L, [px, pm](int64_t c, int64_t e, double* acc, int64_t) {
    const double d = static_cast<double>(px[e]) - pm[c];
    acc[0] += d * d;
  });
  var.resize(C);
  for (int64_t c = 0; c < C; ++c) var[c] = q[c] / n;
}

template <class T>
void affine_impl(const Tensor& x, const ChannelLayout& L, const std::vector<double>& scale,
                 const std::vector<double>& shift, const Tensor& out) {
  const T* px = static_cast<const T*>(x.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  std::vector<T> s(scale.begin(), scale.end()), t(shift.begin(), shift.end());
  const T* ps = s.data();
  const T* pt = t.data();
  channel_map(L, [=](int64_t c, int64_t e) { po[e] = px[e] * ps[c] + pt[c]; });
}

template <class T>
void backward_impl(const Tensor& g, const Tensor& x, const ChannelLayout& L,
                   const std::vector<double>& mean, const std::vector<double>& rstd,
                   const std::vector<double>& weight, const Tensor& grad_x,
                   std::vector<double>& grad_weight, std::vector<double>& grad_bias) {
  const T* pg = static_cast<const T*>(g.raw_data());
  const T* px = static_cast<const T*>(x.raw_data());
  const int64_t C = L.channels;
  const double n = static_cast<double>(L.outer * L.inner);
  const double* pm = mean.data();
  // sum(g) and sum(g * (x - mean)) in one pass.
  std::vector<double> s =
      channel_sums<2>(L, [pg, px, pm](int64_t c, int64_t e, double* acc, int64_t stride) {
        const double gv = static_cast<double>(pg[e]);
        acc[0] += gv;
        acc[stride] += gv * (static_cast<double>(px[e]) - pm[c]);
      });
  grad_bias.assign(s.begin(), s.begin() + C);
  grad_weight.resize(C);
  // grad_x = a * g + b * x + d per channel, with a = w * rstd, b = -a * rstd^2 * sum(g xc) / n,
  // d = -a * sum(g) / n - b * mean (xc = x - mean).
  std::vector<T> a(C), b(C), d(C);
  for (int64_t c = 0; c < C; ++c) {
    const double gsum = s[c], gxc = s[C + c];
    grad_weight[c] = gxc * rstd[c];
    const double w = weight.empty() ? 1.0 : weight[c];
    const double ac = w * rstd[c];
    const double bc = -ac * rstd[c] * rstd[c] * gxc / n;
    a[c] = static_cast<T>(ac);
    b[c] = static_cast<T>(bc);
    d[c] = static_cast<T>(-ac * gsum / n - bc * mean[c]);
  }
  T* po = static_cast<T*>(grad_x.raw_data());
  const T *pa = a.data(), *pb = b.data(), *pd = d.data();
  channel_map(L, [=](int64_t c, int64_t e) { po[e] = pg[e] * pa[c] + px[e] * pb[c] + pd[c]; });
}

}  // namespace

void channel_moments(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  const ChannelLayout L = channel_layout(x);
  LATHE_CHECK(L.channels > 0,
              "[batch_norm] channel_moments needs a dense NCHW or NHWC tensor, got ",
              x.shape_string());
  LATHE_DISPATCH_FLOATING(x.dtype(), "batch_norm",
                          [&] { moments_impl<scalar_t>(x, L, mean, var); });
}

void channel_affine(const Tensor& x, const std::vector<double>& scale,
                    const std::vector<double>& shift, const Tensor& out) {
  const ChannelLayout L = channel_layout(x);
  LATHE_CHECK(L.channels > 0 && x.int_strides() == out.int_strides(),
              "[batch_norm] channel_affine needs x and out in one dense layout, got ",
              x.shape_string(), " and ", out.shape_string());
  LATHE_DISPATCH_FLOATING(x.dtype(), "batch_norm",
                          [&] { affine_impl<scalar_t>(x, L, scale, shift, out); });
}

void batch_norm_train_backward(const Tensor& g, const Tensor& x, const std::vector<double>& mean,
                               const std::vector<double>& rstd, const std::vector<double>& weight,
                               const Tensor& grad_x, std::vector<double>& grad_weight,
                               std::vector<double>& grad_bias) {
  const ChannelLayout L = channel_layout(x);
  LATHE_CHECK(
      L.channels > 0 && g.int_strides() == x.int_strides() &&
          grad_x.int_strides() == x.int_strides(),
      "[batch_norm_backward] needs grad_out, input and grad_input in one dense layout, got ",
      g.shape_string(), ", ", x.shape_string(), " and ", grad_x.shape_string());
  LATHE_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&] {
    backward_impl<scalar_t>(g, x, L, mean, rstd, weight, grad_x, grad_weight, grad_bias);
  });
}

}  // namespace lathe::kernels
