#include "lathe/ops/op_def.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "lathe/core/device_registry.h"
#include "lathe/ops/autocast.h"
#include "lathe/ops/autograd.h"
#include "lathe/ops/register.h"

namespace lathe {

OpRegistry& OpRegistry::global() {
  static OpRegistry* reg = [] {
    auto* r = new OpRegistry();
    detail::register_view_ops(*r);
    detail::register_copy_ops(*r);
    detail::register_elementwise_ops(*r);
    detail::register_reduction_ops(*r);
    detail::register_shape_ops(*r);
    detail::register_nn_ops(*r);
    detail::register_dnnl_ops(*r);
    detail::register_fused_ops(*r);
    detail::register_functional_ops(*r);
    detail::register_attention_ops(*r);
    detail::register_backward_ops(*r);
    detail::register_vjps(*r);
    return r;
  }();
  return *reg;
}

const OpDef& OpRegistry::add(OpDef op, OutKernel out) {
  LATHE_CHECK(find(op.name) == nullptr, "[ops] op '", op.name, "' is registered twice");
  ops_.push_back(std::make_unique<OpDef>(std::move(op)));
  if (out) outs_.emplace_back(ops_.back().get(), std::move(out));
  return *ops_.back();
}

const OpDef* OpRegistry::find(const std::string& name) const {
  for (const auto& op : ops_)
    if (op->name == name) return op.get();
  return nullptr;
}

const OpDef& OpRegistry::get(const std::string& name) const {
  const OpDef* op = find(name);
  LATHE_CHECK(op != nullptr, "[ops] unknown op '", name, "'");
  return *op;
}

OpDef& OpRegistry::get_mutable(const std::string& name) {
  for (auto& op : ops_)
    if (op->name == name) return *op;
  throw Error(detail::str("[ops] unknown op '", name, "'"));
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> r;
  for (const auto& op : ops_) r.push_back(op->name);
  return r;
}

void attach_parsed_attrs(const OpDef& op, Attrs& attrs) {
  if (!op.parse_attrs || attrs.has_parsed()) return;
  try {
    attrs.set_parsed(op.parse_attrs(attrs));
  } catch (const Error&) {
    // Left unparsed: the shape rule reads them by name and reports what is wrong.
  }
}

const char* category_name(OpCategory c) {
  switch (c) {
    case OpCategory::unknown:
      return "unknown";
    case OpCategory::pointwise:
      return "pointwise";
    case OpCategory::reduction:
      return "reduction";
    case OpCategory::view:
      return "view";
    case OpCategory::in_place:
      return "in_place";
    case OpCategory::random:
      return "random";
    case OpCategory::copy:
      return "copy";
    case OpCategory::normalization:
      return "normalization";
    case OpCategory::contraction:
      return "contraction";
    case OpCategory::pooling:
      return "pooling";
    case OpCategory::fused:
      return "fused";
    case OpCategory::other:
      return "other";
  }
  return "?";
}

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::boolean:
      return "a bool";
    case AttrType::integer:
      return "an int";
    case AttrType::real:
      return "a float";
    case AttrType::int_list:
      return "an int list";
    case AttrType::sym_int:
      return "an int (or a one-element size list)";
    case AttrType::string:
      return "a string";
    case AttrType::dtype:
      return "a dtype";
  }
  return "?";
}

const char* post_op_name(PostOp::Kind k) {
  switch (k) {
    case PostOp::Kind::relu:
      return "relu";
    case PostOp::Kind::clip:
      return "clip";
    case PostOp::Kind::gelu_erf:
      return "gelu";
    case PostOp::Kind::gelu_tanh:
      return "gelu_tanh";
  }
  return "?";
}

bool OpDef::mutates(const Attrs& attrs, int input) const {
  if (std::find(mutated_inputs.begin(), mutated_inputs.end(), input) == mutated_inputs.end())
    return false;
  return !mutates_when || mutates_when(attrs);
}

bool OpDef::mutates_any(const Attrs& attrs) const {
  return !mutated_inputs.empty() && (!mutates_when || mutates_when(attrs));
}

int OpDef::aliased_input(int output) const {
  return output >= 0 && output < static_cast<int>(output_aliases.size()) ? output_aliases[output]
                                                                         : -1;
}

