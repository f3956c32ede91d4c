#include "lathe/kernels/dnnl_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_common.h"

namespace lathe::detail {
namespace {

using dnnl::memory;

enum class PoolKind { max, avg };

// Right padding that makes oneDNN produce exactly `out` windows (ceil_mode adds some; floor
// mode can leave the last rows unused, which oneDNN expresses with less right padding).
int64_t right_padding(int64_t in, int64_t out, int64_t k, int64_t s, int64_t pl, int64_t d) {
  int64_t dk = d * (k - 1) + 1;
  return std::max<int64_t>(0, (out - 1) * s + dk - in - pl);
}

// A oneDNN inference pooling primitive (throws dnnl::error when oneDNN rejects it); `pr` is the
// right padding (right_padding).
std::shared_ptr<DnnlPrimitive> make_pool(dnnl::algorithm algo, const memory::desc& src_md,
                                         const memory::desc& dst_md, const Pool2dParams& p,
                                         const int64_t pr[2]) {
  dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, algo, src_md, dst_md,
                                   {p.stride[0], p.stride[1]}, {p.kernel[0], p.kernel[1]},
                                   {p.dilation[0] - 1, p.dilation[1] - 1},
                                   {p.padding[0], p.padding[1]}, {pr[0], pr[1]});
  dnnl::pooling_v2_forward::primitive_desc pd(d, dnnl_default_attr(), dnnl_engine());
  auto r = std::make_shared<DnnlPrimitive>();
  r->pd = pd;
  r->prim = dnnl::pooling_v2_forward(pd);
  r->impl = pd.impl_info_str();
  return r;
}

// Whether n floats hold a NaN. oneDNN's max pooling skips NaN (its vector max returns the other
// operand) where PyTorch propagates it: such inputs take the direct loop.
bool any_nan(const float* p, int64_t n) {
  int found = 0;
  const int nt = n >= 65536 ? lathe::num_threads() : 1;
#pragma omp parallel for reduction(| : found) num_threads(nt) if (nt > 1)
  for (int64_t i = 0; i < n; ++i) found |= p[i] != p[i];
  return found != 0;
}

// Runs oneDNN pooling; returns false when oneDNN rejects the configuration (or, for max pooling,
// when the input holds a NaN, see any_nan).
bool pool_dnnl(const Tensor& x_in, const Pool2dParams& p, dnnl::algorithm algo, const Tensor& out) {
  // Read the input in the output's layout (no copy when they agree, as the shape rule makes
  // them); a tensor that is both row-major and channels-last counts as channels-last when the
  // other side is channels-last only, so src and dst descriptors agree.
  const bool cl = out.is_channels_last() &&
                  (!out.is_contiguous() || (x_in.is_channels_last() && !x_in.is_contiguous()));
  Tensor x = cl ? to_channels_last_copy(x_in) : to_contiguous(x_in);
  if (algo == dnnl::algorithm::pooling_max &&
      any_nan(static_cast<const float*>(x.raw_data()), x.numel()))
    return false;
  auto xs = x.shape(), os = out.shape();
  int64_t pr[2];
  for (int i = 0; i < 2; ++i)
    pr[i] =
        right_padding(xs[2 + i], os[2 + i], p.kernel[i], p.stride[i], p.padding[i], p.dilation[i]);
  memory::desc src_md = dnnl_md(x, cl), dst_md = dnnl_md(out, cl);
  DnnlKey key;
  key.add(4).add(static_cast<int64_t>(algo)).add(xs).add(x.int_strides()).add(out.int_strides());
  for (int i = 0; i < 2; ++i)
    key.add(p.kernel[i]).add(p.stride[i]).add(p.padding[i]).add(pr[i]).add(p.dilation[i]);
  key.add(dnnl_prepare_threads());
  auto prim = dnnl_cached_primitive(key, [&]() -> std::shared_ptr<DnnlPrimitive> {
    try {
      return make_pool(algo, src_md, dst_md, p, pr);
    } catch (const dnnl::error&) {
      return nullptr;
    }
  });
  if (!prim) return false;
  DnnlArgs(*prim)
      .add(DNNL_ARG_SRC, x.raw_data(), [&] { return src_md; })
      .add(DNNL_ARG_DST, out.raw_data(), [&] { return dst_md; })
      .run();
  return true;
}

// Direct loop over output elements. `window(i, in, out, k, s, pad, &start, &end, &size)` gives
// the input range of output index i along one dim and PyTorch's divisor contribution.
template <class T, PoolKind kind, class Window>
void pool_direct(const Tensor& x, const Tensor& out, bool count_include_pad, int64_t dil_h,
                 int64_t dil_w, Window window_h, Window window_w) {
  auto xs = x.shape(), xt = x.int_strides(), os = out.shape(), ot = out.int_strides();
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], OH = os[2], OW = os[3];
  const T* xp = static_cast<const T*>(x.raw_data());
  T* op = static_cast<T*>(out.raw_data());
  const int nt = lathe::num_threads();
#pragma omp parallel for collapse(2) num_threads(nt)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const T* xb = xp + n * xt[0] + c * xt[1];
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t h0, h1, hsize;
        window_h(oh, H, OH, &h0, &h1, &hsize);
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t w0, w1, wsize;
          window_w(ow, W, OW, &w0, &w1, &wsize);
          T r;
          if constexpr (kind == PoolKind::max) {
            r = -std::numeric_limits<T>::infinity();
            for (int64_t ih = h0; ih < h1; ih += dil_h) {
              if (ih < 0) continue;
              for (int64_t iw = w0; iw < w1; iw += dil_w) {
                if (iw < 0) continue;
                T v = xb[ih * xt[2] + iw * xt[3]];
                if (v > r || std::isnan(v)) r = v;
              }
            }
          } else {
            T sum = 0;
            int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h1, H);
            int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w1, W);
            for (int64_t ih = hs; ih < he; ++ih)
              for (int64_t iw = ws; iw < we; ++iw) sum += xb[ih * xt[2] + iw * xt[3]];
            int64_t div = count_include_pad ? hsize * wsize : (he - hs) * (we - ws);
            r = sum / static_cast<T>(div);
          }
          op[n * ot[0] + c * ot[1] + oh * ot[2] + ow * ot[3]] = r;
        }
      }
    }
  }
}

