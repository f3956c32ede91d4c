#include "lathe/kernels/backward_loops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lathe/core/threads.h"

namespace lathe::detail {
namespace {

template <class T>
void conv_bwd_input(const Tensor& go, const Tensor& w, const Conv2dParams& p, const Tensor& gi) {
  auto gos = go.shape(), ws = w.shape(), gis = gi.shape();
  const int64_t N = gis[0], C = gis[1], H = gis[2], W = gis[3];
  const int64_t O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3], OH = gos[2], OW = gos[3];
  const int64_t Og = O / p.groups;
  const T* gop = static_cast<const T*>(go.raw_data());
  const T* wp = static_cast<const T*>(w.raw_data());
  T* gip = static_cast<T*>(gi.raw_data());
  const int nt = lathe::num_threads();
  // One thread per (n, input channel): it owns that plane of grad_input.
#pragma omp parallel for collapse(2) num_threads(nt) schedule(dynamic, 1)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t ci = 0; ci < C; ++ci) {
      const int64_t g = ci / Cg, c = ci % Cg;
      T* plane = gip + (n * C + ci) * H * W;
      std::fill(plane, plane + H * W, T(0));
      for (int64_t o = g * Og; o < (g + 1) * Og; ++o) {
        const T* gop_o = gop + (n * O + o) * OH * OW;
        const T* wk = wp + (o * Cg + c) * KH * KW;
        for (int64_t kh = 0; kh < KH; ++kh) {
          for (int64_t kw = 0; kw < KW; ++kw) {
            const T wv = wk[kh * KW + kw];
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                plane[ih * W + iw] += gop_o[oh * OW + ow] * wv;
              }
            }
          }
        }
      }
    }
  }
}

template <class T>
void conv_bwd_weight(const Tensor& go, const Tensor& x, const Conv2dParams& p, const Tensor& gw) {
  auto gos = go.shape(), xs = x.shape(), ws = gw.shape();
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3], OH = gos[2], OW = gos[3];
  const int64_t Og = O / p.groups;
  const T* gop = static_cast<const T*>(go.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  T* gwp = static_cast<T*>(gw.raw_data());
  const int nt = lathe::num_threads();
#pragma omp parallel for collapse(2) num_threads(nt) schedule(dynamic, 1)
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t c = 0; c < Cg; ++c) {
      const int64_t ci = (o / Og) * Cg + c;
      for (int64_t kh = 0; kh < KH; ++kh) {
        for (int64_t kw = 0; kw < KW; ++kw) {
          T acc = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T* gop_o = gop + (n * O + o) * OH * OW;
            const T* xc = xp + (n * C + ci) * H * W;
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                acc += gop_o[oh * OW + ow] * xc[ih * W + iw];
              }
            }
          }
          gwp[((o * Cg + c) * KH + kh) * KW + kw] = acc;
        }
      }
    }
  }
}

// The window of output index i along one dim, as the forward loops (dnnl_pool.cpp) take it:
// [start, end) from the left padding on, and the count_include_pad divisor size.
void sliding_window(int64_t i, int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d,
                    int64_t* start, int64_t* end, int64_t* size) {
  const int64_t st = i * s - pad;
  const int64_t en = std::min(st + d * (k - 1) + 1, in + pad);
  *size = en - st;
  *start = st;
  *end = std::min(en, in);
}

template <class T, bool is_max>
void pool_bwd(const Tensor& go, const Tensor& x, const Pool2dParams& p, const Tensor& gi) {
  auto gos = go.shape(), gis = gi.shape();
  const int64_t N = gis[0], C = gis[1], H = gis[2], W = gis[3], OH = gos[2], OW = gos[3];
  const T* gop = static_cast<const T*>(go.raw_data());
  const T* xp = is_max ? static_cast<const T*>(x.raw_data()) : nullptr;
  T* gip = static_cast<T*>(gi.raw_data());
  const int nt = lathe::num_threads();
#pragma omp parallel for collapse(2) num_threads(nt) schedule(dynamic, 1)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t plane_off = (n * C + c) * H * W;
      T* plane = gip + plane_off;
      std::fill(plane, plane + H * W, T(0));
      const T* gop_c = gop + (n * C + c) * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t h0, h1, hsize;
        sliding_window(oh, H, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], &h0, &h1,
                       &hsize);
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t w0, w1, wsize;
          sliding_window(ow, W, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], &w0, &w1,
                         &wsize);
          const T g = gop_c[oh * OW + ow];
          if constexpr (is_max) {
            const T* xc = xp + plane_off;
            T best = -std::numeric_limits<T>::infinity();
            int64_t at = -1;
            for (int64_t ih = h0; ih < h1; ih += p.dilation[0]) {
              if (ih < 0) continue;
              for (int64_t iw = w0; iw < w1; iw += p.dilation[1]) {
                if (iw < 0) continue;
                const T v = xc[ih * W + iw];
                if (at < 0 || v > best || std::isnan(v)) {
                  best = v;
                  at = ih * W + iw;
                }
              }
            }
            if (at >= 0) plane[at] += g;
          } else {
            const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h1, H);
            const int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w1, W);
            const int64_t div = p.count_include_pad ? hsize * wsize : (he - hs) * (we - ws);
            const T share = g / static_cast<T>(div);
            for (int64_t ih = hs; ih < he; ++ih)
              for (int64_t iw = ws; iw < we; ++iw) plane[ih * W + iw] += share;
          }
        }
      }
    }
  }
}

