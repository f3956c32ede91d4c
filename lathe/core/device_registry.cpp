#include "lathe/core/device_registry.h"

#include <array>
#include <atomic>

#include "lathe/core/error.h"
#include "lathe/core/tensor.h"

namespace lathe {
namespace {

constexpr size_t kDeviceKinds = static_cast<size_t>(DeviceKind::lazy) + 1;
std::array<std::atomic<const detail::DeviceFunctions*>, kDeviceKinds> devices{};

// A handle on `device` over the memory of t (no copy).
Tensor alias_on(const Tensor& t, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl().storage;
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->offset = t.storage_offset();
  impl->dtype = t.dtype();
  impl->device = device;
  return Tensor(std::move(impl));
}

}  // namespace

void detail::register_device(DeviceKind kind, const DeviceFunctions* fns) {
  devices[static_cast<size_t>(kind)].store(fns);
}

const detail::DeviceFunctions* detail::find_device(DeviceKind kind) {
  return devices[static_cast<size_t>(kind)].load();
}

const detail::DeviceFunctions& detail::device_functions(DeviceKind kind, const char* what) {
  const DeviceFunctions* fns = find_device(kind);
  LATHE_CHECK(fns != nullptr, "[", what, "] no implementation of the ", Device(kind),
              " device is linked into this program (link lathe_", Device(kind),
              " and include lathe/lathe.h or lathe/", Device(kind), "/", Device(kind), ".h)");
  return *fns;
}

void detail::sync_devices() {
  for (const auto& d : devices)
    if (const DeviceFunctions* fns = d.load(); fns && fns->sync) fns->sync();
}

Tensor detail::device_buffer(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  LATHE_CHECK(t.has_storage(), "[device] tensor ", t.shape_string(), " on ", t.device(),
              " has no data; call lathe::sync() first");
  return alias_on(t, Device::cpu());
}

Tensor detail::wrap_device_buffer(const Tensor& buffer, Device device) {
  return alias_on(buffer, device);
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  // One side is the CPU (the only device core implements); the other one moves the data.
  Device other = d.is_cpu() ? device() : d;
  return detail::device_functions(other.kind(), "to").transfer(*this, d);
}

}  // namespace lathe
