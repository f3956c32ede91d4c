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

}  // namespace
