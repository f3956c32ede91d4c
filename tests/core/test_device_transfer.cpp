// Tensor::to(Device) lives in core and moves data through the transfer a device layer registers.
// This test program links no device layer (test_core links up to ops), so the lazy device is
// absent until a test registers a transfer of its own.
#include <gtest/gtest.h>

#include <string>

#include "lathe/core/device_transfer.h"
#include "lathe/core/tensor.h"

using namespace lathe;

namespace {

int transfers = 0;

// A stand-in device layer: "moves" a tensor by relabelling a view of its memory.
Tensor fake_transfer(const Tensor& t, Device to) {
  ++transfers;
  Tensor out = make_view(t, t.sizes(), t.strides(), t.storage_offset());
  out.impl().device = to;
  return out;
}

}  // namespace

TEST(DeviceTransfer, SameDeviceIsTheTensorItself) {
  Tensor x = zeros({2, 3});
  EXPECT_TRUE(x.to(Device::cpu()).is_same(x));
}

TEST(DeviceTransfer, UnlinkedDeviceIsAClearError) {
  ASSERT_EQ(detail::device_transfer(DeviceKind::lazy), nullptr);
  try {
    zeros({2}).to(Device::lazy());
    FAIL() << "expected lathe::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[to] no implementation of the lazy device is linked"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceTransfer, RegisteredTransferMovesBothWays) {
  detail::register_device_transfer(DeviceKind::lazy, &fake_transfer);
  transfers = 0;
  Tensor x = full({2, 2}, 1.5);
  Tensor on = x.to(Device::lazy());
  EXPECT_EQ(on.device(), Device::lazy());
  EXPECT_TRUE(on.to(Device::lazy()).is_same(on));
  Tensor back = on.to(Device::cpu());
  EXPECT_EQ(back.device(), Device::cpu());
  EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(transfers, 2);
  detail::register_device_transfer(DeviceKind::lazy, nullptr);
}
