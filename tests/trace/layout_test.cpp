// Layouts under lathe::compile: results keep eager's strides, and reshape decides view-or-copy
// from the real strides on every run (issue 11, item 2).
#include <gtest/gtest.h>

#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "test_util.h"

using namespace lathe;
using lathe::test::randn_seeded;
using lathe::test::same_values;

namespace {

// Strides of the dims with more than one element (the others are arbitrary).
std::vector<int64_t> significant_strides(const Tensor& t) {
  std::vector<int64_t> r;
  for (int64_t d = 0; d < t.dim(); ++d) r.push_back(t.shape()[d] > 1 ? t.int_strides()[d] : -1);
  return r;
}

}  // namespace

// Regression: relu keeps a transposed input's order in eager; the trace used to record a `view`
// of it that failed at run time.
TEST(Layout, ReshapeOfAPointwiseResultOfATransposedInput) {
  for (DynamicPolicy policy : {DynamicPolicy::kStatic, DynamicPolicy::kDynamic}) {
    CompileOptions o;
    o.dynamic = policy;
    auto f = compile([](const std::vector<Tensor>& x) { return relu(x[0]).reshape({-1}); }, o);
    for (int64_t n : {3, 5}) {
      Tensor x = randn_seeded({4, n}, 7).t();
      Tensor want = relu(x).reshape({-1});
      Tensor got = f({x}).at(0);
      EXPECT_TRUE(same_values(got, want)) << "n=" << n;
      EXPECT_EQ(significant_strides(got), significant_strides(want));
    }
  }
}

// A reshape that views at trace time but must copy on a later call (the argument's strides
// changed within what the guards allow) copies then: it never fails at run time.
TEST(Layout, ReshapeDecidesViewOrCopyOnEveryRun) {
  CompileOptions o;
  o.dynamic = DynamicPolicy::kDynamic;
  auto f = compile([](const std::vector<Tensor>& x) { return x[0].reshape({-1, 4}); }, o);
  for (int64_t b : {2, 3, 6}) {
    Tensor base = randn_seeded({b, 2, 4}, 3 + b);
    for (const Tensor& x : {base, base.slice(1, 0, 2, 2)}) {
      Tensor want = x.reshape({-1, 4});
      Tensor got = f({x}).at(0);
      EXPECT_TRUE(same_values(got, want)) << "b=" << b;
      EXPECT_EQ(significant_strides(got), significant_strides(want)) << "b=" << b;
      const bool eager_views = want.impl().storage == x.impl().storage;
      EXPECT_EQ(got.impl().storage == x.impl().storage, eager_views) << "b=" << b;
    }
  }
}

// Clone with a memory format and to(dtype) give eager's layout in the trace.
TEST(Layout, CloneMemoryFormatsKeepEagersLayout) {
  auto f = compile([](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].clone(), x[0].to(DType::f64), x[0].to_channels_last(),
                               relu(x[0].to_channels_last())};
  });
  Tensor x = randn_seeded({2, 3, 4, 5}, 1).permute({0, 2, 3, 1});
  std::vector<Tensor> got = f({x});
  std::vector<Tensor> want = {x.clone(), x.to(DType::f64), x.to_channels_last(),
                              relu(x.to_channels_last())};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(same_values(got[i], want[i])) << i;
    EXPECT_EQ(significant_strides(got[i]), significant_strides(want[i])) << i;
  }
}
