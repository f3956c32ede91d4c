// The dispatch-mode stack (lathe/core/dispatch_mode.h): lathe::dispatch asks the top mode; modes
// nest through ModeGuard, and unwinding restores the stack.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "lathe/core/dispatch_mode.h"
#include "lathe/ops/op_def.h"
#include "lathe/ops/ops.h"

using namespace lathe;

namespace {

// Logs the ops it sees and runs them eagerly (nested dispatches inside kernels unlogged).
class LoggingMode : public DispatchMode {
 public:
  std::vector<std::string> ops;
  int allocations = 0;
  bool throw_on_dispatch = false;

  std::vector<Tensor> dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs,
                               std::vector<TensorMeta>&& metas) override {
    ops.push_back(op.name);
    if (throw_on_dispatch) throw std::runtime_error("mode failed");
    ModeGuard eager(nullptr);
    return op.kernel(inputs, attrs, metas);
  }
  void on_allocation(const TensorImpl* /*impl*/) override { ++allocations; }
  bool is_tracing() const override { return tracing; }
  bool tracing = false;
};

}  // namespace

TEST(DispatchMode, EagerWithoutAMode) {
  EXPECT_EQ(current_dispatch_mode(), nullptr);
  EXPECT_FALSE(detail::is_tracing());
  EXPECT_EQ((full({2}, 1.0) + full({2}, 2.0)).to_vector<float>(), std::vector<float>({3, 3}));
}

TEST(DispatchMode, InnerModeSeesOpsAndPopRestoresOuter) {
  LoggingMode outer, inner;
  inner.tracing = true;
  Tensor a = full({2}, 1.0), b = full({2}, 2.0);
  {
    ModeGuard g1(&outer);
    EXPECT_EQ(current_dispatch_mode(), &outer);
    relu(a);
    {
      ModeGuard g2(&inner);
      EXPECT_EQ(current_dispatch_mode(), &inner);
      EXPECT_TRUE(detail::is_tracing());
      Tensor c = add(a, b);
      EXPECT_EQ(c.to_vector<float>(), std::vector<float>({3, 3}));
      zeros({3});  // a factory allocation reaches the top mode only
    }
    EXPECT_EQ(current_dispatch_mode(), &outer);
    EXPECT_FALSE(detail::is_tracing());
    neg(a);
  }
  EXPECT_EQ(current_dispatch_mode(), nullptr);
  EXPECT_EQ(outer.ops, std::vector<std::string>({"relu", "neg"}));
  EXPECT_EQ(inner.ops, std::vector<std::string>({"add"}));
  EXPECT_GE(inner.allocations, 1);
  relu(a);  // eager again: nobody logs it
  EXPECT_EQ(outer.ops.size(), 2u);
}

TEST(DispatchMode, ExceptionUnwindsTheStack) {
  LoggingMode outer, failing;
  failing.throw_on_dispatch = true;
  ModeGuard g1(&outer);
  try {
    ModeGuard g2(&failing);
    relu(full({2}, 1.0));
    FAIL() << "expected the mode's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "mode failed");
  }
  EXPECT_EQ(current_dispatch_mode(), &outer);
  relu(full({2}, 1.0));
  EXPECT_EQ(outer.ops, std::vector<std::string>({"relu"}));
}
