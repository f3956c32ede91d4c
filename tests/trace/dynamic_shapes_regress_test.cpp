// Regression tests for issue 10, items 5-8: valid programs that failed or recompiled for every
// size under dynamic shapes. Each test compares every compiled call with eager and asserts how
// many traces were made.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "test_util.h"

using namespace lathe;
using lathe::test::contains;
using lathe::test::randn_seeded;
using lathe::test::same_values;

namespace {

CompileOptions with_policy(DynamicPolicy p) {
  CompileOptions o;
  o.dynamic = p;
  return o;
}

// Runs f on each input and compares every output with eager fn.
template <class Fn>
void expect_matches_eager(const CompiledFunction& f, Fn fn, const std::vector<Tensor>& inputs,
                          double tol = 0.0) {
  std::vector<Tensor> got = f(inputs);
  std::vector<Tensor> want = fn(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same_values(got[i], want[i], tol)) << "output " << i;
}

}  // namespace

// ---- item 5: a size pinned after it was used ----

TEST(DynamicShapesRegress, ReshapeThenNegativeSelectStaysSymbolic) {
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].reshape({-1}), in[0].select(0, -1)};
  };
  auto f = compile(fn);
  for (int64_t n : {8, 10, 12, 5, 31}) expect_matches_eager(f, fn, {randn_seeded({n, 3}, n)});
  // Static first trace, then one dynamic trace that every later length hits.
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.graph_string(0), "s0")) << f.graph_string(0);
}

TEST(DynamicShapesRegress, LinearReshapeSelectLastOfTheIssue) {
  Tensor w = randn_seeded({4, 4}, 99);
  auto fn = [w](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Tensor h = linear(x.reshape({-1, 4}), w).reshape({x.size(0), x.size(1), 4});
    return std::vector<Tensor>{h.select(1, -1)};
  };
  auto f = compile(fn);
  for (int64_t s : {5, 7, 9, 16, 3}) expect_matches_eager(f, fn, {randn_seeded({2, s, 4}, s)});
  EXPECT_EQ(f.stats().compiles, 2);
}

TEST(DynamicShapesRegress, NegativeSliceAndNarrowFromTheEndStaySymbolic) {
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Tensor last3 = x.slice(0, -3, INT64_MAX);
    Tensor tail = x.narrow(0, -2, 2);
    Tensor mid = x.slice(1, 1, -1);
    return std::vector<Tensor>{last3 * 2.0, tail + 1.0, mid.select(0, -2)};
  };
  auto f = compile(fn, with_policy(DynamicPolicy::kDynamic));
  for (int64_t n : {6, 9, 4, 20}) expect_matches_eager(f, fn, {randn_seeded({n, n + 1}, n)});
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(DynamicShapesRegress, LateSpecializationRewritesEarlierTypes) {
  // The size is used symbolically first (reshape), then pinned by host code (int64_t(SymInt)),
  // which records s0 == hint after the reshape's type was recorded.
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Tensor flat = x.reshape({-1, 2});
    Tensor y = flat.view({x.size(0), -1});
    int64_t n = static_cast<int64_t>(x.size(0));
    return std::vector<Tensor>{y * static_cast<double>(n), flat.select(0, -1)};
  };
  auto f = compile(fn, with_policy(DynamicPolicy::kDynamic));
  for (int64_t n : {4, 6, 4}) expect_matches_eager(f, fn, {randn_seeded({n, 6}, n)});
  // The pinned size makes one entry per size, but no internal error.
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.num_entries(), 2u);
}

TEST(DynamicShapesRegress, DynamicTraceFailureFallsBackToStaticUnderExplicitDynamic) {
  // is_causal attention builds its mask with arange(L): not traceable with a symbolic length.
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[0], in[0], {}, true)};
  };
  auto f = compile(fn, with_policy(DynamicPolicy::kDynamic));
  for (int64_t l : {5, 7}) expect_matches_eager(f, fn, {randn_seeded({2, l, 8}, l)}, 1e-6);
  EXPECT_EQ(f.stats().compiles, 2);
}

// ---- item 6: train-mode BatchNorm under kDynamic ----

TEST(DynamicShapesRegress, TrainBatchNormUnderExplicitDynamic) {
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  auto ref = std::make_shared<nn::BatchNorm2d>(3);
  bn->train();
  ref->train();
  auto f = compile(bn, with_policy(DynamicPolicy::kDynamic));
  for (int64_t b : {4, 6, 2, 9}) {
    Tensor x = randn_seeded({b, 3, 5, 7}, b);
    std::vector<Tensor> got = f({x});
    Tensor want = ref->forward(x);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(same_values(got[0], want, 1e-6));
  }
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_TRUE(same_values(bn->buffer("running_mean"), ref->buffer("running_mean"), 1e-6));
  EXPECT_TRUE(same_values(bn->buffer("running_var"), ref->buffer("running_var"), 1e-6));
  EXPECT_TRUE(same_values(bn->buffer("num_batches_tracked"), ref->buffer("num_batches_tracked")));
}

// ---- item 7: strided inputs are guarded by layout class, not stride numbers ----

