// cat and stack.
#include "lathe/kernels/elementwise.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

// torch.cat skips legacy empty 1-d tensors of shape [0] when others have more dims.
bool skipped(const Tensor& t, int64_t ndim) {
  return t.dim() == 1 && t.sizes()[0] == 0 && ndim != 1;
}

// True when t (4-d) is channels-last and not row-major, judged at trace-time values (no guard).
bool channels_last_not_row_major(const Tensor& t) {
  if (t.dim() != 4) return false;
  int64_t sz[4], st[4];
  for (int d = 0; d < 4; ++d) sz[d] = t.sizes()[d].hint(), st[d] = t.strides()[d].hint();
  auto dense_in = [&](std::initializer_list<int> inner_first) {
    int64_t expected = 1;
    for (int d : inner_first) {
      if (sz[d] == 1) continue;
      if (st[d] != expected) return false;
      expected *= sz[d];
    }
    return true;
  };
  return dense_in({1, 3, 2, 0}) && !dense_in({3, 2, 1, 0});
}

std::vector<TensorMeta> cat_rule(TensorList in, const Attrs& a) {
  LATHE_CHECK(!in.empty(), "[cat] needs at least one tensor");
  const Tensor* ref = nullptr;
  int64_t ndim = 1;
  for (const Tensor& t : in)
    if (!(t.dim() == 1 && t.sizes()[0] == 0)) {
      ref = &t;
      ndim = t.dim();
      break;
    }
  if (!ref) ref = &in[0];
  LATHE_CHECK(ref->dim() > 0, "[cat] zero-dimensional tensor ", ref->shape_string(),
              " cannot be concatenated");
  int64_t d = wrap_dim(a.get_int("dim"), ref->dim(), "cat");
  Shape out = ref->sizes();
  out[d] = 0;
  DType dt = in[0].dtype();
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    dt = promote_types(dt, t.dtype());
    if (skipped(t, ndim)) continue;
    LATHE_CHECK(t.dim() == ref->dim(), "[cat] tensor ", i, " has ", t.dim(),
                " dims but tensor 0 has ", ref->dim(), ": ", t.shape_string(), " vs ",
                ref->shape_string());
    for (int64_t k = 0; k < t.dim(); ++k)
      LATHE_CHECK(k == d || t.sizes()[k] == ref->sizes()[k],
                  "[cat] sizes must match except in dim ", d, ": tensor ", i, " is ",
                  t.shape_string(), ", tensor 0 is ", ref->shape_string());
    out[d] = out[d] + t.sizes()[d];
  }
  TensorMeta m = result_meta(out, dt, in[0].device());
  // The result follows the first input when it is channels-last (and not also row-major), else
  // it is row-major; decided at the sizes' trace-time values while tracing.
  m.strides = out.size() == 4 && channels_last_not_row_major(in[0]) ? channels_last_strides(m.sizes)
                                                                    : contiguous_strides(m.sizes);
  return {m};
}

void cat_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>& m,
                    TensorList outs) {
  int64_t d = wrap_dim(a.get_int("dim"), static_cast<int64_t>(m[0].sizes.size()), "cat");
  const Tensor& out = outs[0];
  int64_t off = 0;
  int64_t ndim = static_cast<int64_t>(m[0].sizes.size());
  for (const Tensor& t : in) {
    if (skipped(t, ndim)) continue;
    int64_t n = t.size(d).expect_int();
    if (n) kernels::copy(out.slice(d, off, off + n), t);
    off += n;
  }
}

std::vector<Tensor> cat_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>& m) {
  std::vector<Tensor> outs{empty_strided(m[0].sizes, m[0].strides, m[0].dtype)};
  cat_out_kernel(in, a, m, outs);
  return outs;
}

}  // namespace

namespace detail {
void register_shape_ops(OpRegistry& r) {
  OpDef cat = define_op("cat", -1, cat_rule, cat_kernel, OpCategory::copy,
                        {required("dim", AttrType::integer)});
  r.add(std::move(cat), cat_out_kernel);
}
}  // namespace detail

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  return dispatch1(LATHE_OP("cat"), xs, Attrs{{"dim", dim}});
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  LATHE_CHECK(!xs.empty(), "[stack] needs at least one tensor");
  int64_t d = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  for (size_t i = 0; i < xs.size(); ++i) {
    LATHE_CHECK(xs[i].sizes() == xs[0].sizes(),
                "[stack] all tensors must have the same shape: tensor ", i, " is ",
                xs[i].shape_string(), ", tensor 0 is ", xs[0].shape_string());
    u.push_back(xs[i].unsqueeze(d));
  }
  return cat(u, d);
}

}  // namespace lathe