// PyTorch's sliding window along one dim: [start, end) in input coordinates (may begin in the
// left padding); `size` is the window clipped to the padded input (the count_include_pad
// divisor). Max pooling clips to the input itself.
struct SlidingWindow {
  int64_t k, s, pad, d;
  void operator()(int64_t i, int64_t in, int64_t, int64_t* start, int64_t* end,
                  int64_t* size) const {
    int64_t st = i * s - pad;
    int64_t en = std::min(st + d * (k - 1) + 1, in + pad);
    *size = en - st;
    *start = st;
    *end = std::min(en, in);
  }
};

struct AdaptiveWindow {
  void operator()(int64_t i, int64_t in, int64_t out, int64_t* start, int64_t* end,
                  int64_t* size) const {
    *start = (i * in) / out;
    *end = ((i + 1) * in + out - 1) / out;
    *size = *end - *start;
  }
};

}  // namespace

void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& out) {
  if (out.numel() == 0) return;
  if (x.dtype() == DType::f32 && pool_dnnl(x, p, dnnl::algorithm::pooling_max, out)) return;
  SlidingWindow wh{p.kernel[0], p.stride[0], p.padding[0], p.dilation[0]};
  SlidingWindow ww{p.kernel[1], p.stride[1], p.padding[1], p.dilation[1]};
  LATHE_DISPATCH_FLOATING(x.dtype(), "max_pool2d", [&] {
    pool_direct<scalar_t, PoolKind::max>(x, out, false, p.dilation[0], p.dilation[1], wh, ww);
  });
}

