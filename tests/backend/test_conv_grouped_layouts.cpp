// Grouped convolutions with few channels per group (resnext's 4), which oneDNN runs on its own
// layouts with reorders in and out (kernels/dnnl_conv.cpp): f32 against the f64 direct loop,
// plain and with a residual sum and relu as post-ops, channels-last and row-major.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "tests/backend/backend_test_util.h"

using namespace lathe;

namespace {

Tensor rnd(const std::vector<int64_t>& shape, uint64_t seed) {
  Generator g(seed);
  return randn(to_shape(shape), DType::f32, &g);
}

using lathe::testing::max_rel_diff;

TEST(GroupedConv, FewChannelsPerGroupEqualsTheF64Reference) {
  for (bool channels_last : {true, false}) {
    for (int64_t stride : {1, 2}) {
      Tensor x = rnd({2, 64, 13, 13}, 1), w = rnd({64, 4, 3, 3}, 2), b = rnd({64}, 3);
      if (channels_last) x = x.to_channels_last();
      Tensor y = conv2d(x, w, b, {stride, stride}, {1, 1}, {1, 1}, 16);
      Tensor ref = conv2d(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64), {stride, stride},
                          {1, 1}, {1, 1}, 16);
      EXPECT_LT(max_rel_diff(y, ref), 1e-4) << channels_last << " " << stride;
    }
  }
}

TEST(GroupedConv, ResidualSumAndReluPostOps) {
  Tensor x = rnd({1, 64, 11, 11}, 4).to_channels_last(), w = rnd({64, 4, 3, 3}, 5);
  Tensor res = rnd({1, 64, 11, 11}, 6).to_channels_last();
  std::vector<Tensor> in{x, w, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), res};
  Attrs a{{"stride", Shape{1, 1}},
          {"padding", Shape{1, 1}},
          {"dilation", Shape{1, 1}},
          {"groups", int64_t{16}},
          {"eps", 0.0},
          {"act", std::string("none")},
          {"act_min", 0.0},
          {"act_max", 0.0},
          {"act2", std::string("relu")},
          {"act2_min", 0.0},
          {"act2_max", 0.0}};
  Tensor y = dispatch1(LATHE_OP("conv2d_fused"), in, a);
  Tensor ref =
      relu(add(conv2d(x.to(DType::f64), w.to(DType::f64), Tensor(), {1, 1}, {1, 1}, {1, 1}, 16),
               res.to(DType::f64)));
  EXPECT_LT(max_rel_diff(y, ref), 1e-4);
}

}  // namespace
