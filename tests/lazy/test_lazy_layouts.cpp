// Layouts on the lazy device: every value reaches the backend with the strides eager gives it,
// so that whether a reshape is a view (and an in-place write through it reaches its base) is
// decided exactly as in eager, and the backend's layout passes see the same graph as compile's.
#include <gtest/gtest.h>

#include "lathe/lazy/lazy.h"
#include "lathe/ops/ops.h"
#include "lazy_test_util.h"

using namespace lathe;
using lathe::lazy_test::all_close;
using lathe::lazy_test::randn;

namespace {

struct Case {
  Tensor y, z;  // the base and the reshaped-then-written value
};

// The program of issue 26: a write through the reshape of a channels-last conv result.
Case write_through_reshape(const Tensor& x, const Tensor& w) {
  Tensor y = conv2d(x, w);
  Tensor z = y.reshape({-1});
  add_(z, full({1}, 1.0).to(x.device()));
  return {y, z};
}

}  // namespace

TEST(LazyLayouts, InPlaceWriteThroughAReshapeOfAChannelsLastResultCopiesAsEager) {
  Tensor x = randn({1, 3, 8, 8}, 1).to_channels_last(), w = randn({4, 3, 3, 3}, 2);
  Case e = write_through_reshape(x, w);
  Case l = write_through_reshape(x.to(Device::lazy()), w.to(Device::lazy()));
  lathe::sync();
  EXPECT_EQ(l.y.int_strides(), e.y.int_strides());
  EXPECT_TRUE(all_close(l.y.to(Device::cpu()), e.y, 0, 0)) << "y changed through a copy";
  EXPECT_TRUE(all_close(l.z.to(Device::cpu()), e.z, 0, 0));
  // Eager leaves y alone: z is a copy, so y and z + 1 differ by one everywhere.
  EXPECT_TRUE(all_close(sub(e.z, e.y.reshape({-1})), full({e.z.numel()}, 1.0), 0, 1e-5));
}

TEST(LazyLayouts, ReshapeOfAContiguousResultStaysAView) {
  // The same program over a row-major result: the reshape is a view, and the write reaches y.
  Tensor a = randn({4, 6}, 3);
  auto program = [](const Tensor& t) {
    Tensor y = mul(t, 2.0);
    Tensor z = y.reshape({-1});
    add_(z, full({1}, 1.0).to(t.device()));
    return y;
  };
  Tensor e = program(a);
  Tensor l = program(a.to(Device::lazy()));
  EXPECT_TRUE(all_close(l.to(Device::cpu()), e, 0, 0));
  EXPECT_TRUE(all_close(e, add(mul(a, 2.0), 1.0), 0, 0));
}

TEST(LazyLayouts, WritesThroughReshapesOfTransposedDeviceData) {
  // Device data laid out transposed: reshape copies, a write into the copy leaves the data.
  Tensor a = randn({5, 3}, 4).t();  // strides {1, 5}
  Tensor la = a.to(Device::lazy());
  ASSERT_EQ(la.int_strides(), a.int_strides());
  Tensor expect = mul(a.reshape({-1}), 3.0);
  Tensor lz = la.reshape({-1});
  mul_(lz, 3.0);
  lathe::sync();
  EXPECT_TRUE(all_close(la.to(Device::cpu()), a, 0, 0)) << "the device data changed";
  EXPECT_TRUE(all_close(lz.to(Device::cpu()), expect, 0, 0));
}

TEST(LazyLayouts, PendingResultsKeepTheirStridesThroughSync) {
  // What a pending tensor shows before sync is what it has after: the backend may not pick
  // another layout for a value the program can see.
  Tensor x = randn({2, 3, 8, 8}, 5).to_channels_last(), w = randn({8, 3, 3, 3}, 6);
  Tensor lx = x.to(Device::lazy()), lw = w.to(Device::lazy());
  Tensor y = relu(conv2d(lx, lw));
  Tensor t = y.transpose(1, 3);
  std::vector<int64_t> ys = y.int_strides(), ts = t.int_strides();
  lathe::sync();
  EXPECT_EQ(y.int_strides(), ys);
  EXPECT_EQ(t.int_strides(), ts);
  EXPECT_TRUE(all_close(y.to(Device::cpu()), relu(conv2d(x, w))));
}

TEST(LazyLayouts, GraphsCarryStridesForEveryValue) {
  // The lazy device builds its graphs from the recorder's output types: strides everywhere,
  // as compile's tracer gives them, and the same fixed/flexible rule.
  Tensor x = randn({1, 3, 6, 6}, 7).to_channels_last().to(Device::lazy());
  Tensor w = randn({4, 3, 3, 3}, 8).to(Device::lazy());
  Tensor y = relu(conv2d(x, w));
  Tensor z = neg(y);
  lathe::sync();
  const std::string g = lazy::testing::last_graph();
  // The conv result and the relu result are channels-last (strides printed in braces).
  EXPECT_NE(g.find("f32[1,4,4,4]{64,1,16,4}"), std::string::npos) << g;
  EXPECT_TRUE(z.is_channels_last());
}
