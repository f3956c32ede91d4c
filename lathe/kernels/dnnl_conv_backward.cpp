#include "lathe/kernels/dnnl_conv_backward.h"

#include "lathe/kernels/dnnl_common.h"

namespace lathe::detail {
namespace {

using dnnl::memory;

memory::dims weight_dims(const Shape& sizes_sym, int64_t groups) {
  std::vector<int64_t> s;
  for (const SymInt& v : sizes_sym) s.push_back(v.expect_int());
  if (groups == 1) return {s[0], s[1], s[2], s[3]};
  return {groups, s[0] / groups, s[1], s[2], s[3]};
}

// The weight (or weight gradient) as stored, row-major or permuted: [O,I,KH,KW], or
// [G,O/G,I,KH,KW] when grouped.
memory::desc stored_weight_md(const Tensor& w, int64_t groups) {
  auto sz = w.shape();
  auto st = w.int_strides();
  if (groups == 1) return dnnl_md(sz, st, w.dtype());
  return dnnl_md({groups, sz[0] / groups, sz[1], sz[2], sz[3]},
                 {st[0] * (sz[0] / groups), st[0], st[1], st[2], st[3]}, w.dtype());
}

memory::desc any_md(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

// The forward descriptor the backward primitives take as a hint (forward_training).
dnnl::convolution_forward::primitive_desc forward_hint(const memory::desc& src,
                                                       const memory::desc& w,
                                                       const memory::desc& dst,
                                                       const Conv2dParams& p) {
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src, w, dst,
      {p.stride[0], p.stride[1]}, {p.dilation[0] - 1, p.dilation[1] - 1},
      {p.padding[0], p.padding[1]}, {p.padding[0], p.padding[1]});
  return dnnl::convolution_forward::primitive_desc(d, dnnl_default_attr(), dnnl_engine());
}

// oneDNN 2.6 on AVX2 has no jit backward kernel for some layouts (mixed ones, and grouped
// convolutions with few channels per group on channels-last data) and then picks reference loops
// or a gemm that is slow there; on its own (blocked) layouts it has one. Ungrouped gemm (1x1
// convolutions) is fast.
bool slow_impl(const std::string& impl, int64_t groups) {
  return impl.find("ref") != std::string::npos ||
         (groups > 1 && impl.find("gemm") != std::string::npos);
}

void reorder(memory from, memory to) {
  dnnl_prepare_threads();
  dnnl::reorder(from, to).execute(dnnl_stream(), from, to);
  dnnl_stream().wait();
}

Tensor buffer_for(const memory::desc& md) {
  return empty({static_cast<int64_t>(md.get_size() / sizeof(float)) + 1}, DType::f32);
}

void add_conv_key(DnnlKey& key, const Conv2dParams& p) {
  key.add(p.groups);
  for (int i = 0; i < 2; ++i) key.add(p.stride[i]).add(p.padding[i]).add(p.dilation[i]);
  key.add(dnnl_prepare_threads());
}

std::shared_ptr<DnnlPrimitive> wrap(const dnnl::primitive_desc& pd, dnnl::primitive prim) {
  auto r = std::make_shared<DnnlPrimitive>();
  r->pd = pd;
  r->prim = std::move(prim);
  r->impl = pd.impl_info_str();
  return r;
}

[[noreturn]] void rethrow(const char* op, const Tensor& w, const dnnl::error& e) {
  throw Error(str("[", op, "] oneDNN could not create a primitive for weight ", w.shape_string(),
                  ": ", e.what()));
}

std::shared_ptr<DnnlPrimitive> make_bwd_data(const memory::desc& diff_src,
                                             const memory::dims& wdims,
                                             const memory::desc& diff_dst, const Conv2dParams& p,
                                             const Tensor& w) {
  try {
    auto hint = forward_hint(diff_src, any_md(wdims), diff_dst, p);
    dnnl::convolution_backward_data::desc d(
        dnnl::algorithm::convolution_direct, diff_src, any_md(wdims), diff_dst,
        {p.stride[0], p.stride[1]}, {p.dilation[0] - 1, p.dilation[1] - 1},
        {p.padding[0], p.padding[1]}, {p.padding[0], p.padding[1]});
    dnnl::convolution_backward_data::primitive_desc pd(d, dnnl_default_attr(), dnnl_engine(), hint);
    return wrap(pd, dnnl::convolution_backward_data(pd));
  } catch (const dnnl::error& e) {
    rethrow("conv2d_backward_input", w, e);
  }
}

std::shared_ptr<DnnlPrimitive> make_bwd_weights(const memory::desc& src, const memory::dims& wdims,
                                                const memory::desc& diff_dst, const Conv2dParams& p,
                                                const Tensor& w) {
  try {
    auto hint = forward_hint(src, any_md(wdims), diff_dst, p);
    dnnl::convolution_backward_weights::desc d(
        dnnl::algorithm::convolution_direct, src, any_md(wdims), diff_dst,
        {p.stride[0], p.stride[1]}, {p.dilation[0] - 1, p.dilation[1] - 1},
        {p.padding[0], p.padding[1]}, {p.padding[0], p.padding[1]});
    dnnl::convolution_backward_weights::primitive_desc pd(d, dnnl_default_attr(), dnnl_engine(),
                                                          hint);
    return wrap(pd, dnnl::convolution_backward_weights(pd));
  } catch (const dnnl::error& e) {
    rethrow("conv2d_backward_weight", w, e);
  }
}

}  // namespace

void conv2d_backward_input_dnnl(const Tensor& grad_out, const Tensor& weight, const Conv2dParams& p,
                                const Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  Tensor go = to_channels_last_copy(grad_out);
  Tensor w = weight.is_non_overlapping_and_dense() ? weight : to_contiguous(weight);
  const memory::dims wdims = weight_dims(w.sizes(), p.groups);
  const bool gi_cl = grad_input.is_channels_last();
  memory::desc gi_md = dnnl_md(grad_input, gi_cl), go_md = dnnl_md(go, true);
  DnnlKey key;
  key.add(101).add(go.shape()).add(go.int_strides()).add(grad_input.shape());
  key.add(grad_input.int_strides()).add(w.shape());
  add_conv_key(key, p);
  auto prim = dnnl_cached_primitive(key, [&] { return make_bwd_data(gi_md, wdims, go_md, p, w); });
  if (slow_impl(prim->impl, p.groups)) {
    // Let oneDNN pick the activation layouts and reorder in and out.
    DnnlKey own = key;
    own.add(-2);
    auto alt = dnnl_cached_primitive(own, [&] {
      return make_bwd_data(any_md(grad_input.shape()), wdims, any_md(go.shape()), p, w);
    });
    if (!slow_impl(alt->impl, p.groups)) {
      const dnnl::primitive_desc& pd = alt->pd;
      Tensor dd = buffer_for(pd.diff_dst_desc()), ds = buffer_for(pd.diff_src_desc());
      memory dd_mem = dnnl_mem(pd.diff_dst_desc(), dd), ds_mem = dnnl_mem(pd.diff_src_desc(), ds);
      reorder(dnnl_mem(go_md, go), dd_mem);
      DnnlWeight wmem = dnnl_cached_weight(
          w, [&] { return stored_weight_md(w, p.groups); }, pd.weights_desc());
      dnnl_execute(
          *alt,
          {{DNNL_ARG_DIFF_DST, dd_mem}, {DNNL_ARG_WEIGHTS, wmem.mem}, {DNNL_ARG_DIFF_SRC, ds_mem}});
      reorder(ds_mem, dnnl_mem(gi_md, grad_input));
      return;
    }
  }
  const dnnl::primitive_desc& pd = prim->pd;
  DnnlWeight wmem = dnnl_cached_weight(
      w, [&] { return stored_weight_md(w, p.groups); }, pd.weights_desc());
  dnnl_execute(*prim, {{DNNL_ARG_DIFF_DST, dnnl_mem(pd.diff_dst_desc(), go)},
                       {DNNL_ARG_WEIGHTS, wmem.mem},
                       {DNNL_ARG_DIFF_SRC, dnnl_mem(pd.diff_src_desc(), grad_input)}});
}

void conv2d_backward_weight_dnnl(const Tensor& grad_out, const Tensor& x_in, const Conv2dParams& p,
                                 const Tensor& grad_weight) {
  if (grad_weight.numel() == 0) return;
  Tensor go = to_channels_last_copy(grad_out);
  Tensor x = to_channels_last_copy(x_in);
  const memory::dims wdims = weight_dims(grad_weight.sizes(), p.groups);
  memory::desc x_md = dnnl_md(x, true), go_md = dnnl_md(go, true);
  DnnlKey key;
  key.add(102).add(go.shape()).add(go.int_strides()).add(x.shape()).add(x.int_strides());
  key.add(grad_weight.shape());
  add_conv_key(key, p);
  auto prim = dnnl_cached_primitive(
      key, [&] { return make_bwd_weights(x_md, wdims, go_md, p, grad_weight); });
  memory gw_mem = dnnl_mem(stored_weight_md(grad_weight, p.groups), grad_weight);
  if (slow_impl(prim->impl, p.groups)) {
    DnnlKey own = key;
    own.add(-2);
    auto alt = dnnl_cached_primitive(own, [&] {
      return make_bwd_weights(any_md(x.shape()), wdims, any_md(go.shape()), p, grad_weight);
    });
    if (!slow_impl(alt->impl, p.groups)) {
      const dnnl::primitive_desc& pd = alt->pd;
      Tensor src = buffer_for(pd.src_desc()), dd = buffer_for(pd.diff_dst_desc());
      Tensor dw = buffer_for(pd.diff_weights_desc());
      memory src_mem = dnnl_mem(pd.src_desc(), src), dd_mem = dnnl_mem(pd.diff_dst_desc(), dd);
      memory dw_mem = dnnl_mem(pd.diff_weights_desc(), dw);
      reorder(dnnl_mem(x_md, x), src_mem);
      reorder(dnnl_mem(go_md, go), dd_mem);
      dnnl_execute(
          *alt,
          {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_DIFF_DST, dd_mem}, {DNNL_ARG_DIFF_WEIGHTS, dw_mem}});
      reorder(dw_mem, gw_mem);
      return;
    }
  }
  const dnnl::primitive_desc& pd = prim->pd;
  Tensor dw = buffer_for(pd.diff_weights_desc());
  memory dw_mem = dnnl_mem(pd.diff_weights_desc(), dw);
  dnnl_execute(*prim, {{DNNL_ARG_SRC, dnnl_mem(pd.src_desc(), x)},
                       {DNNL_ARG_DIFF_DST, dnnl_mem(pd.diff_dst_desc(), go)},
                       {DNNL_ARG_DIFF_WEIGHTS, dw_mem}});
  reorder(dw_mem, gw_mem);
}

}  // namespace lathe::detail
