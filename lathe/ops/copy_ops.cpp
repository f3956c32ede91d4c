// Copies: clone (with a memory format), dtype conversion, copy_ and fill_.
#include <optional>

#include "lathe/kernels/elementwise.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

// Strides for `fmt`: "contiguous", "channels_last" or "preserve" (keep x's dim order if dense).
Tensor alloc_like(const Tensor& x, DType dt, const std::string& fmt) {
  if (fmt == "channels_last") return empty_strided(x.sizes(), channels_last_strides(x.sizes()), dt);
  if (fmt == "preserve") return empty_like(x, dt);
  return empty(x.sizes(), dt);
}

std::vector<TensorMeta> clone_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  const std::string& fmt = a.get_string("memory_format");
  LATHE_CHECK(fmt == "contiguous" || fmt == "channels_last" || fmt == "preserve",
              "[clone] unknown memory_format '", fmt, "'");
  LATHE_CHECK(fmt != "channels_last" || x.dim() == 4,
              "[clone] channels_last needs a 4-d tensor, got ", x.shape_string());
  TensorMeta m;
  m.sizes = x.sizes();
  m.dtype = a.has("dtype") ? a.get_dtype("dtype") : x.dtype();
  m.device = x.device();
  // A fixed memory format decides the layout; "preserve" follows the layout rule.
  if (fmt == "contiguous") m.strides = contiguous_strides(m.sizes);
  if (fmt == "channels_last") m.strides = channels_last_strides(m.sizes);
  return {m};
}

std::vector<Tensor> clone_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>& m) {
  Tensor out = alloc_like(in[0], m[0].dtype, a.get_string("memory_format"));
  kernels::copy(out, in[0]);
  return {out};
}

std::vector<TensorMeta> copy_inplace_rule(TensorList in, const Attrs&) {
  const Tensor& self = in[0];
  const Tensor& src = in[1];
  check_broadcasts_to(src, self, "copy_");
  TensorMeta m;
  m.sizes = self.sizes();
  m.dtype = self.dtype();
  m.device = self.device();
  m.is_view = true;
  m.strides = self.strides();
  m.offset = self.storage_offset();
  return {m};
}

std::vector<Tensor> copy_inplace_kernel(TensorList in, const Attrs&,
                                        const std::vector<TensorMeta>&) {
  Tensor src = kernels::broadcast_to(in[1], in[0].sizes());
  kernels::copy(in[0], src);
  return {in[0]};
}

std::vector<TensorMeta> fill_rule(TensorList in, const Attrs&) {
  TensorMeta m;
  m.sizes = in[0].sizes();
  m.dtype = in[0].dtype();
  m.device = in[0].device();
  m.is_view = true;
  m.strides = in[0].strides();
  m.offset = in[0].storage_offset();
  return {m};
}

std::vector<Tensor> fill_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>&) {
  kernels::fill(in[0], a.get_double("value"));
  return {in[0]};
}

}  // namespace

namespace detail {
void register_copy_ops(OpRegistry& r) {
  using T = AttrType;
  // All three move values of any dtype (kernels::copy / fill convert per element).
  OpDef clone = define_op("clone", 1, clone_rule, clone_kernel, OpCategory::copy,
                          {required("memory_format", T::string), optional("dtype", T::dtype)});
  clone.native_low_precision = true;
  r.add(std::move(clone));
  OpDef copy =
      define_op("copy_", 2, copy_inplace_rule, copy_inplace_kernel, OpCategory::in_place, {});
  copy.native_low_precision = true;
  copy.mutated_inputs = {0};
  copy.output_aliases = {0};
  copy.functional_variant = "copy";
  r.add(std::move(copy));
  OpDef fill = define_op("fill_", 1, fill_rule, fill_kernel, OpCategory::in_place,
                         {required("value", T::real)});
  fill.mutated_inputs = {0};
  fill.output_aliases = {0};
  fill.functional_variant = "fill";
  fill.native_low_precision = true;
  r.add(std::move(fill));
}
}  // namespace detail

// ---- the copy ops behind Tensor's copy members (core/tensor_methods.h) ----

namespace {

Tensor clone_of(const Tensor& x, const char* fmt, std::optional<DType> dt) {
  Attrs a{{"memory_format", std::string(fmt)}};
  if (dt) a.set("dtype", *dt);
  return dispatch1(LATHE_OP("clone"), {&x, 1}, a);
}

void copy_into(const Tensor& self, const Tensor& src) {
  Tensor in[2] = {self, src};
  dispatch(LATHE_OP("copy_"), in, Attrs{});
}

void fill_with(const Tensor& self, double v) {
  dispatch(LATHE_OP("fill_"), {&self, 1}, Attrs{{"value", v}});
}

}  // namespace

void detail::set_copy_functions(TensorOpFunctions& f) {
  f.clone = clone_of;
  f.copy_ = copy_into;
  f.fill_ = fill_with;
}

}  // namespace lathe
