// conv2d / pooling / embedding backward ops (declared in backward_ops.h). f32 conv and pooling
// run oneDNN's backward primitives (dnnl_conv_backward.h, dnnl_pool_backward.h); f64, embedding
// and what oneDNN cannot express run the direct loops of lathe/kernels/backward_loops.cpp.
#include "lathe/ops/backward_ops.h"

#include <cmath>

#include "lathe/kernels/backward_loops.h"
#include "lathe/kernels/batch_norm.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/kernels/dnnl_conv_backward.h"
#include "lathe/kernels/dnnl_pool_backward.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

using detail::optional;
using detail::required;

void check_grad_out(const Tensor& go, const Tensor& other, const char* op) {
  LATHE_CHECK(go.dim() == 4, "[", op, "] grad_out must be 4-d, got ", go.shape_string());
  LATHE_CHECK(is_floating(go.dtype()) && go.dtype() == other.dtype(), "[", op, "] grad_out ",
              go.shape_string(), " and ", other.shape_string(), " must share one floating dtype");
}

// An op whose one output has the sizes of attribute `size_attr` and grad_out's dtype.
ShapeRule sized_by(const char* op, const char* size_attr) {
  return [op, size_attr](TensorList in, const Attrs& a) {
    check_grad_out(in[0], in.size() > 1 ? in[1] : in[0], op);
    const Shape& s = a.get_shape(size_attr);
    LATHE_CHECK(s.size() == 4 || std::string(size_attr) == "weight_size", "[", op, "] ", size_attr,
                " must have 4 dims, got ", s);
    return std::vector<TensorMeta>{result_meta(s, in[0].dtype(), in[0].device())};
  };
}

Tensor fresh(const TensorMeta& m) { return empty(m.sizes, m.dtype); }
// Metas without strides (result_meta) mean row-major.
Tensor fresh_strided(const TensorMeta& m) {
  return m.strides.empty() ? empty(m.sizes, m.dtype) : empty_strided(m.sizes, m.strides, m.dtype);
}

// The layout of an input gradient: channels-last when `like` is channels-last only (conv2d's
// outputs are), so the gradient flows backward without layout copies; else row-major.
TensorMeta grad_meta_like(const Shape& sizes, const Tensor& like, const Tensor& dtype_of) {
  TensorMeta m = result_meta(sizes, dtype_of.dtype(), dtype_of.device());
  if (sizes.size() == 4 && like.dim() == 4 && like.is_channels_last() && !like.is_contiguous())
    m.strides = channels_last_strides(sizes);
  return m;
}

// Runs a reference loop that writes a row-major result into `out` (any layout).
template <class Loop>
void via_contiguous(const Tensor& out, Loop loop) {
  if (out.is_contiguous()) {
    loop(out);
    return;
  }
  Tensor tmp = empty(out.sizes(), out.dtype());
  loop(tmp);
  detail::copy_into(out, tmp);
}

std::vector<TensorMeta> conv_input_rule(TensorList in, const Attrs& a) {
  check_grad_out(in[0], in[1], "conv2d_backward_input");
  const Shape& s = a.get_shape("input_size");
  LATHE_CHECK(s.size() == 4, "[conv2d_backward_input] input_size must have 4 dims, got ", s);
  // conv2d writes channels-last outputs, and its input gradient is channels-last likewise.
  TensorMeta m = result_meta(s, in[0].dtype(), in[0].device());
  m.strides = channels_last_strides(s);
  return {m};
}

std::vector<Tensor> conv_input_kernel(TensorList in, const Attrs& a,
                                      const std::vector<TensorMeta>& m) {
  Tensor gi = fresh_strided(m[0]);
  const detail::Conv2dParams p = detail::conv_params(a);
  if (gi.dtype() == DType::f32) {
    detail::conv2d_backward_input_dnnl(in[0], in[1], p, gi);
  } else {
    via_contiguous(gi, [&](const Tensor& out) {
      detail::conv2d_backward_input(in[0].contiguous(), in[1].contiguous(), p, out);
    });
  }
  return {gi};
}

std::vector<Tensor> conv_weight_kernel(TensorList in, const Attrs& a,
                                       const std::vector<TensorMeta>& m) {
  Tensor gw = fresh(m[0]);
  const detail::Conv2dParams p = detail::conv_params(a);
  if (gw.dtype() == DType::f32)
    detail::conv2d_backward_weight_dnnl(in[0], in[1], p, gw);
  else
    detail::conv2d_backward_weight(in[0].contiguous(), in[1].contiguous(), p, gw);
  return {gw};
}

std::vector<TensorMeta> max_pool_rule(TensorList in, const Attrs&) {
  check_grad_out(in[0], in[1], "max_pool2d_backward");
  LATHE_CHECK(in[1].dim() == 4, "[max_pool2d_backward] input must be 4-d, got ",
              in[1].shape_string());
  return {grad_meta_like(in[1].sizes(), in[1], in[1])};
}

