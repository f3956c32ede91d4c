// Reductions: sum, mean, amax, amin, argmax, argmin, var, std (and max/min along a dim).
#include <limits>

#include "lathe/kernels/reduce.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

using kernels::ReduceKind;

DType reduce_dtype(const char* name, ReduceKind k, DType in) {
  switch (k) {
    case ReduceKind::sum:
      return is_floating(in) ? in : DType::i64;
    case ReduceKind::argmax:
    case ReduceKind::argmin:
      return DType::i64;
    case ReduceKind::amax:
    case ReduceKind::amin:
      return in;
    default:
      LATHE_CHECK(is_floating(in), "[", name, "] needs a floating input, got ", dtype_name(in),
                  " (convert with .to(DType::f32))");
      return in;
  }
}

ShapeRule reduce_rule(const char* name, ReduceKind k) {
  return [name, k](TensorList in, const Attrs& a) {
    const Tensor& x = in[0];
    auto dims = wrap_dims(a.get_ints("dims"), x.dim(), name);
    if ((k == ReduceKind::argmax || k == ReduceKind::argmin) && x.dim() > 0)
      LATHE_CHECK(dims.size() == 1, "[", name, "] reduces exactly one dim, got ", dims);
    bool keep = a.get_bool("keepdim");
    if (a.has("correction"))
      LATHE_CHECK(a.get_int("correction") >= 0, "[", name, "] correction must be >= 0, got ",
                  a.get_int("correction"));
    Shape out;
    for (int64_t d = 0; d < x.dim(); ++d) {
      bool r = std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!r)
        out.push_back(x.sizes()[d]);
      else if (keep)
        out.push_back(1);
      if (r && x.sizes()[d] == 0 && k != ReduceKind::sum && k != ReduceKind::mean &&
          k != ReduceKind::var && k != ReduceKind::std)
        throw Error(detail::str("[", name, "] cannot reduce over dim ", d, " of size 0 in ",
                                x.shape_string(), ": the operation has no identity"));
    }
    return std::vector<TensorMeta>{result_meta(out, reduce_dtype(name, k, x.dtype()), x.device())};
  };
}

EagerKernel reduce_kernel(const char* name, ReduceKind k) {
  return [name, k](TensorList in, const Attrs& a, const std::vector<TensorMeta>& m) {
    const Tensor& x = in[0];
    auto dims = wrap_dims(a.get_ints("dims"), x.dim(), name);
    int64_t corr = a.has("correction") ? a.get_int("correction") : 0;
    return std::vector<Tensor>{
        kernels::reduce(x, dims, a.get_bool("keepdim"), k, m[0].dtype, corr)};
  };
}

void add_reduce(OpRegistry& r, const char* name, ReduceKind k) {
  std::vector<AttrSpec> attrs{detail::required("dims", AttrType::int_list),
                              detail::required("keepdim", AttrType::boolean)};
  if (k == ReduceKind::var || k == ReduceKind::std)
    attrs.push_back(detail::optional("correction", AttrType::integer));
  r.add(detail::define_op(name, 1, reduce_rule(name, k), reduce_kernel(name, k),
                          OpCategory::reduction, std::move(attrs)));
}

constexpr int64_t kNoCorrection = std::numeric_limits<int64_t>::min();

Tensor red(const OpDef& op, const Tensor& x, std::vector<int64_t> dims, bool keepdim,
           int64_t correction = kNoCorrection) {
  Attrs a{{"dims", to_shape(dims)}, {"keepdim", keepdim}};
  if (correction != kNoCorrection) a.set("correction", correction);
  return dispatch1(op, {&x, 1}, a);
}

}  // namespace

namespace detail {
void register_reduction_ops(OpRegistry& r) {
  add_reduce(r, "sum", ReduceKind::sum);
  add_reduce(r, "mean", ReduceKind::mean);
  add_reduce(r, "amax", ReduceKind::amax);
  add_reduce(r, "amin", ReduceKind::amin);
  add_reduce(r, "max", ReduceKind::amax);
  add_reduce(r, "min", ReduceKind::amin);
  add_reduce(r, "argmax", ReduceKind::argmax);
  add_reduce(r, "argmin", ReduceKind::argmin);
  add_reduce(r, "var", ReduceKind::var);
  add_reduce(r, "std", ReduceKind::std);
}
}  // namespace detail

Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return red(LATHE_OP("sum"), x, std::move(dims), keepdim);
}
Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return red(LATHE_OP("mean"), x, std::move(dims), keepdim);
}
Tensor amax(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return red(LATHE_OP("amax"), x, std::move(dims), keepdim);
}
Tensor amin(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return red(LATHE_OP("amin"), x, std::move(dims), keepdim);
}
Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return red(LATHE_OP("max"), x, {dim}, keepdim);
}
Tensor min(const Tensor& x, int64_t dim, bool keepdim) {
  return red(LATHE_OP("min"), x, {dim}, keepdim);
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return red(LATHE_OP("argmax"), x, {dim}, keepdim);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return red(LATHE_OP("argmin"), x, {dim}, keepdim);
}
Tensor var(const Tensor& x, std::vector<int64_t> dims, int64_t correction, bool keepdim) {
  return red(LATHE_OP("var"), x, std::move(dims), keepdim, correction);
}
Tensor std_dev(const Tensor& x, std::vector<int64_t> dims, int64_t correction, bool keepdim) {
  return red(LATHE_OP("std"), x, std::move(dims), keepdim, correction);
}

}  // namespace lathe
