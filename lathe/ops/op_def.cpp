#include "lathe/ops/op_def.h"

#include <atomic>
#include <mutex>

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
    return r;
  }();
  return *reg;
}

const OpDef& OpRegistry::add(OpDef op) {
  LATHE_CHECK(find(op.name) == nullptr, "[ops] op '", op.name, "' is registered twice");
  ops_.push_back(std::make_unique<OpDef>(std::move(op)));
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

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> r;
  for (const auto& op : ops_) r.push_back(op->name);
  return r;
}

static thread_local DispatchHook tls_hook = nullptr;

void set_dispatch_hook(DispatchHook hook) { tls_hook = hook; }
DispatchHook dispatch_hook() { return tls_hook; }

static std::atomic<DispatchHook> lazy_hook{nullptr};

void set_lazy_dispatch_hook(DispatchHook hook) { lazy_hook.store(hook); }

// Throws unless the defined inputs share one device (0-dim CPU tensors may join lazy ones).
static void check_lazy_devices(const OpDef& op, TensorList inputs) {
  for (const Tensor& t : inputs) {
    if (!t.defined() || t.device().kind() == DeviceKind::lazy) continue;
    if (t.dim() == 0) continue;
    throw Error(detail::str("[", op.name, "] inputs are on different devices: ", t.device(),
                            " and ", Device::lazy(), " (input ", t.shape_string(),
                            " is on the cpu; move it with .to(Device::lazy())"));
  }
}

std::vector<Tensor> dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs) {
  if (op.num_inputs >= 0) {
    LATHE_CHECK(static_cast<int>(inputs.size()) == op.num_inputs, "[", op.name, "] takes ",
                op.num_inputs, " tensor inputs, got ", inputs.size());
  }
  // One byte compare per input keeps eager dispatch as fast as before.
  bool lazy = false;
  for (const Tensor& t : inputs) lazy |= t.defined() && t.impl().device.kind() == DeviceKind::lazy;
  if (lazy) check_lazy_devices(op, inputs);
  std::vector<TensorMeta> metas = op.shape(inputs, attrs);
  if (tls_hook) return tls_hook(op, inputs, attrs, std::move(metas));
  if (lazy) {
    DispatchHook hook = lazy_hook.load();
    LATHE_CHECK(hook != nullptr, "[", op.name, "] has lazy inputs but no lazy device is set up");
    return hook(op, inputs, attrs, std::move(metas));
  }
  for (const Tensor& t : inputs) {
    if (t.defined() && !t.has_storage())
      throw Error(detail::str("[", op.name, "] input ", t.shape_string(),
                              " has no data (fake or lazy tensor outside its mode)"));
  }
  std::vector<Tensor> out = op.kernel(inputs, attrs, metas);
  for (int i : op.mutated_inputs)
    if (i < static_cast<int>(inputs.size()) && inputs[i].defined()) inputs[i].bump_version();
  return out;
}

Tensor dispatch1(const OpDef& op, TensorList inputs, const Attrs& attrs) {
  std::vector<Tensor> out = dispatch(op, inputs, attrs);
  return std::move(out.at(0));
}

}  // namespace lathe
