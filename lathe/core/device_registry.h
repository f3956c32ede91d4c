// The device registry: what core, ops and trace need from a device other than the CPU. Core knows
// only the CPU; a device layer (lathe/lazy) registers its functions at static initialization, so
// Tensor::to(Device), dispatch and compiled functions reach the device without naming its layer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lathe/core/device.h"

namespace lathe {

class Attrs;        // lathe/ops
struct OpDef;       // lathe/ops
struct TensorMeta;  // lathe/ops
class Tensor;

namespace detail {

// One device kind's implementation. Every function is set by the registering layer.
struct DeviceFunctions {
  // Copies `t` to device `to`: onto this device when `to` is it, else off it to the CPU.
  Tensor (*transfer)(const Tensor& t, Device to) = nullptr;
  // Runs pending work so that every tensor on the device holds its data (lathe::sync()).
  void (*sync)() = nullptr;
  // Runs an op with an input on this device (after the shape rule; `metas` are its outputs).
  std::vector<Tensor> (*dispatch)(const OpDef& op, std::span<const Tensor> inputs,
                                  const Attrs& attrs, std::vector<TensorMeta>&& metas) = nullptr;
  // The version counter of a tensor on this device (autograd's check that a value saved for
  // backward was not written since): it moves with every in-place write recorded on the
  // device, before the write runs. Null: the storage's counter.
  uint64_t (*version)(const Tensor& t) = nullptr;
};

// Registers (or, with nullptr, removes) the implementation of `kind`; `fns` must outlive its use.
void register_device(DeviceKind kind, const DeviceFunctions* fns);
// The registered implementation of `kind`, or nullptr when no layer implementing it is linked.
const DeviceFunctions* find_device(DeviceKind kind);
// The implementation of `kind`; throws "[what] no implementation of the lazy device is linked
// into this program (link lathe_lazy)" when there is none.
const DeviceFunctions& device_functions(DeviceKind kind, const char* what);
// Runs sync() of every registered device (a no-op when none is in use).
void sync_devices();
// A CPU tensor viewing the memory of a tensor with data (a device tensor's buffer); the tensor
// itself when it is already on the CPU. Throws for a device tensor without data.
Tensor device_buffer(const Tensor& t);
// A tensor on `device` over the memory of the CPU tensor `buffer` (device data; no copy).
Tensor wrap_device_buffer(const Tensor& buffer, Device device);

}  // namespace detail
}  // namespace lathe