namespace {

const char* value_type_name(const AttrValue& v) {
  static const char* names[] = {"bool", "int", "float", "int list", "string", "dtype"};
  return names[v.index()];
}

bool fits(const AttrValue& v, AttrType t) {
  switch (t) {
    case AttrType::boolean:
      return std::holds_alternative<bool>(v);
    case AttrType::integer:
      return std::holds_alternative<int64_t>(v);
    case AttrType::real:
      return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v);
    case AttrType::int_list:
      return std::holds_alternative<Shape>(v);
    case AttrType::sym_int:
      return std::holds_alternative<int64_t>(v) ||
             (std::holds_alternative<Shape>(v) && std::get<Shape>(v).size() == 1);
    case AttrType::string:
      return std::holds_alternative<std::string>(v);
    case AttrType::dtype:
      return std::holds_alternative<DType>(v);
  }
  return false;
}

}  // namespace

std::string OpDef::attr_error(const Attrs& attrs) const {
  if (!attr_schema) return {};
  for (const auto& [key, value] : attrs.items()) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : *attr_schema)
      if (std::strcmp(s.name, key) == 0) spec = &s;
    if (spec == nullptr) {
      std::string known;
      for (const AttrSpec& s : *attr_schema)
        known += detail::str(known.empty() ? "" : ", ", s.name);
      return detail::str("unknown attribute '", key, "' (the op takes ",
                         known.empty() ? std::string("none") : known, ")");
    }
    if (!fits(value, spec->type))
      return detail::str("attribute '", key, "' must be ", attr_type_name(spec->type), ", got ",
                         value_type_name(value));
  }
  for (const AttrSpec& s : *attr_schema)
    if (s.required && !attrs.has(s.name))
      return detail::str("missing attribute '", s.name, "' (", attr_type_name(s.type), ")");
  return {};
}

// Throws unless the defined inputs share `device` (0-dim CPU tensors may join device ones).
static void check_devices(const OpDef& op, TensorList inputs, Device device) {
  for (const Tensor& t : inputs) {
    if (!t.defined() || t.device() == device) continue;
    if (t.dim() == 0 && t.device().is_cpu()) continue;
    throw Error(detail::str("[", op.name, "] inputs are on different devices: ", t.device(),
                            " and ", device, " (input ", t.shape_string(), " is on the ",
                            t.device(), "; move it with .to(Device::", device, "())"));
  }
}

std::vector<Tensor> dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs) {
  // Autocast comes before the shape rule (its casts make mixed-dtype calls valid) and before the
  // modes (the tracer records the casts); it dispatches again with itself off.
  if (detail::autocast_state().enabled) [[unlikely]]
    return detail::autocast_dispatch(op, inputs, attrs);
  if (op.num_inputs >= 0) {
    LATHE_CHECK(static_cast<int>(inputs.size()) == op.num_inputs, "[", op.name, "] takes ",
                op.num_inputs, " tensor inputs, got ", inputs.size());
  }
  // One byte compare per input keeps eager dispatch as fast as before.
  const Tensor* on_device = nullptr;
  for (const Tensor& t : inputs)
    if (!on_device && t.defined() && !t.impl().device.is_cpu()) on_device = &t;
  if (on_device) check_devices(op, inputs, on_device->device());
  std::vector<TensorMeta> metas = op.shape(inputs, attrs);
  // Modes (the tracer) see ops without autograd: compiled training is not built yet.
  if (DispatchMode* mode = current_dispatch_mode())
    return mode->dispatch(op, inputs, attrs, std::move(metas));
  const bool record = detail::autograd_should_record(op, inputs, attrs);
  const detail::AutogradPreState pre =
      record ? detail::autograd_before(op) : detail::AutogradPreState{};
  std::vector<Tensor> out;
  if (on_device) {
    out = detail::device_functions(on_device->device().kind(), op.name.c_str())
              .dispatch(op, inputs, attrs, std::move(metas));
  } else {
    for (const Tensor& t : inputs) {
      if (t.defined() && !t.has_storage())
        throw Error(detail::str("[", op.name, "] input ", t.shape_string(),
                                " has no data (fake or lazy tensor outside its mode)"));
    }
    out = run_eager_kernel(op, inputs, attrs, metas);
    for (int i : op.mutated_inputs)
      if (i < static_cast<int>(inputs.size()) && inputs[i].defined() && op.mutates(attrs, i))
        inputs[i].bump_version();
  }
  if (record) detail::autograd_record(op, inputs, attrs, out, pre);
  return out;
}

Tensor dispatch1(const OpDef& op, TensorList inputs, const Attrs& attrs) {
  std::vector<Tensor> out = dispatch(op, inputs, attrs);
  return std::move(out.at(0));
}

}  // namespace lathe
