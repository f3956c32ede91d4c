// The autograd engine's semantics against PyTorch's: leaves and accumulation, explicit
// gradients, grad mode, detach, retain_graph and in-place checks by version counters.
#include <gtest/gtest.h>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/autograd.h"
#include "lathe/ops/ops.h"

using namespace lathe;

namespace {

Tensor leaf(const Shape& s, uint64_t seed) {
  Generator gen(seed);
  Tensor t = randn(s, DType::f64, &gen);
  t.set_requires_grad(true);
  return t;
}

void expect_close(const Tensor& got, const Tensor& want, double tol = 1e-12) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.shape(), want.shape());
  auto a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "element " << i;
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(AutogradEngine, ProductRuleAndLeaves) {
  Tensor x = leaf({2, 3}, 1), w = leaf({2, 3}, 2);
  Tensor y = sum(mul(x, w));
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn_name(), "sum");
  EXPECT_TRUE(y.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  y.backward();
  expect_close(x.grad(), w);
  expect_close(w.grad(), x);
}

TEST(AutogradEngine, AccumulatesAcrossBackwardCallsAndUses) {
  Tensor x = leaf({4}, 3);
  // x used twice in one graph: d/dx sum(x*x + x) = 2x + 1.
  sum(add(mul(x, x), x)).backward();
  Tensor want = add(mul(x.detach(), 2.0), 1.0);
  expect_close(x.grad(), want);
  sum(add(mul(x, x), x)).backward();
  expect_close(x.grad(), mul(want, 2.0));
  x.set_grad({});
  EXPECT_FALSE(x.grad().defined());
}

TEST(AutogradEngine, NonScalarNeedsExplicitGradient) {
  Tensor x = leaf({2, 2}, 4);
  Tensor y = mul(x, 3.0);
  EXPECT_NE(error_of([&] { y.backward(); }).find("grad can be implicitly created only for"),
            std::string::npos);
  Tensor v = leaf({2, 2}, 5).detach();
  y.backward(v);
  expect_close(x.grad(), mul(v, 3.0));
  EXPECT_NE(error_of([&] { mul(x, 2.0).backward(ones({3})); }).find("does not match the shape"),
            std::string::npos);
}

TEST(AutogradEngine, NoGradGuardAndDetachRecordNothing) {
  Tensor x = leaf({3}, 6);
  {
    NoGradGuard no_grad;
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
  }
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.raw_data(), x.raw_data());  // shares the data
  Tensor y = mul(d, 2.0);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_NE(error_of([&] { sum(y).backward(); }).find("does not require grad"), std::string::npos);
}

TEST(AutogradEngine, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({3}, 7);
  Tensor y = sum(mul(x, x));
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  expect_close(x.grad(), mul(x.detach(), 4.0));
  const std::string e = error_of([&] { y.backward(); });
  EXPECT_NE(e.find("backward through the graph a second time"), std::string::npos) << e;
  EXPECT_NE(e.find("retain_graph=true"), std::string::npos) << e;
}

TEST(AutogradEngine, InPlaceChangeOfSavedValueIsDetected) {
  Tensor x = leaf({3}, 8);
  Tensor w = randn({3}, DType::f64);
  Tensor y = sum(mul(x, w));  // mul saves w to compute x's gradient
  mul_(w, 2.0);
  const std::string e = error_of([&] { y.backward(); });
  EXPECT_NE(e.find("modified by an inplace operation"), std::string::npos) << e;
  EXPECT_NE(e.find("input 1 of mul, is at version"), std::string::npos) << e;
}

TEST(AutogradEngine, InPlaceOnUnsavedResultIsFine) {
  // add does not read its operands' values: changing them later is harmless, as in PyTorch.
  Tensor x = leaf({3}, 9);
  Tensor c = randn({3}, DType::f64);
  Tensor y = sum(add(x, c));
  mul_(c, 2.0);
  y.backward();
  expect_close(x.grad(), ones({3}, DType::f64));
}

TEST(AutogradEngine, InPlaceOnLeafRequiringGradIsRefused) {
  Tensor x = leaf({3}, 10);
  const std::string e = error_of([&] { mul_(x, 2.0); });
  EXPECT_NE(e.find("a leaf tensor that requires grad is being used in an in-place operation"),
            std::string::npos)
      << e;
  NoGradGuard no_grad;  // how optimizers update parameters
  Tensor before = x.clone();
  mul_(x, 2.0);
  expect_close(x, mul(before, 2.0));
}

TEST(AutogradEngine, GradientsReachOnlyInputsThatRequireIt) {
  Tensor x = leaf({2, 3}, 11);
  Tensor c = randn({3}, DType::f64);
  Tensor y = sum(mul(relu(x), c));
  y.backward();
  EXPECT_FALSE(c.grad().defined());
  Tensor want = mul(gt(x.detach(), 0.0).to(DType::f64), c.expand({2, 3}));
  expect_close(x.grad(), want);
}

TEST(AutogradEngine, DiamondGraphSumsBothPaths) {
  Tensor x = leaf({5}, 12);
  Tensor a = exp(x);
  sum(add(mul(a, 2.0), mul(a, a))).backward();
  Tensor e = exp(x.detach());
  expect_close(x.grad(), mul(e, add(mul(e, 2.0), 2.0)));
}

TEST(AutogradEngine, DropoutGradientReplaysTheForwardMask) {
  Tensor x = leaf({64}, 13);
  Tensor y = dropout(x, 0.5, true);
  y.backward(ones({64}, DType::f64));
  // Kept elements: y = 2x, gradient 2; dropped: y = 0, gradient 0.
  auto yv = y.detach().to_vector<double>(), xv = x.detach().to_vector<double>();
  auto gv = x.grad().to_vector<double>();
  int kept = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    const bool k = yv[i] != 0;
    kept += k;
    EXPECT_EQ(gv[i], k ? 2.0 : 0.0) << i;
    if (k) {
      EXPECT_DOUBLE_EQ(yv[i], 2 * xv[i]);
    }
  }
  EXPECT_GT(kept, 10);
  EXPECT_LT(kept, 54);
}

TEST(AutogradEngine, LoadStateDictIntoParametersThatRequireGrad) {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  for (Tensor& p : lin->parameters()) p.set_requires_grad(true);
  std::map<std::string, Tensor> sd{{"weight", ones({2, 3})}, {"bias", zeros({2})}};
  lin->load_state_dict(sd);  // in place under no-grad, as torch's load_state_dict
  EXPECT_EQ(lin->param("weight").to_vector<float>(), std::vector<float>(6, 1.0f));
  Tensor y = sum(lin->forward(ones({1, 3})));
  y.backward();
  EXPECT_EQ(lin->param("weight").grad().to_vector<float>(), std::vector<float>(6, 1.0f));
}

TEST(AutogradEngine, ModuleToKeepsParametersLeaves) {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  for (Tensor& p : lin->parameters()) p.set_requires_grad(true);
  lin->to(DType::f64);
  Tensor w = lin->param("weight");
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  sum(lin->forward(ones({2, 3}, DType::f64))).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(6, 2.0));
}