std::vector<TensorMeta> avg_pool_rule(TensorList in, const Attrs& a) {
  check_grad_out(in[0], in[0], "avg_pool2d_backward");
  const Shape& s = a.get_shape("input_size");
  LATHE_CHECK(s.size() == 4, "[avg_pool2d_backward] input_size must have 4 dims, got ", s);
  return {grad_meta_like(s, in[0], in[0])};
}

std::vector<Tensor> max_pool_kernel(TensorList in, const Attrs& a,
                                    const std::vector<TensorMeta>& m) {
  Tensor gi = fresh_strided(m[0]);
  const detail::Pool2dParams p = detail::pool2d_params(a, "max_pool2d_backward", true);
  if (detail::max_pool2d_backward_dnnl(in[0], in[1], p, gi)) return {gi};
  via_contiguous(gi, [&](const Tensor& out) {
    detail::max_pool2d_backward(in[0].contiguous(), in[1].contiguous(), p, out);
  });
  return {gi};
}

std::vector<Tensor> avg_pool_kernel(TensorList in, const Attrs& a,
                                    const std::vector<TensorMeta>& m) {
  Tensor gi = fresh_strided(m[0]);
  const detail::Pool2dParams p = detail::pool2d_params(a, "avg_pool2d_backward", false);
  if (detail::avg_pool2d_backward_dnnl(in[0], p, gi)) return {gi};
  via_contiguous(
      gi, [&](const Tensor& out) { detail::avg_pool2d_backward(in[0].contiguous(), p, out); });
  return {gi};
}

std::vector<Tensor> adaptive_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>& m) {
  Tensor gi = fresh(m[0]);
  detail::adaptive_avg_pool2d_backward(in[0].contiguous(), gi);
  return {gi};
}

std::vector<TensorMeta> embedding_bwd_rule(TensorList in, const Attrs& a) {
  const Tensor& go = in[0];
  const Tensor& idx = in[1];
  LATHE_CHECK(is_floating(go.dtype()) && go.dim() == idx.dim() + 1,
              "[embedding_backward] grad_out ", go.shape_string(),
              " must be floating with one dim more than the indices ", idx.shape_string());
  LATHE_CHECK(idx.dtype() == DType::i64 || idx.dtype() == DType::i32,
              "[embedding_backward] indices must be integers, got ", idx.shape_string());
  return {result_meta({a.get_int("num_weights"), go.sizes().back()}, go.dtype(), go.device())};
}

std::vector<Tensor> embedding_bwd_kernel(TensorList in, const Attrs&,
                                         const std::vector<TensorMeta>& m) {
  Tensor gw = fresh(m[0]);
  const int64_t dim = m[0].sizes[1].expect_int();
  Tensor go = in[0].contiguous().reshape({in[1].numel(), dim});
  detail::embedding_backward(go, in[1].to(DType::i64).contiguous(), gw);
  return {gw};
}

// ---- batch_norm_backward (inputs: grad_out, input, weight; the training gradient) ----
std::vector<TensorMeta> bn_backward_rule(TensorList in, const Attrs&) {
  const Tensor &go = in[0], &x = in[1], &w = in[2];
  LATHE_CHECK(
      x.dim() >= 2 && is_floating(x.dtype()) && go.dtype() == x.dtype() && go.dim() == x.dim(),
      "[batch_norm_backward] grad_out ", go.shape_string(), " and input ", x.shape_string(),
      " must share one floating dtype and have at least 2 dims");
  for (int64_t d = 0; d < x.dim(); ++d)
    LATHE_CHECK((go.sizes()[d] == x.sizes()[d]).guard("[batch_norm_backward] grad_out sizes"),
                "[batch_norm_backward] grad_out ", go.shape_string(),
                " must have the sizes of input ", x.shape_string());
  const SymInt c = x.sizes()[1];
  LATHE_CHECK(!w.defined() || (w.dim() == 1 && (w.sizes()[0] == c)
                                                   .guard("[batch_norm_backward] "
                                                          "weight size")),
              "[batch_norm_backward] weight ", w.shape_string(), " must have shape [", c,
              "] for input ", x.shape_string());
  TensorMeta gx = result_meta(x.sizes(), x.dtype(), x.device());
  gx.strides = output_strides(x.sizes(), in.subspan(0, 2));
  return {gx, result_meta({c}, x.dtype(), x.device()), result_meta({c}, x.dtype(), x.device())};
}

