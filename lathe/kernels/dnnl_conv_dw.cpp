#include "lathe/kernels/dnnl_conv_dw.h"

#include <string>

#include "lathe/core/error.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/kernels/non_finite.h"

namespace lathe::detail {
namespace {

using dnnl::memory;

// Appends the eltwise post-ops of `from` to `to`.
void append_eltwises(dnnl::post_ops& to, const dnnl::post_ops& from) {
  for (int i = 0; i < from.len(); ++i) {
    float scale, alpha, beta;
    dnnl::algorithm alg;
    from.get_params_eltwise(i, scale, alg, alpha, beta);
    to.append_eltwise(scale, alg, alpha, beta);
  }
}

// The fused primitive's attributes: act on the 1x1 result, the depthwise convolution, act2 on
// its result (the eltwise post-ops as dnnl_post_ops_attr builds them; get_post_ops() gives a
// view into its attr, so the attrs stay alive while they are read).
dnnl::primitive_attr fused_attr(int64_t dw_stride, const PostOps& post) {
  PostOps first, second;
  first.act = post.act, first.act_lo = post.act_lo, first.act_hi = post.act_hi;
  second.act = post.act2, second.act_lo = post.act2_lo, second.act_hi = post.act2_hi;
  const dnnl::primitive_attr first_attr = dnnl_post_ops_attr(first);
  const dnnl::primitive_attr second_attr = dnnl_post_ops_attr(second);
  dnnl::post_ops po;
  append_eltwises(po, first_attr.get_post_ops());
  po.append_dw(memory::data_type::f32, memory::data_type::f32, memory::data_type::f32, 3, dw_stride,
               1, 0, {});
  append_eltwises(po, second_attr.get_post_ops());
  dnnl::primitive_attr attr = dnnl_default_attr();
  attr.set_post_ops(po);
  return attr;
}

struct FusedShape {
  int64_t n, c, m, h, w, block, dw_stride;
  bool bias, dw_bias;
};

DnnlKey fused_key(const FusedShape& s, const PostOps& post) {
  DnnlKey key;
  key.add(41).add(s.n).add(s.c).add(s.m).add(s.h).add(s.w).add(s.block).add(s.dw_stride);
  key.add(s.bias ? 1 : 0).add(s.dw_bias ? 1 : 0);
  dnnl_add_post_ops_key(key, post);
  key.add(dnnl_prepare_threads());
  return key;
}

// The fused primitive, or nullptr when oneDNN has none for the shape.
std::shared_ptr<DnnlPrimitive> make_fused(const FusedShape& s, const PostOps& post) {
  const auto tag = s.block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
  const memory::desc src({s.n, s.c, s.h, s.w}, memory::data_type::f32, tag);
  // The primitive is described as the 1x1 convolution (its dst the expanded tensor); oneDNN
  // reports the depthwise output as its dst.
  const memory::desc mid({s.n, s.m, s.h, s.w}, memory::data_type::f32, tag);
  const memory::desc wany({s.m, s.c, 1, 1}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc bias_md =
      s.bias ? memory::desc({s.m}, memory::data_type::f32, memory::format_tag::a) : memory::desc();
  try {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src, wany, bias_md, mid,
                                      {1, 1}, {0, 0}, {0, 0}, {0, 0});
    dnnl::convolution_forward::primitive_desc pd(d, fused_attr(s.dw_stride, post), dnnl_engine());
    const int64_t oh = (s.h - 1) / s.dw_stride + 1, ow = (s.w - 1) / s.dw_stride + 1;
    if (pd.dst_desc() != memory::desc({s.n, s.m, oh, ow}, memory::data_type::f32, tag))
      return nullptr;
    auto r = std::make_shared<DnnlPrimitive>();
    r->pd = pd;
    r->prim = dnnl::convolution_forward(pd);
    r->impl = pd.impl_info_str();
    return r;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace

std::string dnnl_dw_fusion_impl(int64_t n, int64_t c, int64_t m, int64_t h, int64_t w,
                                int64_t block, int64_t dw_stride, bool bias, bool dw_bias,
                                const PostOps& post) {
  const FusedShape s{n, c, m, h, w, block, dw_stride, bias, dw_bias};
  auto prim = dnnl_cached_primitive(fused_key(s, post), [&] { return make_fused(s, post); });
  return prim ? prim->impl : std::string();
}

void conv2d_1x1_dw_forward_blocked(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   const Tensor& dw_weight, const Tensor& dw_bias,
                                   int64_t dw_stride, const PostOps& post, const Tensor& out) {
  const int64_t block = x.dim() == 5 ? x.sizes()[4].expect_int() : 0;
  LATHE_CHECK(x.dtype() == DType::f32 && x.dim() == 5 && out.dim() == 5 && x.is_contiguous() &&
                  out.is_contiguous() && (block == 8 || block == 16) &&
                  out.sizes()[4].expect_int() == block && !post.sum,
              "[conv2d_1x1_dw_blocked] takes contiguous f32 [N, C/B, H, W, B] tensors with the "
              "same block B of 8 or 16, got ",
              x.shape_string(), " and ", out.shape_string());
  if (needs_nan_safe_post_ops(post, x, w, bias) ||
      (post_ops_drop_nan(post) &&
       (has_non_finite(dw_weight) || (dw_bias.defined() && has_non_finite(dw_bias))))) {
    // NaN or inf in reach of the fused activations (non_finite.h): the two convolutions one
    // after the other, each taking its own NaN-safe path.
    PostOps first, second;
    first.act = post.act, first.act_lo = post.act_lo, first.act_hi = post.act_hi;
    second.act = post.act2, second.act_lo = post.act2_lo, second.act_hi = post.act2_hi;
    const int64_t m = w.sizes()[0].expect_int();
    Tensor mid =
        empty(Shape{x.sizes()[0], m / block, x.sizes()[2], x.sizes()[3], block}, DType::f32);
    conv2d_forward_blocked(x, w, bias, Conv2dParams{}, mid, first);
    Conv2dParams dw;
    dw.stride[0] = dw.stride[1] = dw_stride;
    dw.padding[0] = dw.padding[1] = 1;
    dw.groups = m;
    conv2d_forward_blocked(mid, dw_weight, dw_bias, dw, out, second);
    return;
  }
  auto xs = x.shape(), ws = w.shape();
  const FusedShape s{xs[0],          xs[1] * block,    ws[0], xs[2], xs[3], block, dw_stride,
                     bias.defined(), dw_bias.defined()};
  auto prim = dnnl_cached_primitive(fused_key(s, post), [&] { return make_fused(s, post); });
  LATHE_CHECK(prim != nullptr, "[conv2d_1x1_dw_blocked] oneDNN has no fused 1x1 + depthwise ",
              "convolution for input ", x.shape_string(), ", weight ", w.shape_string(),
              ", stride ", dw_stride);
  const dnnl::primitive_desc& pd = prim->pd;
  Tensor wc = w.is_non_overlapping_and_dense() ? w : to_contiguous(w);
  Tensor dwc = dw_weight.is_non_overlapping_and_dense() ? dw_weight : to_contiguous(dw_weight);
  DnnlWeight wmem = dnnl_cached_weight(
      wc, [&] { return dnnl_md(wc.shape(), wc.int_strides(), DType::f32); }, pd.weights_desc());
  const int dw_w_arg = DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS;
  const int dw_b_arg = DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS;
  DnnlWeight dwmem = dnnl_cached_weight(
      dwc,
      [&] {
        auto z = dwc.shape();
        auto st = dwc.int_strides();
        return dnnl_md({z[0], 1, 1, z[2], z[3]}, {st[0], st[0], st[1], st[2], st[3]}, DType::f32);
      },
      pd.query_md(dnnl::query::exec_arg_md, dw_w_arg));
  Tensor b = bias.defined() ? to_contiguous(bias) : bias;
  Tensor db = dw_bias.defined() ? to_contiguous(dw_bias) : dw_bias;
  DnnlArgs args(*prim);
  args.add(DNNL_ARG_SRC, x.raw_data(), [&] { return pd.src_desc(); });
  args.add_memory(DNNL_ARG_WEIGHTS, wmem.mem);
  args.add_memory(dw_w_arg, dwmem.mem);
  args.add(DNNL_ARG_DST, out.raw_data(), [&] { return pd.dst_desc(); });
  if (b.defined()) args.add(DNNL_ARG_BIAS, b.raw_data(), [&] { return pd.weights_desc(1); });
  if (db.defined())
    args.add(dw_b_arg, db.raw_data(),
             [&] { return pd.query_md(dnnl::query::exec_arg_md, dw_b_arg); });
  args.run();
}

}  // namespace lathe::detail