void max_pool2d_forward_blocked(const Tensor& x, const Pool2dParams& p, const Tensor& out) {
  const int64_t block = x.dim() == 5 ? x.sizes()[4].expect_int() : 0;
  LATHE_CHECK(x.dtype() == DType::f32 && x.dim() == 5 && out.dim() == 5 && x.is_contiguous() &&
                  out.is_contiguous() && (block == 8 || block == 16) &&
                  out.sizes()[4].expect_int() == block,
              "[max_pool2d] the blocked layout takes contiguous f32 [N, C/B, H, W, B] tensors with "
              "the same block B of 8 or 16, got ",
              x.shape_string(), " and ", out.shape_string());
  if (out.numel() == 0) return;
  auto xs = x.shape(), os = out.shape();
  if (any_nan(static_cast<const float*>(x.raw_data()), x.numel())) {
    // The direct loop over [N * C/B, B, H, W] views of both (the lanes as channels).
    auto as_4d = [](const Tensor& t, const std::vector<int64_t>& s) {
      return make_view(t, Shape{s[0] * s[1], s[4], s[2], s[3]},
                       Shape{s[2] * s[3] * s[4], 1, s[3] * s[4], s[4]}, t.storage_offset());
    };
    SlidingWindow wh{p.kernel[0], p.stride[0], p.padding[0], p.dilation[0]};
    SlidingWindow ww{p.kernel[1], p.stride[1], p.padding[1], p.dilation[1]};
    pool_direct<float, PoolKind::max>(as_4d(x, xs), as_4d(out, os), false, p.dilation[0],
                                      p.dilation[1], wh, ww);
    return;
  }
  const memory::dims src_dims{xs[0], xs[1] * block, xs[2], xs[3]};
  const memory::dims dst_dims{os[0], os[1] * block, os[2], os[3]};
  const auto tag = block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
  const memory::desc src_md(src_dims, memory::data_type::f32, tag);
  const memory::desc dst_md(dst_dims, memory::data_type::f32, tag);
  int64_t pr[2];
  for (int i = 0; i < 2; ++i)
    pr[i] =
        right_padding(xs[2 + i], os[2 + i], p.kernel[i], p.stride[i], p.padding[i], p.dilation[i]);
  DnnlKey key;
  key.add(5).add(block).add(src_dims).add(dst_dims);
  for (int i = 0; i < 2; ++i)
    key.add(p.kernel[i]).add(p.stride[i]).add(p.padding[i]).add(pr[i]).add(p.dilation[i]);
  key.add(dnnl_prepare_threads());
  auto prim = dnnl_cached_primitive(key, [&] {
    try {
      return make_pool(dnnl::algorithm::pooling_max, src_md, dst_md, p, pr);
    } catch (const dnnl::error& e) {
      throw Error(str("[max_pool2d] oneDNN could not create a blocked max pooling for ",
                      x.shape_string(), ": ", e.what()));
    }
  });
  DnnlArgs(*prim)
      .add(DNNL_ARG_SRC, x.raw_data(), [&] { return src_md; })
      .add(DNNL_ARG_DST, out.raw_data(), [&] { return dst_md; })
      .run();
}

void avg_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& out) {
  if (out.numel() == 0) return;
  if (x.dtype() == DType::f32) {
    // oneDNN's include-padding divisor is always the full kernel; PyTorch clips windows that
    // ceil_mode pushes past the right padding. Use oneDNN only where the two agree.
    bool agrees = true;
    for (int i = 0; i < 2; ++i) {
      int64_t pr = right_padding(x.shape()[2 + i], out.shape()[2 + i], p.kernel[i], p.stride[i],
                                 p.padding[i], 1);
      if (p.count_include_pad && pr > p.padding[i]) agrees = false;
    }
    auto algo = p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                    : dnnl::algorithm::pooling_avg_exclude_padding;
    if (agrees && pool_dnnl(x, p, algo, out)) return;
  }
  SlidingWindow wh{p.kernel[0], p.stride[0], p.padding[0], 1};
  SlidingWindow ww{p.kernel[1], p.stride[1], p.padding[1], 1};
  LATHE_DISPATCH_FLOATING(x.dtype(), "avg_pool2d", [&] {
    pool_direct<scalar_t, PoolKind::avg>(x, out, p.count_include_pad, 1, 1, wh, ww);
  });
}

void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& out) {
  if (out.numel() == 0) return;
  const int64_t H = x.shape()[2], W = x.shape()[3], OH = out.shape()[2], OW = out.shape()[3];
  if (x.dtype() == DType::f32 && H % OH == 0 && W % OW == 0) {
    Pool2dParams p;
    p.kernel[0] = p.stride[0] = H / OH;
    p.kernel[1] = p.stride[1] = W / OW;
    if (pool_dnnl(x, p, dnnl::algorithm::pooling_avg_exclude_padding, out)) return;
  }
  LATHE_DISPATCH_FLOATING(x.dtype(), "adaptive_avg_pool2d", [&] {
    pool_direct<scalar_t, PoolKind::avg>(x, out, true, 1, 1, AdaptiveWindow{}, AdaptiveWindow{});
  });
}

}  // namespace lathe::detail
