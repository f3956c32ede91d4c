// Out-of-place forms of the in-place ops (what ir::functionalize rewrites them into) and the
// scatter that writes a view's new value back into its base:
//   copy(self, src)                    src converted to self's dtype, broadcast to self's shape
//   fill(self; value)                  a tensor like self, every element `value`
//   as_strided_scatter(base, src; size, stride, offset)
//                                      a copy of base whose as_strided(size, stride,
//                                      offset) window holds src (as torch.as_strided_scatter for a
//                                      contiguous base: the window is counted in elements of the
//                                      base's row-major layout, from its first element); the
//                                      result has base's layout
// (mul_scalar lives with mul_scalar_ in elementwise_ops.cpp, batch_norm_functional with
// batch_norm in nn_ops.cpp.)
#include "lathe/kernels/elementwise.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

std::vector<TensorMeta> copy_rule(TensorList in, const Attrs&) {
  const Tensor& self = in[0];
  const Tensor& src = in[1];
  check_broadcasts_to(src, self, "copy");
  return {result_meta(self.sizes(), self.dtype(), self.device())};
}

std::vector<Tensor> copy_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>& m) {
  Tensor out = alloc_output(m[0].sizes, m[0].dtype, in.subspan(0, 1));
  kernels::copy(out, kernels::broadcast_to(in[1], m[0].sizes));
  return {out};
}

std::vector<TensorMeta> fill_rule(TensorList in, const Attrs&) {
  return {result_meta(in[0].sizes(), in[0].dtype(), in[0].device())};
}

std::vector<Tensor> fill_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>& m) {
  Tensor out = alloc_output(m[0].sizes, m[0].dtype, in);
  kernels::fill(out, a.get_double("value"));
  return {out};
}

std::vector<TensorMeta> as_strided_scatter_rule(TensorList in, const Attrs& a) {
  const Tensor& base = in[0];
  const Tensor& src = in[1];
  const Shape& sz = a.get_shape("size");
  const Shape& st = a.get_shape("stride");
  const int64_t off = a.get_int("offset");
  LATHE_CHECK(sz.size() == st.size(), "[as_strided_scatter] ", sz.size(), " sizes but ", st.size(),
              " strides");
  LATHE_CHECK(src.sizes() == sz, "[as_strided_scatter] src ", src.shape_string(),
              " must have the window's size ", sz);
  LATHE_CHECK(src.dtype() == base.dtype(), "[as_strided_scatter] src ", src.shape_string(),
              " must have the dtype of base ", base.shape_string());
  LATHE_CHECK(off >= 0, "[as_strided_scatter] negative offset ", off);
  // The window must lie inside the base (decided on concrete sizes; symbolic ones are the
  // caller's, ir::functionalize's, responsibility).
  bool concrete = true, empty = false;
  int64_t last = off;
  for (size_t i = 0; i < sz.size() && concrete; ++i) {
    auto n = sz[i].maybe_int(), s = st[i].maybe_int();
    concrete = n && s;
    if (!concrete) break;
    LATHE_CHECK(*n >= 0 && *s >= 0, "[as_strided_scatter] negative size or stride in ", sz, " ",
                st);
    if (*n == 0) empty = true;
    last += (*n - 1) * *s;
  }
  if (concrete && !empty) {
    if (auto numel = shape_numel(base.sizes()).maybe_int())
      LATHE_CHECK(last < *numel, "[as_strided_scatter] window ", sz, " strides ", st, " offset ",
                  off, " reaches past the ", *numel, " elements of base ", base.shape_string());
  }
  // Laid out like base (as the base written in place in eager keeps its layout).
  TensorMeta m = result_meta(base.sizes(), base.dtype(), base.device());
  m.strides = output_strides(m.sizes, in.subspan(0, 1));
  return {m};
}

std::vector<Tensor> as_strided_scatter_kernel(TensorList in, const Attrs& a,
                                              const std::vector<TensorMeta>& m) {
  Tensor out = alloc_output(m[0].sizes, m[0].dtype, in.subspan(0, 1));
  // The window counts elements of the row-major layout: scatter into a row-major tensor, then
  // copy that into base's layout when it is another one.
  Tensor row_major = out.is_contiguous() ? out : empty(m[0].sizes, m[0].dtype);
  kernels::copy(row_major, in[0]);
  Tensor window =
      make_view(row_major, a.get_shape("size"), a.get_shape("stride"), a.get_int("offset"));
  kernels::copy(window, in[1]);
  if (!out.is_same(row_major)) kernels::copy(out, row_major);
  return {out};
}

}  // namespace

namespace detail {
void register_functional_ops(OpRegistry& r) {
  using T = AttrType;
  r.add(define_op("copy", 2, copy_rule, copy_kernel, OpCategory::copy, {}));
  r.add(
      define_op("fill", 1, fill_rule, fill_kernel, OpCategory::copy, {required("value", T::real)}));
  r.add(define_op("as_strided_scatter", 2, as_strided_scatter_rule, as_strided_scatter_kernel,
                  OpCategory::copy,
                  {required("size", T::int_list), required("stride", T::int_list),
                   required("offset", T::integer)}));
}
}  // namespace detail

Tensor as_strided_scatter(const Tensor& base, const Tensor& src, const Shape& size,
                          const Shape& stride, int64_t offset) {
  Tensor in[2] = {base, src};
  return dispatch1(LATHE_OP("as_strided_scatter"), in,
                   Attrs{{"size", size}, {"stride", stride}, {"offset", offset}});
}

}  // namespace lathe
