// The device registry (lathe/core/device_registry.h): Tensor::to(Device), sync and device buffers
// reach a device through the functions its layer registers. This test program links no device
// layer (test_core links up to ops), so the lazy device is absent until a test registers a fake.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "lathe/core/device_registry.h"
#include "lathe/core/tensor.h"

using namespace lathe;

namespace {

int transfers = 0;
int syncs = 0;

// A stand-in device layer: "moves" a tensor by relabelling a view of its memory.
Tensor fake_transfer(const Tensor& t, Device to) {
  ++transfers;
  Tensor out = make_view(t, t.sizes(), t.strides(), t.storage_offset());
  out.impl().device = to;
  return out;
}

void fake_sync() { ++syncs; }

const detail::DeviceFunctions fake_device{.transfer = &fake_transfer, .sync = &fake_sync};

// Registers the fake lazy device for one test.
struct FakeLazyDevice {
  FakeLazyDevice() {
    detail::register_device(DeviceKind::lazy, &fake_device);
    transfers = syncs = 0;
  }
  ~FakeLazyDevice() { detail::register_device(DeviceKind::lazy, nullptr); }
};

void expect_error(const std::function<void()>& fn, const std::string& message) {
  try {
    fn();
    FAIL() << "expected lathe::Error containing: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(DeviceRegistry, SameDeviceIsTheTensorItself) {
  Tensor x = zeros({2, 3});
  EXPECT_TRUE(x.to(Device::cpu()).is_same(x));
}

TEST(DeviceRegistry, UnregisteredDeviceIsAClearErrorNamingDeviceAndOperation) {
  ASSERT_EQ(detail::find_device(DeviceKind::lazy), nullptr);
  expect_error([] { zeros({2}).to(Device::lazy()); },
               "[to] no implementation of the lazy device is linked into this program "
               "(link lathe_lazy and include lathe/lathe.h or lathe/lazy/lazy.h)");
  expect_error([] { detail::device_functions(DeviceKind::lazy, "add"); },
               "[add] no implementation of the lazy device is linked");
  detail::sync_devices();  // nothing registered: a no-op
}

TEST(DeviceRegistry, RegisteredTransferMovesBothWays) {
  FakeLazyDevice device;
  Tensor x = full({2, 2}, 1.5);
  Tensor on = x.to(Device::lazy());
  EXPECT_EQ(on.device(), Device::lazy());
  EXPECT_TRUE(on.to(Device::lazy()).is_same(on));
  Tensor back = on.to(Device::cpu());
  EXPECT_EQ(back.device(), Device::cpu());
  EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(transfers, 2);
}

TEST(DeviceRegistry, SyncReachesRegisteredDevices) {
  FakeLazyDevice device;
  detail::sync_devices();
  EXPECT_EQ(syncs, 1);
  // Reading the data of a tensor on the device syncs that device first.
  Tensor on = detail::wrap_device_buffer(full({3}, 2.0), Device::lazy());
  EXPECT_EQ(on.to_vector<float>(), std::vector<float>({2, 2, 2}));
  EXPECT_GE(syncs, 2);
}

TEST(DeviceRegistry, BufferAndWrapShareMemory) {
  Tensor x = full({2, 3}, 4.0);
  EXPECT_TRUE(detail::device_buffer(x).is_same(x));
  Tensor on = detail::wrap_device_buffer(x, Device::lazy());
  EXPECT_EQ(on.device(), Device::lazy());
  Tensor buffer = detail::device_buffer(on);
  EXPECT_EQ(buffer.device(), Device::cpu());
  EXPECT_EQ(buffer.impl().storage, x.impl().storage);
  EXPECT_EQ(buffer.shape(), x.shape());
}
