// Error paths of the ops (Lathe only; no torch needed): for a representative bad input per op,
// a lathe::Error is thrown whose message names the op in brackets and the offending shape or
// value, e.g. "[conv2d] input has 3 channels, weight expects 4: input f32[1,3,8,8], ...".
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/tensor.h"
#include "lathe/ir/graph.h"
#include "lathe/ops/op_def.h"
#include "tests/oracle/oracle_weak_ops.h"

namespace lathe::oracle {
namespace {

Tensor rnd(const std::vector<int64_t>& shape, DType dt = DType::f32) {
  static Generator gen(1234);
  if (dt == DType::f32 || dt == DType::f64) return randn(to_shape(shape), dt, &gen);
  return randint(0, 3, to_shape(shape), dt, &gen);
}

// Runs f, expecting a lathe::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks \"" << p << "\": " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-lathe exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "no error thrown (expected one mentioning " << ::testing::PrintToString(parts)
                << ")";
}

// Fails the test (instead of crashing on a null weak symbol) while an op is not implemented.
#define REQUIRE_LINKED(type, fn) \
  ASSERT_TRUE(linked<type>(&fn)) << #fn " is not linked (not implemented yet)"

using T = const Tensor&;
using Bin = Tensor (*)(T, T);
using BinA = Tensor (*)(T, T, double);

TEST(OpErrors, BinaryNonBroadcastable) {
  REQUIRE_LINKED(BinA, lathe::add);
  REQUIRE_LINKED(BinA, lathe::sub);
  REQUIRE_LINKED(Bin, lathe::mul);
  REQUIRE_LINKED(Bin, lathe::div);
  REQUIRE_LINKED(Bin, lathe::maximum);
  REQUIRE_LINKED(Bin, lathe::eq);
  Tensor a = rnd({2, 3}), b = rnd({4});
  expect_error([&] { lathe::add(a, b); }, {"[add]", "[2,3]", "[4]"});
  expect_error([&] { lathe::sub(a, b); }, {"[sub]", "[2,3]", "[4]"});
  expect_error([&] { lathe::mul(a, rnd({3, 3})); }, {"[mul]", "[2,3]", "[3,3]"});
  expect_error([&] { lathe::div(rnd({2, 1, 3}), rnd({4, 2})); }, {"[div]", "[2,1,3]", "[4,2]"});
  expect_error([&] { lathe::maximum(a, b); }, {"[maximum]", "[2,3]"});
  expect_error([&] { lathe::eq(a, b); }, {"[eq]", "[2,3]"});
}

TEST(OpErrors, WhereNonBroadcastable) {
  REQUIRE_LINKED(Tensor(*)(T, T, T), lathe::where);
  Tensor cond = from_vector<bool>({true, false, true, false, true, true}, {2, 3});
  expect_error([&] { lathe::where(cond, rnd({3, 2}), rnd({2, 3})); }, {"[where]", "[3,2]"});
}

TEST(OpErrors, InPlaceSelfCannotBroadcast) {
  REQUIRE_LINKED(Tensor & (*)(Tensor&, T, double), lathe::add_);
  Tensor self = rnd({3});
  expect_error([&] { lathe::add_(self, rnd({2, 3}), 1.0); }, {"[add_]", "[3]", "[2,3]"});
}

TEST(OpErrors, UnaryParameters) {
  REQUIRE_LINKED(Tensor(*)(T, const std::string&), lathe::gelu);
  expect_error([&] { lathe::gelu(rnd({2, 3}), "fast"); }, {"[gelu]", "fast"});
}

TEST(OpErrors, MatmulShapes) {
  REQUIRE_LINKED(Bin, lathe::matmul);
  expect_error([&] { lathe::matmul(rnd({2, 3}), rnd({4, 5})); }, {"[matmul]", "[2,3]", "[4,5]"});
  expect_error(
      [&] {
        lathe::matmul(rnd({2, 3, 4}), rnd({3, 4, 5}));
      },
      {"[matmul]", "[2,3,4]", "[3,4,5]"});
  expect_error([&] { lathe::matmul(rnd({}), rnd({3})); }, {"[matmul]"});
}

TEST(OpErrors, LinearShapes) {
  REQUIRE_LINKED(Tensor(*)(T, T, T), lathe::linear);
  expect_error([&] { lathe::linear(rnd({2, 3}), rnd({4, 5})); }, {"[linear]", "[2,3]", "[4,5]"});
  expect_error([&] { lathe::linear(rnd({2, 5}), rnd({4, 5}), rnd({3})); }, {"[linear]", "[3]"});
}

TEST(OpErrors, Conv2d) {
  REQUIRE_LINKED(decltype(&lathe::conv2d), lathe::conv2d);
  // Wrong rank (torch takes 4-d, or 3-d unbatched).
  expect_error([&] { lathe::conv2d(rnd({8, 8}), rnd({4, 3, 3, 3})); }, {"[conv2d]", "[8,8]"});
  expect_error(
      [&] {
        lathe::conv2d(rnd({1, 1, 3, 8, 8}), rnd({4, 3, 3, 3}));
      },
      {"[conv2d]", "[1,1,3,8,8]"});
  expect_error([&] { lathe::conv2d(rnd({1, 3, 8, 8}), rnd({4, 3, 3})); }, {"[conv2d]", "[4,3,3]"});
  // Channel mismatch.
  expect_error(
      [&] {
        lathe::conv2d(rnd({1, 3, 8, 8}), rnd({4, 2, 3, 3}));
      },
      {"[conv2d]", "[1,3,8,8]", "[4,2,3,3]"});
  // Groups that do not divide the channels.
  expect_error(
      [&] {
        lathe::conv2d(rnd({1, 6, 8, 8}), rnd({4, 3, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 4);
      },
      {"[conv2d]", "[1,6,8,8]"});
  // Kernel larger than the padded input.
  expect_error(
      [&] {
        lathe::conv2d(rnd({1, 3, 2, 2}), rnd({4, 3, 3, 3}));
      },
      {"[conv2d]", "[1,3,2,2]"});
  // Bias of the wrong size.
  expect_error(
      [&] {
        lathe::conv2d(rnd({1, 3, 8, 8}), rnd({4, 3, 3, 3}), rnd({5}));
      },
      {"[conv2d]", "[5]"});
  // Integer input.
  expect_error(
      [&] {
        lathe::conv2d(rnd({1, 3, 8, 8}, DType::i64), rnd({4, 3, 3, 3}));
      },
      {"[conv2d]", "[1,3,8,8]"});
}

TEST(OpErrors, Pooling) {
  REQUIRE_LINKED(decltype(&lathe::max_pool2d), lathe::max_pool2d);
  REQUIRE_LINKED(decltype(&lathe::avg_pool2d), lathe::avg_pool2d);
  REQUIRE_LINKED(decltype(&lathe::adaptive_avg_pool2d), lathe::adaptive_avg_pool2d);
  expect_error([&] { lathe::max_pool2d(rnd({4, 4}), {2, 2}); }, {"[max_pool2d]", "[4,4]"});
  expect_error(
      [&] {
        lathe::max_pool2d(rnd({1, 1, 2, 2}), {3, 3});
      },
      {"[max_pool2d]", "[1,1,2,2]"});
  // torch: "pad should be at most half of effective kernel size".
  expect_error(
      [&] {
        lathe::max_pool2d(rnd({1, 1, 8, 8}), {2, 2}, {2, 2}, {2, 2});
      },
      {"[max_pool2d]"});
  expect_error(
      [&] {
        lathe::avg_pool2d(rnd({1, 2, 2, 4, 4}), {2, 2});
      },
      {"[avg_pool2d]", "[1,2,2,4,4]"});
  expect_error(
      [&] {
        lathe::adaptive_avg_pool2d(rnd({4, 4}), {1, 1});
      },
      {"[adaptive_avg_pool2d]", "[4,4]"});
}

TEST(OpErrors, BatchNormStatsSize) {
  REQUIRE_LINKED(decltype(&lathe::batch_norm), lathe::batch_norm);
  expect_error(
      [&] {
        lathe::batch_norm(rnd({2, 4, 3, 3}), rnd({3}), rnd({3}), {}, {}, false, 0.1, 1e-5);
      },
      {"[batch_norm]", "[2,4,3,3]", "[3]"});
}

TEST(OpErrors, LayerNormShape) {
  REQUIRE_LINKED(decltype(&lathe::layer_norm), lathe::layer_norm);
  expect_error([&] { lathe::layer_norm(rnd({2, 4}), {5}); }, {"[layer_norm]", "[2,4]", "[5]"});
  expect_error([&] { lathe::layer_norm(rnd({2, 4}), {4}, rnd({5})); }, {"[layer_norm]", "[5]"});
}

TEST(OpErrors, SoftmaxDimAndDtype) {
  REQUIRE_LINKED(decltype(&lathe::softmax), lathe::softmax);
  REQUIRE_LINKED(decltype(&lathe::log_softmax), lathe::log_softmax);
  expect_error([&] { lathe::softmax(rnd({2, 3}), 2); }, {"[softmax]", "2"});
  expect_error([&] { lathe::log_softmax(rnd({2, 3}), -3); }, {"[log_softmax]", "-3"});
  expect_error([&] { lathe::softmax(rnd({2, 3}, DType::i64), 1); }, {"[softmax]", "i64"});
}

TEST(OpErrors, Dropout) {
  REQUIRE_LINKED(decltype(&lathe::dropout), lathe::dropout);
  expect_error([&] { lathe::dropout(rnd({2, 3}), 1.5, true); }, {"[dropout]", "1.5"});
}

TEST(OpErrors, Embedding) {
  REQUIRE_LINKED(Bin, lathe::embedding);
  Tensor w = rnd({10, 4});
  expect_error(
      [&] {
        lathe::embedding(w, from_vector<int64_t>({1, 10}, {2}));
      },
      {"[embedding]", "10", "[10,4]"});
  expect_error([&] { lathe::embedding(w, from_vector<int64_t>({-1}, {1})); },
               {"[embedding]", "-1"});
  expect_error([&] { lathe::embedding(w, rnd({3})); }, {"[embedding]", "f32"});
  expect_error([&] { lathe::embedding(rnd({10}), from_vector<int64_t>({1}, {1})); },
               {"[embedding]", "[10]"});
}

TEST(OpErrors, Losses) {
  REQUIRE_LINKED(decltype(&lathe::nll_loss), lathe::nll_loss);
  REQUIRE_LINKED(decltype(&lathe::cross_entropy), lathe::cross_entropy);
  Tensor x = rnd({2, 5});
  expect_error(
      [&] {
        lathe::nll_loss(x, from_vector<int64_t>({1, 2, 3}, {3}));
      },
      {"[nll_loss]", "[2,5]", "[3]"});
  expect_error([&] { lathe::nll_loss(x, from_vector<int64_t>({1, 5}, {2})); }, {"[nll_loss]", "5"});
  expect_error(
      [&] {
        lathe::nll_loss(x, from_vector<int64_t>({1, 2}, {2}), "avg");
      },
      {"[nll_loss]", "avg"});
  expect_error(
      [&] {
        lathe::cross_entropy(x, from_vector<int64_t>({0, 1, 2}, {3}));
      },
      {"[cross_entropy]", "[2,5]", "[3]"});
}

TEST(OpErrors, Attention) {
  REQUIRE_LINKED(decltype(&lathe::scaled_dot_product_attention),
                 lathe::scaled_dot_product_attention);
  expect_error(
      [&] {
        lathe::scaled_dot_product_attention(rnd({1, 2, 5, 8}), rnd({1, 2, 6, 4}),
                                            rnd({1, 2, 6, 4}));
      },
      {"[scaled_dot_product_attention]", "[1,2,5,8]", "[1,2,6,4]"});
  expect_error(
      [&] {
        lathe::scaled_dot_product_attention(rnd({1, 2, 5, 8}), rnd({1, 2, 6, 8}),
                                            rnd({1, 2, 7, 8}));
      },
      {"[scaled_dot_product_attention]", "[1,2,7,8]"});
  expect_error(
      [&] {
        lathe::scaled_dot_product_attention(rnd({1, 2, 5, 8}), rnd({1, 2, 6, 8}), rnd({1, 2, 6, 8}),
                                            rnd({4, 6}));
      },
      {"[scaled_dot_product_attention]", "[4,6]"});
}

TEST(OpErrors, ShapeOps) {
  REQUIRE_LINKED(decltype(&lathe::cat), lathe::cat);
  REQUIRE_LINKED(decltype(&lathe::stack), lathe::stack);
  REQUIRE_LINKED(decltype(&lathe::chunk), lathe::chunk);
  using SplitFn = std::vector<Tensor> (*)(T, int64_t, int64_t);
  REQUIRE_LINKED(SplitFn, lathe::split);
  expect_error([&] { lathe::cat({rnd({2, 3}), rnd({2, 4})}, 0); }, {"[cat]", "[2,3]", "[2,4]"});
  expect_error([&] { lathe::cat({rnd({2, 3})}, 2); }, {"[cat]", "2"});
  expect_error([&] { lathe::cat({}, 0); }, {"[cat]"});
  expect_error([&] { lathe::stack({rnd({2, 3}), rnd({3, 2})}, 0); }, {"[stack]", "[2,3]", "[3,2]"});
  expect_error([&] { lathe::split(rnd({4, 2}), int64_t{2}, int64_t{2}); }, {"[split]", "2"});
  expect_error(
      [&] {
        lathe::split(rnd({4, 2}), std::vector<int64_t>{1, 2}, 0);
      },
      {"[split]", "[4,2]"});
  expect_error([&] { lathe::chunk(rnd({4, 2}), 0, 0); }, {"[chunk]"});
}

TEST(OpErrors, Reductions) {
  using Red = Tensor (*)(T, std::vector<int64_t>, bool);
  using RedDim = Tensor (*)(T, int64_t, bool);
  REQUIRE_LINKED(Red, lathe::sum);
  REQUIRE_LINKED(Red, lathe::mean);
  REQUIRE_LINKED(Red, lathe::amax);
  REQUIRE_LINKED(RedDim, lathe::argmax);
  REQUIRE_LINKED(RedDim, lathe::max);
  REQUIRE_LINKED(decltype(&lathe::var), lathe::var);
  Tensor x = rnd({2, 3});
  expect_error([&] { lathe::sum(x, {2}); }, {"[sum]", "2"});
  expect_error([&] { lathe::mean(x, {-3}); }, {"[mean]", "-3"});
  expect_error([&] { lathe::amax(x, {0, 0}); }, {"[amax]"});
  expect_error([&] { lathe::argmax(x, 5); }, {"[argmax]", "5"});
  expect_error([&] { lathe::max(rnd({0, 3}), 0); }, {"[max]", "[0,3]"});
  expect_error([&] { lathe::var(x, {3}); }, {"[var]", "3"});
}

TEST(OpErrors, Views) {
  Tensor x = rnd({3, 4});
  expect_error([&] { x.select(0, 5); }, {"[select]", "5"});
  expect_error([&] { x.view(to_shape({5})); }, {"[view]", "[5]"});
  expect_error([&] { x.transpose(0, 2); }, {"[transpose]", "2"});
  expect_error([&] { x.permute({0}); }, {"[permute]"});
  expect_error([&] { x.expand(to_shape({3, 5})); }, {"[expand]", "[3,5]"});
  expect_error([&] { x.narrow(1, 3, 2); }, {"[narrow]"});
  expect_error([&] { x.squeeze(2); }, {"[squeeze]", "2"});
  expect_error([&] { x.slice(0, 0, 3, 0); }, {"[slice]"});
  expect_error([&] { x.t().view(to_shape({12})); }, {"[view]"});
}

// The checks live in the shape rules, so a node built without the free functions (dispatched
// directly, replayed from a graph) is rejected too.
void expect_dispatch_error(const char* name, std::vector<Tensor> in, const Attrs& attrs,
                           const std::vector<std::string>& parts) {
  const OpDef& op = OpRegistry::global().get(name);
  expect_error([&] { dispatch(op, in, attrs); }, parts);
  // The verifier runs the same shape rule on the graph's types.
  ir::Graph g;
  std::vector<ir::Value*> values;
  for (const Tensor& t : in) values.push_back(g.add_input(ir::ValueType::of(t), {}));
  ir::Node* n = g.add_node(op, values, attrs, {ir::ValueType::of(in[0])});
  g.set_outputs({n->output()});
  expect_error([&] { g.verify(); }, parts);
}

TEST(OpErrors, AttributeChecksLiveInTheShapeRules) {
  expect_dispatch_error("hardtanh", {rnd({2, 3})}, Attrs{{"min_val", 2.0}, {"max_val", 1.0}},
                        {"[hardtanh]", "min_val 2", "max_val 1"});
  expect_dispatch_error("gelu", {rnd({2, 3})}, Attrs{{"approximate", std::string("fast")}},
                        {"[gelu]", "fast"});
  expect_dispatch_error("clamp", {rnd({2, 3})}, Attrs{}, {"[clamp]", "min and max"});
  expect_dispatch_error("var", {rnd({2, 3})},
                        Attrs{{"dims", Shape{1}}, {"keepdim", false}, {"correction", int64_t{-1}}},
                        {"[var]", "correction", "-1"});
  expect_dispatch_error("std", {rnd({2, 3})},
                        Attrs{{"dims", Shape{1}}, {"keepdim", false}, {"correction", int64_t{-2}}},
                        {"[std]", "correction"});
  expect_dispatch_error("dropout", {rnd({2, 3})}, Attrs{{"p", 1.5}}, {"[dropout]", "1.5"});
}

TEST(OpErrors, AsStridedScatter) {
  // The window must match src and fit in the base.
  expect_error(
      [&] {
        lathe::as_strided_scatter(rnd({4, 5}), rnd({2, 2}), {2, 3}, {5, 1}, 0);
      },
      {"[as_strided_scatter]", "[2,2]", "[2,3]"});
  expect_error(
      [&] {
        lathe::as_strided_scatter(rnd({4, 5}), rnd({2, 5}), {2, 5}, {5, 1}, 12);
      },
      {"[as_strided_scatter]", "reaches past", "20 elements"});
  expect_error(
      [&] {
        lathe::as_strided_scatter(rnd({4, 5}), rnd({2, 5}, DType::f64), {2, 5}, {5, 1}, 0);
      },
      {"[as_strided_scatter]", "dtype"});
}

}  // namespace
}  // namespace lathe::oracle
