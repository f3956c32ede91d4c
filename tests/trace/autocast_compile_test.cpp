// lathe::compile under lathe::AutocastGuard: the casts autocast inserts are traced (the compiled
// call equals eager autocast bit for bit), the entry is guarded on the autocast state (a call
// without autocast recompiles, saying why), and autocast inside the compiled function works.
#include <gtest/gtest.h>

#include "lathe/core/random.h"
#include "lathe/ops/autocast.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

bool same(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.to_vector<double>() == b.to_vector<double>();
}

TEST(Autocast, CompiledFunctionsTraceTheCastsAndGuardTheState) {
  Tensor w = rnd({6, 10}, 30);
  auto f = compile([w](const std::vector<Tensor>& a) { return relu(linear(a[0], w)); });
  Tensor x = rnd({3, 10}, 31);
  Tensor eager_ac;
  {
    AutocastGuard ac;
    eager_ac = relu(linear(x, w));
    Tensor y = f({x})[0];
    EXPECT_EQ(y.dtype(), DType::bf16);
    EXPECT_TRUE(same(y, eager_ac));
    EXPECT_TRUE(same(f({x})[0], eager_ac));
  }
  EXPECT_EQ(f.stats().compiles, 1);
  Tensor y32 = f({x})[0];
  EXPECT_EQ(y32.dtype(), DType::f32) << "not the autocast entry";
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_NE(f.last_recompile_reason().find("autocast"), std::string::npos)
      << f.last_recompile_reason();
  // Autocast inside the compiled function.
  auto g = compile([w](const std::vector<Tensor>& a) {
    AutocastGuard ac;
    return relu(linear(a[0], w));
  });
  EXPECT_TRUE(same(g({x})[0], eager_ac));
  EXPECT_TRUE(same(g({x})[0], eager_ac));
  EXPECT_EQ(g.stats().compiles, 1);
}

// AMP training: a compiled forward + loss under autocast (AOT autograd traces the casts) gives
// eager autocast's loss and f32 gradients.
TEST(Autocast, CompiledTrainingStepEqualsEagerAutocast) {
  Tensor w1 = rnd({16, 12}, 40), w2 = rnd({4, 16}, 41);
  w1.set_requires_grad(true);
  w2.set_requires_grad(true);
  Tensor x = rnd({8, 12}, 42);
  Tensor target = from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}, {8});
  auto fwd = [&](const std::vector<Tensor>& a) {
    return cross_entropy(linear(relu(linear(a[0], w1)), w2), target);
  };
  auto f = compile(fwd);
  for (int step = 0; step < 2; ++step) {
    Tensor eager_loss, loss;
    {
      AutocastGuard ac;
      eager_loss = fwd({x});
    }
    eager_loss.backward();
    Tensor g1 = w1.grad().clone(), g2 = w2.grad().clone();
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
    {
      AutocastGuard ac;
      loss = f({x})[0];
    }
    EXPECT_EQ(loss.dtype(), DType::f32);
    EXPECT_TRUE(same(loss, eager_loss)) << "step " << step;
    loss.backward();
    ASSERT_TRUE(w1.grad().defined());
    EXPECT_EQ(w1.grad().dtype(), DType::f32);
    EXPECT_TRUE(same(w1.grad(), g1)) << "step " << step;
    EXPECT_TRUE(same(w2.grad(), g2)) << "step " << step;
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

}  // namespace
