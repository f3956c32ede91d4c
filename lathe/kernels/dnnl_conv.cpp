#include "lathe/kernels/dnnl_conv.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "lathe/core/threads.h"
#include "lathe/kernels/blocked_layout.h"
#include "lathe/kernels/compile_time.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/kernels/measure_cache.h"
#include "lathe/kernels/non_finite.h"

namespace lathe::detail {
namespace {

using dnnl::memory;

// The weight as oneDNN sees it: [O,I,KH,KW], or [G,O/G,I,KH,KW] when grouped, with its strides.
memory::desc user_weight_md(const Tensor& w, int64_t groups) {
  auto sz = w.shape();
  auto st = w.int_strides();
  if (groups == 1) return dnnl_md(sz, st, w.dtype());
  return dnnl_md({groups, sz[0] / groups, sz[1], sz[2], sz[3]},
                 {st[0] * (sz[0] / groups), st[0], st[1], st[2], st[3]}, w.dtype());
}

std::shared_ptr<DnnlPrimitive> make_conv(const memory::desc& src, const memory::desc& dst,
                                         const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                                         const ConvPostOps& post) {
  auto sz = w.shape();
  memory::dims wdims = p.groups == 1
                           ? memory::dims{sz[0], sz[1], sz[2], sz[3]}
                           : memory::dims{p.groups, sz[0] / p.groups, sz[1], sz[2], sz[3]};
  // The weight in the source's dtype (a bf16 convolution reorders an f32 weight once, cached).
  memory::desc wany(wdims, src.data_type(), memory::format_tag::any);
  memory::desc bias_md = bias.defined() ? memory::desc({sz[0]}, dnnl_dtype(bias.dtype(), "conv2d"),
                                                       memory::format_tag::a)
                                        : memory::desc();
  auto desc = [&](dnnl::algorithm alg) {
    return dnnl::convolution_forward::desc(
        dnnl::prop_kind::forward_inference, alg, src, wany, bias_md, dst,
        {p.stride[0], p.stride[1]}, {p.dilation[0] - 1, p.dilation[1] - 1},
        {p.padding[0], p.padding[1]}, {p.padding[0], p.padding[1]});
  };
  if (p.winograd) {
    // No Winograd kernel for this shape, layout or machine: the direct one below.
    try {
      dnnl::convolution_forward::primitive_desc pd(desc(dnnl::algorithm::convolution_winograd),
                                                   dnnl_post_ops_attr(post), dnnl_engine());
      auto r = std::make_shared<DnnlPrimitive>();
      r->pd = pd;
      r->prim = dnnl::convolution_forward(pd);
      r->impl = pd.impl_info_str();
      return r;
    } catch (const dnnl::error&) {
    }
  }
  dnnl::convolution_forward::desc d = desc(dnnl::algorithm::convolution_direct);
  try {
    dnnl::convolution_forward::primitive_desc pd(d, dnnl_post_ops_attr(post), dnnl_engine());
    auto r = std::make_shared<DnnlPrimitive>();
    r->pd = pd;
    r->prim = dnnl::convolution_forward(pd);
    r->impl = pd.impl_info_str();
    return r;
  } catch (const dnnl::error& e) {
    throw Error(str("[conv2d] oneDNN could not create a convolution for weight ", w.shape_string(),
                    ": ", e.what()));
  }
}

// Runs a cached convolution primitive on x, the weight, bias and out (their layouts the
// primitive's own), allocating nothing per call.
void run_conv(const DnnlPrimitive& prim, const Tensor& x, const DnnlWeight& wmem,
              const Tensor& bias, const Tensor& out) {
  const dnnl::primitive_desc& pd = prim.pd;
  DnnlArgs args(prim);
  args.add(DNNL_ARG_SRC, x.raw_data(), [&] { return pd.src_desc(); });
  args.add_memory(DNNL_ARG_WEIGHTS, wmem.mem);
  args.add(DNNL_ARG_DST, out.raw_data(), [&] { return pd.dst_desc(); });
  if (bias.defined()) args.add(DNNL_ARG_BIAS, bias.raw_data(), [&] { return pd.weights_desc(1); });
  args.run();
}

// Copies between a tensor's own layout and a oneDNN layout (a oneDNN reorder).
void reorder_memory(memory from, memory to) {
  dnnl_prepare_threads();
  dnnl::reorder(from, to).execute(dnnl_stream(), from, to);
  dnnl_stream().wait();
}

// A f32 scratch tensor big enough for md.
Tensor buffer_for(const memory::desc& md) {
  return empty({static_cast<int64_t>(md.get_size() / sizeof(float)) + 1}, DType::f32);
}

// Runs `prim` (src and dst in layouts of its own choosing) on x, writing out: x is reordered
// into the primitive's source layout, the result back into out (out's old contents first into
// the primitive's destination when the post-ops sum into it).
void conv2d_reordered(const DnnlPrimitive& prim, const Tensor& x, const Tensor& w,
                      const Tensor& bias, int64_t groups, const Tensor& out, bool sum) {
  const dnnl::primitive_desc& pd = prim.pd;
  Tensor src = buffer_for(pd.src_desc()), dst = buffer_for(pd.dst_desc());
  memory src_mem = dnnl_mem(pd.src_desc(), src), dst_mem = dnnl_mem(pd.dst_desc(), dst);
  memory out_mem = dnnl_mem(dnnl_md(out, out.is_channels_last()), out);
  reorder_memory(dnnl_mem(dnnl_md(x, true), x), src_mem);
  if (sum) reorder_memory(out_mem, dst_mem);
  DnnlWeight wmem = dnnl_cached_weight(
      w, [&] { return user_weight_md(w, groups); }, pd.weights_desc());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wmem.mem}, {DNNL_ARG_DST, dst_mem}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, dnnl_mem(pd.weights_desc(1), bias));
  dnnl_execute(prim, std::move(args));
  reorder_memory(dst_mem, out_mem);
}

