// Moving tensors between devices. Core knows only the CPU; a device layer (lathe/lazy) registers
// how to move a tensor onto and off its device, so Tensor::to(Device) needs nothing from above.
#pragma once

#include "lathe/core/device.h"

namespace lathe {
class Tensor;
}

namespace lathe::detail {

// Copies `t` to device `to`: onto the registering device when `to` is it, else off it to the CPU.
using DeviceTransferFn = Tensor (*)(const Tensor& t, Device to);
// Called once per non-CPU device kind, at static initialization of the layer that implements it.
void register_device_transfer(DeviceKind kind, DeviceTransferFn fn);
// The registered transfer for `kind`; nullptr when no layer implementing it is linked in.
DeviceTransferFn device_transfer(DeviceKind kind);

}  // namespace lathe::detail
