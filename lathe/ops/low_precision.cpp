// bf16 and f16 in eager kernels: an op whose kernel does not read them itself runs on f32 copies
// of its 16-bit inputs and its results are rounded once to the dtype its shape rule gave, which
// is what PyTorch's CPU kernels do for most ops (compute in float, round on store). The
// accumulation of reductions, norms and contractions is therefore f32, never bf16.
#include "lathe/kernels/elementwise.h"
#include "lathe/ops/op_def.h"

namespace lathe {
namespace {

bool widens(const OpDef& op, TensorList inputs, const std::vector<TensorMeta>& metas) {
  if (op.native_low_precision || op.category == OpCategory::view) return false;
  bool any = false;
  for (const Tensor& t : inputs) any |= t.defined() && is_low_precision(t.dtype());
  for (const TensorMeta& m : metas) any |= is_low_precision(m.dtype);
  if (!any) return false;
  return !(op.native_low_precision_for && op.native_low_precision_for(inputs));
}

// A dtype attribute that asks for a 16-bit result asks the f32 kernel for f32.
Attrs widened_attrs(const Attrs& attrs) {
  bool any = false;
  for (const Attrs::Item& it : attrs.items())
    if (const DType* d = std::get_if<DType>(&it.second); d && is_low_precision(*d)) any = true;
  if (!any) return attrs;
  Attrs out;
  for (const Attrs::Item& it : attrs.items()) {
    const DType* d = std::get_if<DType>(&it.second);
    out.set(it.first, d && is_low_precision(*d) ? AttrValue(DType::f32) : it.second);
  }
  return out;
}

// A copy of t in `dt` with t's dim order (when dense).
Tensor converted(const Tensor& t, DType dt) {
  Tensor out = empty_like(t, dt);
  kernels::copy(out, t);
  return out;
}

std::vector<Tensor> run_widened(const OpDef& op, TensorList inputs, const Attrs& attrs,
                                const std::vector<TensorMeta>& metas) {
  std::vector<Tensor> wide(inputs.begin(), inputs.end());
  std::vector<bool> widened(inputs.size(), false);
  for (size_t i = 0; i < wide.size(); ++i) {
    if (wide[i].defined() && is_low_precision(wide[i].dtype())) {
      wide[i] = converted(wide[i], DType::f32);
      widened[i] = true;
    }
  }
  std::vector<TensorMeta> wide_metas = metas;
  for (TensorMeta& m : wide_metas)
    if (is_low_precision(m.dtype)) m.dtype = DType::f32;
  std::vector<Tensor> out = op.kernel(wide, widened_attrs(attrs), wide_metas);
  // Written inputs get the new values, rounded; outputs that alias them are the inputs.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (widened[i] && op.mutates(attrs, static_cast<int>(i))) kernels::copy(inputs[i], wide[i]);
  for (size_t k = 0; k < out.size() && k < metas.size(); ++k) {
    const int a = op.aliased_input(static_cast<int>(k));
    if (a >= 0 && a < static_cast<int>(inputs.size()) && widened[a]) {
      out[k] = inputs[a];
    } else if (out[k].defined() && out[k].dtype() != metas[k].dtype) {
      out[k] = converted(out[k], metas[k].dtype);
    }
  }
  return out;
}

}  // namespace

std::vector<Tensor> run_eager_kernel(const OpDef& op, TensorList inputs, const Attrs& attrs,
                                     const std::vector<TensorMeta>& metas) {
  if (widens(op, inputs, metas)) return run_widened(op, inputs, attrs, metas);
  return op.kernel(inputs, attrs, metas);
}

bool runs_widened(const OpDef& op, TensorList inputs, const std::vector<TensorMeta>& metas) {
  return widens(op, inputs, metas);
}

}  // namespace lathe