void conv2d_dnnl(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in,
                 const Conv2dParams& p, const Tensor& out, const ConvPostOps& post) {
  // Channels-last activations run oneDNN's brgconv kernels with no reorder; anything else is
  // copied to channels-last first (one streaming copy is far cheaper than the NCHW kernels).
  Tensor x = to_channels_last_copy(x_in);
  if (p.bf16 && x.dtype() == DType::f32) x = dnnl_round_to_bf16(x);  // conv2d_forward checked
  // Permuted weights are read in place by the reorder; broadcast (stride-0) ones are copied.
  Tensor w = w_in.is_non_overlapping_and_dense() ? w_in : to_contiguous(w_in);
  Tensor bias = bias_in.defined() ? to_contiguous(bias_in) : bias_in;
  DnnlKey key;
  key.add(1).add(x.shape()).add(out.int_strides()).add(x.int_strides()).add(w.shape());
  key.add(p.groups).add(bias.defined() ? 1 + static_cast<int64_t>(bias.dtype()) : 0);
  key.add(static_cast<int64_t>(x.dtype())).add(static_cast<int64_t>(out.dtype()));
  for (int i = 0; i < 2; ++i) key.add(p.stride[i]).add(p.padding[i]).add(p.dilation[i]);
  dnnl_add_post_ops_key(key, post);
  key.add(dnnl_prepare_threads());
  // Descriptors are built only on a miss; a hit reads them back from the primitive.
  auto prim = dnnl_cached_primitive(key, [&] {
    return make_conv(dnnl_md(x, true), dnnl_md(out, out.is_channels_last()), w, bias, p, post);
  });
  // oneDNN 2.6 on AVX2 has no jit kernel for grouped convolutions with few channels per group
  // (resnext's 4) on channels-last data and falls back to a gemm that is ~3x slower there than
  // on the layouts it picks itself: run those on oneDNN's layouts, reordering in and out.
  if (p.groups > 1 && prim->impl.find("gemm") != std::string::npos) {
    DnnlKey own = key;
    own.add(-2);
    auto alt = dnnl_cached_primitive(own, [&] {
      auto any = [](const Tensor& t) {
        return memory::desc(t.shape(), dnnl_dtype(t.dtype(), "conv2d"), memory::format_tag::any);
      };
      return make_conv(any(x), any(out), w, bias, p, post);
    });
    conv2d_reordered(*alt, x, w, bias, p.groups, out, post.sum);
    return;
  }
  const dnnl::primitive_desc& pd = prim->pd;
  DnnlWeight wmem = dnnl_cached_weight(
      w, [&] { return user_weight_md(w, p.groups); }, pd.weights_desc());
  run_conv(*prim, x, wmem, bias, out);
}

