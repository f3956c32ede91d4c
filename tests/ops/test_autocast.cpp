// lathe::AutocastGuard: PyTorch's CPU autocast policy per op (the output dtypes of each policy,
// values equal to the explicit casts), batch norm statistics kept and updated in f32, gradients
// reaching f32 parameters in f32 and close to f32 training's, nested and disabled scopes
// (lathe::compile under autocast: tests/trace/autocast_compile_test.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/random.h"
#include "lathe/ops/autocast.h"
#include "lathe/ops/ops.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g).to(dt);
}

bool same(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.to_vector<double>() == b.to_vector<double>();
}

double rel_err(const Tensor& a, const Tensor& b) {
  auto x = a.to(DType::f64).to_vector<double>(), y = b.to(DType::f64).to_vector<double>();
  double m = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    m = std::max(m, std::abs(x[i] - y[i]));
    s = std::max(s, std::abs(y[i]));
  }
  return m / std::max(s, 1e-30);
}

TEST(Autocast, EachPolicyGivesPyTorchsDtypes) {
  Tensor x = rnd({2, 3, 8, 8}, 1), w = rnd({4, 3, 3, 3}, 2);
  Tensor a = rnd({5, 6}, 3), lw = rnd({7, 6}, 4);
  AutocastGuard ac;
  EXPECT_TRUE(is_autocast_enabled());
  EXPECT_EQ(autocast_dtype(), DType::bf16);
  // lower: bf16 results, equal to the explicit casts.
  Tensor c = conv2d(x, w, {}, {1, 1}, {1, 1});
  EXPECT_EQ(c.dtype(), DType::bf16);
  Tensor l = linear(a, lw);
  EXPECT_EQ(l.dtype(), DType::bf16);
  Tensor m = matmul(a, lw.t());
  EXPECT_EQ(m.dtype(), DType::bf16);
  {
    AutocastGuard off(DType::bf16, false);
    EXPECT_TRUE(same(c, conv2d(x.to(DType::bf16), w.to(DType::bf16), {}, {1, 1}, {1, 1})));
    EXPECT_TRUE(same(l, linear(a.to(DType::bf16), lw.to(DType::bf16))));
    EXPECT_EQ(linear(a, lw).dtype(), DType::f32) << "a disabled inner scope";
  }
  EXPECT_TRUE(is_autocast_enabled()) << "the outer scope is back";
  // f64 stays f64 (PyTorch casts only f32 and the other low dtype).
  EXPECT_EQ(linear(a.to(DType::f64), lw.to(DType::f64)).dtype(), DType::f64);
  // none: binary ops promote bf16 + f32 to f32.
  EXPECT_EQ(add(l, rnd({5, 7}, 5)).dtype(), DType::f32);
  EXPECT_EQ(relu(l).dtype(), DType::bf16);
  // fp32: losses.
  Tensor target = from_vector<int64_t>({0, 3, 6, 1, 2}, {5});
  EXPECT_EQ(cross_entropy(l, target).dtype(), DType::f32);
  EXPECT_EQ(nll_loss(log_softmax(l, 1), target).dtype(), DType::f32);
  // promote: cat of bf16 and f32 is f32.
  EXPECT_EQ(cat({l, rnd({1, 7}, 6)}, 0).dtype(), DType::f32);
}

TEST(Autocast, NormsComputeInF32AndKeepTheirStatisticsF32) {
  Tensor x = rnd({4, 3, 5, 5}, 10, DType::bf16);
  Tensor mean = zeros({3}), var = ones({3}), g = rnd({3}, 11), b = rnd({3}, 12);
  Tensor mean0 = mean.clone(), var0 = var.clone();
  Tensor y;
  {
    AutocastGuard ac;
    y = batch_norm(x, mean, var, g, b, true, 0.1, 1e-5);
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(mean.dtype(), DType::f32);
  EXPECT_FALSE(same(mean, mean0)) << "the running mean is updated in place";
  EXPECT_FALSE(same(var, var0));
  // The same as batch norm in f32 on the widened input, rounded once.
  Tensor m2 = mean0.clone(), v2 = var0.clone();
  Tensor ref = batch_norm(x.to(DType::f32), m2, v2, g, b, true, 0.1, 1e-5).to(DType::bf16);
  EXPECT_TRUE(same(y, ref));
  EXPECT_TRUE(same(mean, m2));
  Tensor h = rnd({2, 5, 8}, 13, DType::bf16), lw = rnd({8}, 14), lb = rnd({8}, 15);
  AutocastGuard ac;
  Tensor ln = layer_norm(h, {8}, lw, lb);
  EXPECT_EQ(ln.dtype(), DType::bf16);
  EXPECT_TRUE(same(ln, layer_norm(h.to(DType::f32), {8}, lw, lb).to(DType::bf16)));
}

TEST(Autocast, GradientsReachF32ParametersInF32) {
  Tensor w1 = rnd({16, 12}, 20).set_requires_grad(true), w2 = rnd({4, 16}, 21);
  w2.set_requires_grad(true);
  Tensor x = rnd({8, 12}, 22);
  Tensor target = from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}, {8});
  auto loss_of = [&] { return cross_entropy(linear(relu(linear(x, w1)), w2), target); };
  Tensor f32_loss = loss_of();
  f32_loss.backward();
  Tensor g1 = w1.grad().clone(), g2 = w2.grad().clone();
  w1.set_grad(Tensor());
  w2.set_grad(Tensor());
  Tensor loss;
  {
    AutocastGuard ac;
    loss = loss_of();
  }
  EXPECT_EQ(loss.dtype(), DType::f32);
  loss.backward();
  ASSERT_TRUE(w1.grad().defined());
  EXPECT_EQ(w1.grad().dtype(), DType::f32);
  EXPECT_EQ(w2.grad().dtype(), DType::f32);
  EXPECT_LT(rel_err(loss, f32_loss), 2e-2);
  EXPECT_LT(rel_err(w1.grad(), g1), 5e-2);
  EXPECT_LT(rel_err(w2.grad(), g2), 5e-2);
  EXPECT_GT(rel_err(w1.grad(), g1), 0) << "computed in bf16";
}

TEST(Autocast, RejectsAnUnsupportedDtype) {
  EXPECT_THROW(AutocastGuard(DType::f64), Error);
  EXPECT_FALSE(is_autocast_enabled());
}

}  // namespace
