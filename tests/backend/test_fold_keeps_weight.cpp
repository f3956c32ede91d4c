// Issue 33: the conv + eval-BatchNorm fold of the cpu backend scales a copy of the weight, never
// the caller's tensor. For a contiguous f64 weight to(f64).contiguous() is the weight itself, and
// the fold used to scale it in place: every refold (after a version bump) compounded it.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using V = std::vector<Tensor>;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

class FoldKeepsWeight : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(DTypes, FoldKeepsWeight, ::testing::Values(DType::f64, DType::f32));

TEST_P(FoldKeepsWeight, RefoldLeavesTheArgumentAlone) {
  const DType dt = GetParam();
  Generator gen(33);
  Tensor x = randn({2, 3, 8, 8}, dt, &gen), w = randn({6, 3, 3, 3}, dt, &gen);
  Tensor rm = randn({6}, dt, &gen), rv = full({6}, 4.0, dt);
  Tensor g = randn({6}, dt, &gen), b = randn({6}, dt, &gen);
  auto net = [=](const V& a) {
    return V{batch_norm(conv2d(a[0], a[1], {}, {1, 1}, {1, 1}), rm, rv, g, b, false, 0.1, 1e-5)};
  };
  auto f = compile(net);
  const Tensor w0 = w.clone();
  NoGradGuard ng;
  const Tensor want = net({x, w})[0];
  const double tol = dt == DType::f64 ? 1e-12 : 1e-4;
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    Tensor got = f({x, w})[0];
    EXPECT_EQ(max_abs_diff(w, w0), 0.0) << "the fold wrote the caller's weight";
    EXPECT_LE(max_abs_diff(got, want), tol);
    w.bump_version();  // the next call folds again
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

}  // namespace