std::vector<Tensor> bn_backward_kernel(TensorList in, const Attrs& a,
                                       const std::vector<TensorMeta>& m) {
  // The statistics again, from the input (the forward keeps none): the same kernel as the
  // forward's, so the same values.
  Tensor x = kernels::channel_dense(in[1]);
  Tensor g = kernels::with_strides_of(in[0], x);
  std::vector<double> mean, var, w;
  kernels::channel_moments(x, mean, var);
  const double eps = a.get_double("eps");
  std::vector<double> rstd(mean.size());
  for (size_t c = 0; c < rstd.size(); ++c) rstd[c] = 1.0 / std::sqrt(var[c] + eps);
  if (in[2].defined()) w = in[2].to(DType::f64).contiguous().to_vector<double>();
  Tensor gi = fresh_strided(m[0]);
  Tensor gx =
      gi.int_strides() == x.int_strides() ? gi : empty_strided(x.sizes(), x.strides(), x.dtype());
  std::vector<double> gw, gb;
  kernels::batch_norm_train_backward(g, x, mean, rstd, w, gx, gw, gb);
  if (!gx.is_same(gi)) kernels::copy(gi, gx);
  const int64_t C = static_cast<int64_t>(gw.size());
  Tensor gw_t = from_vector(gw, {C}).to(x.dtype()), gb_t = from_vector(gb, {C}).to(x.dtype());
  return {gi, gw_t, gb_t};
}

std::vector<AttrSpec> with(std::vector<AttrSpec> base, AttrSpec extra) {
  base.push_back(extra);
  return base;
}

}  // namespace

namespace detail {
void register_backward_ops(OpRegistry& r) {
  using T = AttrType;
  using C = OpCategory;
  r.add(define_op("conv2d_backward_input", 2, conv_input_rule, conv_input_kernel, C::contraction,
                  with(conv2d_attrs(), required("input_size", T::int_list))));
  r.add(define_op("conv2d_backward_weight", 2, sized_by("conv2d_backward_weight", "weight_size"),
                  conv_weight_kernel, C::contraction,
                  with(conv2d_attrs(), required("weight_size", T::int_list))));
  r.add(define_op("max_pool2d_backward", 2, max_pool_rule, max_pool_kernel, C::pooling,
                  *r.get("max_pool2d").attr_schema));
  r.add(define_op("avg_pool2d_backward", 1, avg_pool_rule, avg_pool_kernel, C::pooling,
                  with(*r.get("avg_pool2d").attr_schema, required("input_size", T::int_list))));
  r.add(define_op("adaptive_avg_pool2d_backward", 1,
                  sized_by("adaptive_avg_pool2d_backward", "input_size"), adaptive_kernel,
                  C::pooling, {required("input_size", T::int_list)}));
  r.add(define_op("batch_norm_backward", 3, bn_backward_rule, bn_backward_kernel, C::normalization,
                  {required("eps", T::real)}));
  r.add(define_op("embedding_backward", 2, embedding_bwd_rule, embedding_bwd_kernel, C::other,
                  {required("num_weights", T::integer)}));
}
}  // namespace detail

namespace {
// The forward call's attributes (without what autograd added) plus one more.
Attrs plus(const Attrs& base, std::initializer_list<const char*> keep, const char* name,
           AttrValue v) {
  Attrs a;
  for (const char* k : keep)
    for (const auto& [key, value] : base.items())
      if (std::string(key) == k) a.set(k, value);
  if (name) a.set(name, std::move(v));
  return a;
}
}  // namespace

Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_size,
                             const Attrs& conv_attrs) {
  Tensor in[2] = {grad_out, weight};
  return dispatch1(
      LATHE_OP("conv2d_backward_input"), in,
      plus(conv_attrs, {"stride", "padding", "dilation", "groups"}, "input_size", input_size));
}

Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& input, const Shape& weight_size,
                              const Attrs& conv_attrs) {
  Tensor in[2] = {grad_out, input};
  return dispatch1(
      LATHE_OP("conv2d_backward_weight"), in,
      plus(conv_attrs, {"stride", "padding", "dilation", "groups"}, "weight_size", weight_size));
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Attrs& pool_attrs) {
  Tensor in[2] = {grad_out, input};
  return dispatch1(
      LATHE_OP("max_pool2d_backward"), in,
      plus(pool_attrs, {"kernel", "stride", "padding", "dilation", "ceil_mode"}, nullptr, {}));
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size,
                           const Attrs& pool_attrs) {
  return dispatch1(
      LATHE_OP("avg_pool2d_backward"), {&grad_out, 1},
      plus(pool_attrs, {"kernel", "stride", "padding", "ceil_mode", "count_include_pad"},
           "input_size", input_size));
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size) {
  return dispatch1(LATHE_OP("adaptive_avg_pool2d_backward"), {&grad_out, 1},
                   Attrs{{"input_size", input_size}});
}

std::vector<Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                        const Tensor& weight, double eps) {
  Tensor in[3] = {grad_out, input, weight};
  return dispatch(LATHE_OP("batch_norm_backward"), in, Attrs{{"eps", eps}});
}

Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights) {
  Tensor in[2] = {grad_out, indices};
  return dispatch1(LATHE_OP("embedding_backward"), in, Attrs{{"num_weights", num_weights}});
}

}  // namespace lathe
