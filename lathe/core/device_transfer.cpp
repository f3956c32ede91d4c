#include "lathe/core/device_transfer.h"

#include <array>
#include <atomic>

#include "lathe/core/error.h"
#include "lathe/core/tensor.h"

namespace lathe {
namespace {

constexpr size_t kDeviceKinds = static_cast<size_t>(DeviceKind::lazy) + 1;
std::array<std::atomic<detail::DeviceTransferFn>, kDeviceKinds> transfers{};

}  // namespace

void detail::register_device_transfer(DeviceKind kind, DeviceTransferFn fn) {
  transfers[static_cast<size_t>(kind)].store(fn);
}

detail::DeviceTransferFn detail::device_transfer(DeviceKind kind) {
  return transfers[static_cast<size_t>(kind)].load();
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  // One side is the CPU (the only device core implements); the other one moves the data.
  Device other = d.is_cpu() ? device() : d;
  detail::DeviceTransferFn fn = detail::device_transfer(other.kind());
  LATHE_CHECK(fn != nullptr, "[to] no implementation of the ", other,
              " device is linked into this program (link lathe_", other, ")");
  return fn(*this, d);
}

}  // namespace lathe