// Direct loop (f64 references): correctness only.
template <class T>
void conv2d_direct(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                   const Tensor& out) {
  auto xs = x.shape(), xt = x.int_strides();
  auto ws = w.shape(), wt = w.int_strides();
  auto os = out.shape(), ot = out.int_strides();
  const int64_t N = xs[0], H = xs[2], W = xs[3];
  const int64_t O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3];
  const int64_t OH = os[2], OW = os[3];
  const int64_t Og = O / p.groups;
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(w.raw_data());
  const T* bp = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
  const int64_t bst = bias.defined() ? bias.int_strides()[0] : 0;
  T* op = static_cast<T*>(out.raw_data());
  const int nt = lathe::num_threads();
#pragma omp parallel for collapse(2) num_threads(nt)
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / Og;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          T acc = bp ? bp[o * bst] : T(0);
          for (int64_t c = 0; c < Cg; ++c) {
            const int64_t ci = g * Cg + c;
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                acc += xp[n * xt[0] + ci * xt[1] + ih * xt[2] + iw * xt[3]] *
                       wp[o * wt[0] + c * wt[1] + kh * wt[2] + kw * wt[3]];
              }
            }
          }
          op[n * ot[0] + o * ot[1] + oh * ot[2] + ow * ot[3]] = acc;
        }
      }
    }
  }
}

// out = post(conv) elementwise, where `conv` holds the plain convolution (same sizes as out).
template <class T>
void apply_post_ops(const Tensor& conv, const ConvPostOps& post, const Tensor& out) {
  auto os = out.shape(), ot = out.int_strides(), ct = conv.int_strides();
  const T* cp = static_cast<const T*>(conv.raw_data());
  T* op = static_cast<T*>(out.raw_data());
  for (int64_t n = 0; n < os[0]; ++n)
    for (int64_t c = 0; c < os[1]; ++c)
      for (int64_t h = 0; h < os[2]; ++h)
        for (int64_t w = 0; w < os[3]; ++w) {
          T& o = op[n * ot[0] + c * ot[1] + h * ot[2] + w * ot[3]];
          T v = apply_post_act(cp[n * ct[0] + c * ct[1] + h * ct[2] + w * ct[3]], post.act,
                               post.act_lo, post.act_hi);
          if (post.sum) v += o;
          o = apply_post_act(v, post.act2, post.act2_lo, post.act2_hi);
        }
}

}  // namespace

