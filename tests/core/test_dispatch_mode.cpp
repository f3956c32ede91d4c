// The dispatch-mode stack: a mode forwards an op to the mode below it (call_below), which sees
// the op as if the upper mode were not there; modes pushed meanwhile stack on the lower one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lathe/core/dispatch_mode.h"
#include "lathe/ops/op_def.h"
#include "lathe/ops/ops.h"

using namespace lathe;

namespace {

// Records each op's name, then runs it below itself (eagerly here).
class RecordingMode : public DispatchMode {
 public:
  std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                               std::vector<TensorMeta>&&) override {
    ops.push_back(op.name);
    EXPECT_EQ(current_dispatch_mode(), this);  // the top while it runs
    return call_below([&] { return lathe::dispatch(op, inputs, attrs); });
  }
  std::vector<std::string> ops;
};

// Counts each op and forwards it to the mode below.
class CountingMode : public DispatchMode {
 public:
  explicit CountingMode(DispatchMode* expected_below) : below_(expected_below) {}
  std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                               std::vector<TensorMeta>&&) override {
    ++count;
    return call_below([&] {
      EXPECT_EQ(current_dispatch_mode(), below_);
      return lathe::dispatch(op, inputs, attrs);
    });
  }
  int count = 0;

 private:
  DispatchMode* below_;
};

}  // namespace

TEST(DispatchModeForwarding, AModeForwardsToTheModeBelow) {
  Tensor a = full({3}, 2.0), b = full({3}, 5.0);
  RecordingMode lower;
  CountingMode upper(&lower);
  Tensor c, d;
  {
    ModeGuard g1(&lower);
    {
      ModeGuard g2(&upper);
      c = add(a, b);
      d = relu(c);
      EXPECT_EQ(current_dispatch_mode(), &upper);  // restored after each forward
    }
    EXPECT_EQ(current_dispatch_mode(), &lower);
  }
  EXPECT_EQ(current_dispatch_mode(), nullptr);
  EXPECT_EQ(upper.count, 2);
  EXPECT_EQ(lower.ops, (std::vector<std::string>{"add", "relu"}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{7, 7, 7}));
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{7, 7, 7}));
}

TEST(DispatchModeForwarding, ModesPushedWhileForwardingStackOnTheLowerMode) {
  RecordingMode lower, inner;
  CountingMode upper(&lower);
  ModeGuard g1(&lower);
  ModeGuard g2(&upper);
  call_below([&] {
    EXPECT_EQ(current_dispatch_mode(), &lower);
    {
      ModeGuard g3(&inner);
      EXPECT_EQ(current_dispatch_mode(), &inner);
      call_below([&] { EXPECT_EQ(current_dispatch_mode(), &lower); });
      EXPECT_EQ(current_dispatch_mode(), &inner);
    }
    EXPECT_EQ(current_dispatch_mode(), &lower);
  });
  EXPECT_EQ(current_dispatch_mode(), &upper);
}

TEST(DispatchModeForwarding, CallBelowWithNoModeRunsEagerly) {
  EXPECT_EQ(current_dispatch_mode(), nullptr);
  Tensor r = call_below([] { return add(full({2}, 1.0), full({2}, 2.0)); });
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(current_dispatch_mode(), nullptr);
}