TEST(DynamicShapesRegress, TransposedInputDoesNotRecompilePerSize) {
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];  // [b, 4], dense with dim 0 innermost
    return std::vector<Tensor>{relu(x) * 2.0, x.transpose(0, 1).reshape({-1}), x.reshape({-1})};
  };
  auto f = compile(fn);
  for (int64_t b : {4, 5, 6, 7, 9}) {
    Tensor x = randn_seeded({4, b}, b).t();
    expect_matches_eager(f, fn, {x});
  }
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.guards_string(0), "dense in dim order")) << f.guards_string(0);

  // Another layout class is another entry, and still right.
  Tensor rowmajor = randn_seeded({6, 4}, 1);
  expect_matches_eager(f, fn, {rowmajor});
  Tensor stepped = randn_seeded({4, 12}, 2).t().slice(0, 0, 12, 2);  // not dense
  expect_matches_eager(f, fn, {stepped});
  EXPECT_EQ(f.stats().compiles, 4);
}

TEST(DynamicShapesRegress, PermutedFourDInputUnderExplicitDynamic) {
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(in[0] * in[0], {1}), in[0].permute({0, 2, 1, 3}).contiguous()};
  };
  auto f = compile(fn, with_policy(DynamicPolicy::kDynamic));
  for (int64_t b : {2, 3, 5}) {
    Tensor x = randn_seeded({3, 4, 5, b}, b).permute({3, 0, 1, 2});  // dim 0 innermost
    expect_matches_eager(f, fn, {x}, 1e-6);
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

// ---- item 8: chunk / split and attention head size ----

TEST(DynamicShapesRegress, ChunkOfADivisibleSymbolicDimStaysSymbolic) {
  auto fn = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> p = chunk(in[0], 3, 1);
    return std::vector<Tensor>{p[0] * p[1] + p[2]};
  };
  auto f = compile(fn);
  for (int64_t e : {4, 6, 8, 2, 11}) expect_matches_eager(f, fn, {randn_seeded({2, 3 * e}, e)});
  EXPECT_EQ(f.stats().compiles, 2);
}

TEST(DynamicShapesRegress, ChunkAndSplitWithARemainderStaySymbolic) {
  auto fn = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> c = chunk(in[0], 3, 0);
    std::vector<Tensor> s = split(in[0], 4, 0);
    std::vector<Tensor> out;
    for (const Tensor& t : c) out.push_back(t * 2.0);
    for (const Tensor& t : s) out.push_back(t + 1.0);
    return out;
  };
  auto f = compile(fn, with_policy(DynamicPolicy::kDynamic));
  // 10 and 11 both give three unequal chunks (4,4,2 and 4,4,3) and three split pieces.
  for (int64_t n : {10, 11, 10}) expect_matches_eager(f, fn, {randn_seeded({n, 2}, n)});
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_TRUE(contains(f.guards_string(0), "[split] the number of pieces")) << f.guards_string(0);
  EXPECT_TRUE(contains(f.guards_string(0), "[chunk] the number of pieces")) << f.guards_string(0);
  // 12 divides into equal chunks: another entry (equal pieces share one expression).
  expect_matches_eager(f, fn, {randn_seeded({12, 2}, 12)});
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.guards_string(0), "[chunk] the size divides")) << f.guards_string(0);
  // 20 gives five split pieces: a new entry.
  expect_matches_eager(f, fn, {randn_seeded({20, 2}, 20)});
  EXPECT_EQ(f.stats().compiles, 3);
  for (int64_t n : {10, 12, 20, 19, 11}) expect_matches_eager(f, fn, {randn_seeded({n, 2}, n)});
  EXPECT_EQ(f.stats().compiles, 3);
}

TEST(DynamicShapesRegress, SplitThatPinsASizeSaysWhy) {
  auto fn = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> s = split(in[0], std::vector<int64_t>{2, 3}, 1);
    return std::vector<Tensor>{sum(s[0], {1}), sum(s[1], {1})};
  };
  auto f = compile(fn, with_policy(DynamicPolicy::kDynamic));
  set_compile_logs("recompiles");
  testing::internal::CaptureStderr();
  expect_matches_eager(f, fn, {randn_seeded({4, 5}, 1)}, 1e-6);
  std::string log = testing::internal::GetCapturedStderr();
  set_compile_logs("");
  EXPECT_TRUE(contains(log, "arg0.size(1)")) << log;
  EXPECT_TRUE(contains(log, "specialized it to 5")) << log;
  EXPECT_TRUE(contains(log, "[split]")) << log;
  // The batch dim is still symbolic.
  expect_matches_eager(f, fn, {randn_seeded({7, 5}, 2)}, 1e-6);
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(DynamicShapesRegress, AttentionWithAChangingHeadSizeStaysSymbolic) {
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2])};
  };
  auto f = compile(fn);
  for (int64_t d : {8, 16, 4, 32, 12}) {
    std::vector<Tensor> in{randn_seeded({2, 3, 5, d}, d), randn_seeded({2, 3, 6, d}, d + 1),
                           randn_seeded({2, 3, 6, d}, d + 2)};
    expect_matches_eager(f, fn, in, 1e-5);
  }
  EXPECT_EQ(f.stats().compiles, 2);
}
