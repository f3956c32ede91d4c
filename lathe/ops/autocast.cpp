#include "lathe/ops/autocast.h"

#include <unordered_map>

namespace lathe {
namespace {

// PyTorch's CPU autocast lists (torch/csrc/autograd autocast_mode.cpp, CPU), for Lathe's ops.
const std::unordered_map<std::string, AutocastPolicy>& policy_table() {
  using P = AutocastPolicy;
  static const std::unordered_map<std::string, AutocastPolicy> table{
      {"conv2d", P::lower},  {"linear", P::lower},           {"matmul", P::lower},
      {"nll_loss", P::fp32}, {"batch_norm", P::f32_compute}, {"layer_norm", P::f32_compute},
      {"cat", P::promote},   {"where", P::promote}};
  return table;
}

// Restores the autocast state at the end of a scope.
struct RestoreState {
  explicit RestoreState(detail::AutocastState s) : saved(s) {}
  ~RestoreState() { detail::autocast_state() = saved; }
  detail::AutocastState saved;
};

bool low_precision_float(const Tensor& t) { return t.defined() && is_low_precision(t.dtype()); }

}  // namespace

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : previous_(detail::autocast_state()) {
  LATHE_CHECK(dtype == DType::bf16 || dtype == DType::f16,
              "[autocast] the autocast dtype is bf16 or f16, got ", dtype_name(dtype));
  detail::autocast_state() = detail::AutocastState{enabled, dtype};
}

AutocastGuard::~AutocastGuard() { detail::autocast_state() = previous_; }

bool is_autocast_enabled() { return detail::autocast_state().enabled; }
DType autocast_dtype() { return detail::autocast_state().dtype; }

const char* autocast_policy_name(AutocastPolicy p) {
  switch (p) {
    case AutocastPolicy::none:
      return "none";
    case AutocastPolicy::lower:
      return "lower";
    case AutocastPolicy::fp32:
      return "fp32";
    case AutocastPolicy::f32_compute:
      return "f32_compute";
    case AutocastPolicy::promote:
      return "promote";
  }
  return "?";
}

AutocastPolicy autocast_policy(const std::string& op_name) {
  const auto& t = policy_table();
  auto it = t.find(op_name);
  return it == t.end() ? AutocastPolicy::none : it->second;
}

Tensor autocast_to_f32(const Tensor& x) {
  if (!is_autocast_enabled() || !low_precision_float(x)) return x;
  RestoreState restore(detail::autocast_state());
  detail::autocast_state().enabled = false;
  return x.to(DType::f32);
}

namespace detail {

std::vector<Tensor> autocast_dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs) {
  const DType low = autocast_state().dtype;
  RestoreState restore(autocast_state());
  autocast_state().enabled = false;  // the casts and the op dispatch as usual
  const AutocastPolicy p = autocast_policy(op.name);
  if (p == AutocastPolicy::none) return dispatch(op, inputs, attrs);
  std::vector<Tensor> in(inputs.begin(), inputs.end());
  auto cast_all = [&](auto&& eligible, DType to) {
    for (Tensor& t : in)
      if (t.defined() && eligible(t)) t = t.to(to);
  };
  switch (p) {
    case AutocastPolicy::lower:
      // f32 (and the other low dtype) to the autocast dtype; f64 stays, as in PyTorch.
      cast_all([&](const Tensor& t) { return t.dtype() == DType::f32 || low_precision_float(t); },
               low);
      return dispatch(op, in, attrs);
    case AutocastPolicy::fp32:
      cast_all(low_precision_float, DType::f32);
      return dispatch(op, in, attrs);
    case AutocastPolicy::f32_compute: {
      const DType out_dtype = in[0].defined() ? in[0].dtype() : DType::f32;
      if (!is_low_precision(out_dtype)) return dispatch(op, in, attrs);
      in[0] = in[0].to(DType::f32);
      std::vector<Tensor> out = dispatch(op, in, attrs);
      for (Tensor& t : out)
        if (t.defined() && t.dtype() == DType::f32) t = t.to(out_dtype);
      return out;
    }
    case AutocastPolicy::promote: {
      DType widest = DType::bf16;
      bool any_low = false, any_f32 = false, any_f64 = false;
      for (const Tensor& t : in) {
        if (!t.defined() || !is_floating(t.dtype())) continue;
        any_low |= is_low_precision(t.dtype());
        any_f32 |= t.dtype() == DType::f32;
        any_f64 |= t.dtype() == DType::f64;
      }
      if (!any_low) return dispatch(op, in, attrs);
      widest = any_f64 ? DType::f64 : any_f32 ? DType::f32 : low;
      cast_all([&](const Tensor& t) { return is_floating(t.dtype()) && t.dtype() != widest; },
               widest);
      return dispatch(op, in, attrs);
    }
    case AutocastPolicy::none:
      break;
  }
  return dispatch(op, in, attrs);
}

}  // namespace detail

}  // namespace lathe
