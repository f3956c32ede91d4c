#include "lathe/kernels/dnnl_pool_backward.h"

#include <algorithm>

#include "lathe/kernels/dnnl_common.h"

namespace lathe::detail {
namespace {

using dnnl::memory;

// Right padding that makes oneDNN produce exactly `out` windows (as the forward, dnnl_pool.cpp).
int64_t right_padding(int64_t in, int64_t out, int64_t k, int64_t s, int64_t pl, int64_t d) {
  const int64_t dk = d * (k - 1) + 1;
  return std::max<int64_t>(0, (out - 1) * s + dk - in - pl);
}

struct PoolGeometry {
  memory::dims strides, kernel, dilation, pad_l, pad_r;
};

PoolGeometry geometry(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p) {
  PoolGeometry g;
  auto is = grad_input.shape(), os = grad_out.shape();
  for (int i = 0; i < 2; ++i) {
    g.strides.push_back(p.stride[i]);
    g.kernel.push_back(p.kernel[i]);
    g.dilation.push_back(p.dilation[i] - 1);
    g.pad_l.push_back(p.padding[i]);
    g.pad_r.push_back(
        right_padding(is[2 + i], os[2 + i], p.kernel[i], p.stride[i], p.padding[i], p.dilation[i]));
  }
  return g;
}

void add_geometry_key(DnnlKey& key, const PoolGeometry& g) {
  key.add(g.strides).add(g.kernel).add(g.dilation).add(g.pad_l).add(g.pad_r);
  key.add(dnnl_prepare_threads());
}

dnnl::pooling_v2_forward::primitive_desc forward_pd(dnnl::algorithm algo, const memory::desc& src,
                                                    const memory::desc& dst,
                                                    const PoolGeometry& g) {
  dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_training, algo, src, dst, g.strides,
                                   g.kernel, g.dilation, g.pad_l, g.pad_r);
  return dnnl::pooling_v2_forward::primitive_desc(d, dnnl_default_attr(), dnnl_engine());
}

std::shared_ptr<DnnlPrimitive> make_backward(dnnl::algorithm algo, const memory::desc& gi_md,
                                             const memory::desc& go_md, const PoolGeometry& g) {
  try {
    auto hint = forward_pd(algo, gi_md, go_md, g);
    dnnl::pooling_v2_backward::desc d(algo, gi_md, go_md, g.strides, g.kernel, g.dilation, g.pad_l,
                                      g.pad_r);
    dnnl::pooling_v2_backward::primitive_desc pd(d, dnnl_default_attr(), dnnl_engine(), hint);
    auto r = std::make_shared<DnnlPrimitive>();
    r->pd = pd;
    r->prim = dnnl::pooling_v2_backward(pd);
    r->impl = pd.impl_info_str();
    return r;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// The layout both sides are read and written in: grad_input's.
bool channels_last_of(const Tensor& grad_input) {
  return grad_input.is_channels_last() && !grad_input.is_contiguous();
}

Tensor in_layout(const Tensor& t, bool cl) {
  return cl ? to_channels_last_copy(t) : to_contiguous(t);
}

}  // namespace

bool max_pool2d_backward_dnnl(const Tensor& grad_out, const Tensor& x_in, const Pool2dParams& p,
                              const Tensor& grad_input) {
  if (grad_input.dtype() != DType::f32 || grad_input.numel() == 0 || grad_out.numel() == 0)
    return false;
  const bool cl = channels_last_of(grad_input);
  Tensor go = in_layout(grad_out, cl), x = in_layout(x_in, cl);
  memory::desc gi_md = dnnl_md(grad_input, cl), go_md = dnnl_md(go, cl), x_md = dnnl_md(x, cl);
  const PoolGeometry g = geometry(grad_input, go, p);
  DnnlKey key;
  key.add(105).add(x.shape()).add(x.int_strides()).add(go.shape()).add(go.int_strides());
  key.add(grad_input.int_strides());
  add_geometry_key(key, g);
  const auto algo = dnnl::algorithm::pooling_max;
  auto fwd = dnnl_cached_primitive(key, [&]() -> std::shared_ptr<DnnlPrimitive> {
    try {
      auto pd = forward_pd(algo, x_md, go_md, g);
      auto r = std::make_shared<DnnlPrimitive>();
      r->pd = pd;
      r->prim = dnnl::pooling_v2_forward(pd);
      r->impl = pd.impl_info_str();
      return r;
    } catch (const dnnl::error&) {
      return nullptr;
    }
  });
  DnnlKey bkey = key;
  bkey.add(-6);
  auto bwd = dnnl_cached_primitive(bkey, [&] { return make_backward(algo, gi_md, go_md, g); });
  if (!fwd || !bwd) return false;
  // The forward's output is only needed for its workspace (the argmax of each window).
  const memory::desc ws_md = fwd->pd.workspace_desc();
  Tensor pooled = empty_strided(go.sizes(), go.strides(), DType::f32);
  Tensor ws = empty({static_cast<int64_t>(ws_md.get_size() / sizeof(float)) + 1}, DType::f32);
  memory ws_mem = dnnl_mem(ws_md, ws);
  dnnl_execute(*fwd, {{DNNL_ARG_SRC, dnnl_mem(x_md, x)},
                      {DNNL_ARG_DST, dnnl_mem(go_md, pooled)},
                      {DNNL_ARG_WORKSPACE, ws_mem}});
  dnnl_execute(*bwd, {{DNNL_ARG_DIFF_DST, dnnl_mem(go_md, go)},
                      {DNNL_ARG_DIFF_SRC, dnnl_mem(gi_md, grad_input)},
                      {DNNL_ARG_WORKSPACE, ws_mem}});
  return true;
}

bool avg_pool2d_backward_dnnl(const Tensor& grad_out, const Pool2dParams& p,
                              const Tensor& grad_input) {
  if (grad_input.dtype() != DType::f32 || grad_input.numel() == 0 || grad_out.numel() == 0)
    return false;
  const bool cl = channels_last_of(grad_input);
  Tensor go = in_layout(grad_out, cl);
  const PoolGeometry g = geometry(grad_input, go, p);
  // oneDNN's include-padding divisor is always the full kernel; PyTorch clips windows that
  // ceil_mode pushes past the right padding (the forward makes the same check).
  for (int i = 0; i < 2; ++i)
    if (p.count_include_pad && g.pad_r[i] > p.padding[i]) return false;
  const auto algo = p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                        : dnnl::algorithm::pooling_avg_exclude_padding;
  memory::desc gi_md = dnnl_md(grad_input, cl), go_md = dnnl_md(go, cl);
  DnnlKey key;
  key.add(107).add(static_cast<int64_t>(algo)).add(grad_input.shape());
  key.add(grad_input.int_strides()).add(go.shape()).add(go.int_strides());
  add_geometry_key(key, g);
  auto bwd = dnnl_cached_primitive(key, [&] { return make_backward(algo, gi_md, go_md, g); });
  if (!bwd) return false;
  dnnl_execute(*bwd, {{DNNL_ARG_DIFF_DST, dnnl_mem(go_md, go)},
                      {DNNL_ARG_DIFF_SRC, dnnl_mem(gi_md, grad_input)}});
  return true;
}

}  // namespace lathe::detail