template <class T>
void adaptive_bwd(const Tensor& go, const Tensor& gi) {
  auto gos = go.shape(), gis = gi.shape();
  const int64_t N = gis[0], C = gis[1], H = gis[2], W = gis[3], OH = gos[2], OW = gos[3];
  const T* gop = static_cast<const T*>(go.raw_data());
  T* gip = static_cast<T*>(gi.raw_data());
  const int nt = lathe::num_threads();
#pragma omp parallel for collapse(2) num_threads(nt) schedule(dynamic, 1)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      T* plane = gip + (n * C + c) * H * W;
      std::fill(plane, plane + H * W, T(0));
      const T* gop_c = gop + (n * C + c) * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t hs = (oh * H) / OH, he = ((oh + 1) * H + OH - 1) / OH;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t ws = (ow * W) / OW, we = ((ow + 1) * W + OW - 1) / OW;
          const T share = gop_c[oh * OW + ow] / static_cast<T>((he - hs) * (we - ws));
          for (int64_t ih = hs; ih < he; ++ih)
            for (int64_t iw = ws; iw < we; ++iw) plane[ih * W + iw] += share;
        }
      }
    }
  }
}

template <class T>
void embedding_bwd(const Tensor& go, const Tensor& idx, const Tensor& gw) {
  const int64_t num = gw.shape()[0], dim = gw.shape()[1], n = idx.numel();
  const T* gop = static_cast<const T*>(go.raw_data());
  const int64_t* ip = static_cast<const int64_t*>(idx.raw_data());
  T* gwp = static_cast<T*>(gw.raw_data());
  std::fill(gwp, gwp + num * dim, T(0));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t row = ip[r];
    LATHE_CHECK(row >= 0 && row < num, "[embedding_backward] index ", row, " is out of range for ",
                num, " rows");
    for (int64_t j = 0; j < dim; ++j) gwp[row * dim + j] += gop[r * dim + j];
  }
}

}  // namespace

void conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Conv2dParams& p,
                           const Tensor& grad_input) {
  LATHE_DISPATCH_FLOATING(grad_input.dtype(), "conv2d_backward_input",
                          [&] { conv_bwd_input<scalar_t>(grad_out, weight, p, grad_input); });
}

void conv2d_backward_weight(const Tensor& grad_out, const Tensor& x, const Conv2dParams& p,
                            const Tensor& grad_weight) {
  LATHE_DISPATCH_FLOATING(grad_weight.dtype(), "conv2d_backward_weight",
                          [&] { conv_bwd_weight<scalar_t>(grad_out, x, p, grad_weight); });
}

void max_pool2d_backward(const Tensor& grad_out, const Tensor& x, const Pool2dParams& p,
                         const Tensor& grad_input) {
  LATHE_DISPATCH_FLOATING(grad_input.dtype(), "max_pool2d_backward",
                          [&] { pool_bwd<scalar_t, true>(grad_out, x, p, grad_input); });
}

void avg_pool2d_backward(const Tensor& grad_out, const Pool2dParams& p, const Tensor& grad_input) {
  LATHE_DISPATCH_FLOATING(grad_input.dtype(), "avg_pool2d_backward",
                          [&] { pool_bwd<scalar_t, false>(grad_out, Tensor(), p, grad_input); });
}

void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_input) {
  LATHE_DISPATCH_FLOATING(grad_input.dtype(), "adaptive_avg_pool2d_backward",
                          [&] { adaptive_bwd<scalar_t>(grad_out, grad_input); });
}

void embedding_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_weight) {
  LATHE_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward",
                          [&] { embedding_bwd<scalar_t>(grad_out, indices, grad_weight); });
}

}  // namespace lathe::detail