void conv2d_forward_blocked(const Tensor& x, const Tensor& w, const Tensor& bias,
                            const Conv2dParams& p, const Tensor& out, const ConvPostOps& post) {
  // x is [N, C/B, H, W, B], or a contiguous [N, C, H, W] (nchw: a first convolution).
  const bool plain = x.dim() == 4;
  const int64_t block = out.dim() == 5 ? out.sizes()[4].expect_int() : 0;
  LATHE_CHECK(x.dtype() == DType::f32 && (x.dim() == 5 || plain) && out.dim() == 5 &&
                  x.is_contiguous() && out.is_contiguous() && (block == 8 || block == 16) &&
                  (plain || x.sizes()[4].expect_int() == block),
              "[conv2d] the blocked layout takes contiguous f32 [N, C/B, H, W, B] tensors with the "
              "same block B of 8 or 16 (or a contiguous [N, C, H, W] input), got ",
              x.shape_string(), " and ", out.shape_string());
  if (needs_nan_safe_post_ops(post, x, w, bias)) {  // see non_finite.h
    Tensor conv = empty(out.sizes(), DType::f32);
    conv2d_forward_blocked(x, w, bias, p, conv, {});
    apply_post_ops_flat(static_cast<const float*>(conv.raw_data()), post,
                        static_cast<float*>(out.raw_data()), out.numel());
    return;
  }
  auto xs = x.shape(), os = out.shape();
  const memory::dims src_dims{xs[0], plain ? xs[1] : xs[1] * block, xs[2], xs[3]};
  const memory::dims dst_dims{os[0], os[1] * block, os[2], os[3]};
  const auto tag = block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
  // At bf16 precision the source is rounded (one reorder) and the weight converted once, cached.
  const bool bf16 = p.bf16 && dnnl_bf16_native();
  const Tensor xr = bf16 ? dnnl_round_to_bf16(x) : x;
  const memory::desc src(src_dims, bf16 ? memory::data_type::bf16 : memory::data_type::f32,
                         plain ? memory::format_tag::nchw : tag);
  const memory::desc dst(dst_dims, memory::data_type::f32, tag);
  Tensor wc = w.is_non_overlapping_and_dense() ? w : to_contiguous(w);
  Tensor b = bias.defined() ? to_contiguous(bias) : bias;
  DnnlKey key;
  key.add(3)
      .add(block)
      .add(plain ? 1 : 0)
      .add(src_dims)
      .add(dst_dims)
      .add(wc.shape())
      .add(p.groups);
  key.add(p.winograd && !bf16 ? 1 : 0).add(bf16 ? 1 : 0);
  key.add(b.defined() ? 1 : 0);
  for (int i = 0; i < 2; ++i) key.add(p.stride[i]).add(p.padding[i]).add(p.dilation[i]);
  dnnl_add_post_ops_key(key, post);
  key.add(dnnl_prepare_threads());
  Conv2dParams q = p;
  q.winograd = p.winograd && !bf16;
  auto prim = dnnl_cached_primitive(key, [&] { return make_conv(src, dst, wc, b, q, post); });
  const dnnl::primitive_desc& pd = prim->pd;
  DnnlWeight wmem = dnnl_cached_weight(
      wc, [&] { return user_weight_md(wc, p.groups); }, pd.weights_desc());
  run_conv(*prim, xr, wmem, b, out);
}

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                    const Tensor& out, const ConvPostOps& post) {
  if (out.numel() == 0) return;
  const bool bf16 = x.dtype() == DType::bf16 && w.dtype() == DType::bf16 &&
                    out.dtype() == DType::bf16 && dnnl_bf16_native();
  if ((x.dtype() == DType::f32 || bf16) && x.numel() > 0 && w.numel() > 0) {
    Conv2dParams q = p;
    q.bf16 = p.bf16 && x.dtype() == DType::f32 && w.dtype() == DType::f32 && dnnl_bf16_native();
    if (x.dtype() == DType::f32 && out.dtype() == DType::f32 &&
        needs_nan_safe_post_ops(post, x, w, bias)) {  // see non_finite.h
      Tensor conv = empty(out.sizes(), DType::f32);
      conv2d_dnnl(x, w, bias, q, conv, {});
      apply_post_ops<float>(conv, post, out);
      return;
    }
    conv2d_dnnl(x, w, bias, q, out, post);
    return;
  }
  LATHE_DISPATCH_FLOATING(x.dtype(), "conv2d", [&] {
    if (post.empty()) {
      conv2d_direct<scalar_t>(x, w, bias, p, out);
      return;
    }
    Tensor conv = empty(out.sizes(), out.dtype());
    conv2d_direct<scalar_t>(x, w, bias, p, conv);
    apply_post_ops<scalar_t>(conv, post, out);
  });
}

}  // namespace lathe::detail
