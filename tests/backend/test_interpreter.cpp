// The interpreter backend: results equal eager, in-place updates reach the caller, symbolic
// attributes take each call's symbol values, intermediates die at their last use, and concurrent
// runs are independent.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "../ir/ir_test_util.h"
#include "lathe/backend/backend.h"
#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/sym/shape_env.h"

namespace lathe::backend {
namespace {

using ir::Graph;
using ir::Value;
using ir::ValueType;
using namespace ir::testing;

std::unique_ptr<Executable> compile(const Graph& g) {
  g.verify();
  return create_backend("interpreter")->compile(g);
}

void expect_equal(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
}

Attrs conv_attrs(int64_t stride, int64_t pad) {
  return Attrs{{"stride", to_shape({stride, stride})},
               {"padding", to_shape({pad, pad})},
               {"dilation", to_shape({1, 1})},
               {"groups", int64_t{1}}};
}

// conv2d -> batch_norm (eval) -> relu -> adaptive_avg_pool2d -> view -> matmul + add: a small CNN.
struct ConvNet {
  Graph g;
  ConvNet() {
    Value* x = g.add_input(T({2, 3, 8, 8}), arg(0));
    Value* w = g.add_input(T({4, 3, 3, 3}), cap(1, "conv.weight"));
    Value* b = g.add_input(T({4}), cap(2, "conv.bias"));
    Value* rm = g.add_input(T({4}), cap(3, "bn.running_mean"));
    Value* rv = g.add_input(T({4}), cap(4, "bn.running_var"));
    Value* fw = g.add_input(T({4, 5}), cap(5, "fc.weight"));
    Value* fb = g.add_input(T({5}), cap(6, "fc.bias"));
    Value* c = g.add_node(op("conv2d"), {x, w, b}, conv_attrs(2, 1), {T({2, 4, 4, 4})})->output();
    Value* n =
        g.add_node(op("batch_norm"), {c, rm, rv, nullptr, nullptr},
                   Attrs{{"training", false}, {"momentum", 0.1}, {"eps", 1e-5}}, {T({2, 4, 4, 4})})
            ->output();
    Value* r = g.add_node(op("relu"), {n}, {}, {T({2, 4, 4, 4})})->output();
    Value* p = g.add_node(op("adaptive_avg_pool2d"), {r}, Attrs{{"output_size", to_shape({1, 1})}},
                          {T({2, 4, 1, 1})})
                   ->output();
    ValueType vt = T({2, 4});
    vt.strides = {4, 1};
    Value* v = g.add_node(op("view"), {p}, Attrs{{"size", to_shape({2, 4})}}, {vt})->output();
    Value* m = g.add_node(op("matmul"), {v, fw}, {}, {T({2, 5})})->output();
    Value* o = g.add_node(op("add"), {m, fb}, Attrs{{"alpha", 1.0}}, {T({2, 5})})->output();
    g.set_outputs({o});
  }
  static std::vector<Tensor> params() {
    return {randn({4, 3, 3, 3}), randn({4}),    randn({4}),
            rand({4}) + 0.5,     randn({4, 5}), randn({5})};
  }
  static Tensor eager(const Tensor& x, const std::vector<Tensor>& p) {
    Tensor c = conv2d(x, p[0], p[1], {2, 2}, {1, 1});
    Tensor n = batch_norm(c, p[2], p[3], {}, {}, false, 0.1, 1e-5);
    Tensor pooled = adaptive_avg_pool2d(relu(n), {1, 1});
    return add(matmul(pooled.view(to_shape({2, 4})), p[4]), p[5]);
  }
  static std::vector<Tensor> inputs(const Tensor& x, const std::vector<Tensor>& p) {
    std::vector<Tensor> in{x};
    in.insert(in.end(), p.begin(), p.end());
    return in;
  }
};

TEST(Interpreter, MatchesEagerOnRandomData) {
  manual_seed(1);
  ConvNet net;
  auto exe = compile(net.g);
  auto p = ConvNet::params();
  for (int call = 0; call < 3; ++call) {
    Tensor x = randn({2, 3, 8, 8});
    auto out = exe->run(ConvNet::inputs(x, p), {});
    ASSERT_EQ(out.size(), 1u);
    expect_equal(out[0], ConvNet::eager(x, p));
  }
}

TEST(Interpreter, BatchNormTrainingUpdatesRunningStatsInPlace) {
  manual_seed(2);
  Graph g;
  Value* x = g.add_input(T({4, 3, 5, 5}), arg(0));
  Value* w = g.add_input(T({3}), cap(1, "bn.weight"));
  Value* b = g.add_input(T({3}), cap(2, "bn.bias"));
  Value* rm = g.add_input(T({3}), cap(3, "bn.running_mean"));
  Value* rv = g.add_input(T({3}), cap(4, "bn.running_var"));
  Value* n =
      g.add_node(op("batch_norm"), {x, rm, rv, w, b},
                 Attrs{{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}}, {T({4, 3, 5, 5})})
          ->output();
  Value* r = g.add_node(op("relu"), {n}, {}, {T({4, 3, 5, 5})})->output();
  g.set_outputs({r});
  auto exe = compile(g);

  Tensor weight = randn({3}), bias = randn({3});
  Tensor mean_c = randn({3}), var_c = rand({3}) + 0.5;
  Tensor mean_e = mean_c.clone(), var_e = var_c.clone();
  Tensor mean0 = mean_c.clone();
  uint64_t version = mean_c.impl().storage->version();
  for (int call = 0; call < 3; ++call) {
    Tensor in = randn({4, 3, 5, 5});
    std::vector<Tensor> inputs{in, weight, bias, mean_c, var_c};
    auto out = exe->run(inputs, {});
    Tensor want = relu(batch_norm(in, mean_e, var_e, weight, bias, true, 0.1, 1e-5));
    expect_equal(out[0], want);
    expect_equal(mean_c, mean_e);
    expect_equal(var_c, var_e);
  }
  EXPECT_EQ(mean_c.impl().storage->version(), version + 3);
  EXPECT_NE(mean_c.to_vector<float>(), mean0.to_vector<float>());
}

TEST(Interpreter, AddInPlaceWritesIntoTheCallersTensor) {
  Graph g;
  Value* acc = g.add_input(T({4}), cap(0, "acc"));
  Value* y = g.add_input(T({4}), arg(1));
  Value* a = g.add_node(op("add_"), {acc, y}, Attrs{{"alpha", 2.0}}, {T({4})})->output();
  Value* r = g.add_node(op("neg"), {a}, {}, {T({4})})->output();
  g.set_outputs({r});
  auto exe = compile(g);
  Tensor accv = from_vector<float>({1, 2, 3, 4}, {4});
  Tensor yv = from_vector<float>({1, 1, 1, 1}, {4});
  std::vector<Tensor> in{accv, yv};
  exe->run(in, {});
  auto out = exe->run(in, {});
  EXPECT_EQ(accv.to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{-5, -6, -7, -8}));
}

TEST(Interpreter, SubstitutesSymbolValuesIntoSymbolicAttributes) {
  sym::ShapeEnv env;
  SymInt s0 = env.create_symbol(2, sym::Source::size(0, 0), sym::DimPolicy::kDynamic);
  ASSERT_EQ(s0.to_string(), "s0");
  Graph g;
  Value* x = g.add_input(T({s0, 6}), arg(0));
  Value* v =
      g.add_node(op("view"), {x}, Attrs{{"size", Shape{s0 * 3, 2}}}, {T({s0 * 3, 2})})->output();
  Value* r = g.add_node(op("relu"), {v}, {}, {T({s0 * 3, 2})})->output();
  g.set_outputs({r});
  auto exe = create_backend("interpreter")->compile(g);
  for (int64_t n : {2, 5}) {
    Tensor in = randn({n, 6});
    int64_t symbols[] = {n};
    auto out = exe->run({&in, 1}, symbols);
    EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3 * n, 2}));
    expect_equal(out[0], relu(in.view(to_shape({3 * n, 2}))));
  }
  Tensor in = randn({2, 6});
  try {
    exe->run({&in, 1}, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[interpreter] node %1 (view): [sym] evaluate: no value given for symbol s0");
  }
}

TEST(Interpreter, OutputsThatAreInputsDuplicatesMultiOutputAndUndefinedOptionals) {
  Graph g;
  Value* x = g.add_input(T({4, 3}), arg(0));
  Value* img = g.add_input(T({1, 2, 5, 5}), arg(1));
  Value* w = g.add_input(T({3, 2, 3, 3}), arg(2));
  ir::Node* sp = g.add_node(split2_op(), {x}, {}, {T({2, 3}), T({2, 3})});
  Value* s =
      g.add_node(op("add"), {sp->output(0), sp->output(1)}, Attrs{{"alpha", 1.0}}, {T({2, 3})})
          ->output();
  Value* c =
      g.add_node(op("conv2d"), {img, w, nullptr}, conv_attrs(1, 0), {T({1, 3, 3, 3})})->output();
  g.add_node(split2_op(), {x}, {}, {T({2, 3}), T({2, 3})});  // unused outputs
  g.set_outputs({x, s, s, c, sp->output(1)});
  auto exe = compile(g);
  Tensor xv = randn({4, 3}), iv = randn({1, 2, 5, 5}), wv = randn({3, 2, 3, 3});
  std::vector<Tensor> in{xv, iv, wv};
  auto out = exe->run(in, {});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(out[0].is_same(xv));
  EXPECT_TRUE(out[1].is_same(out[2]));
  expect_equal(out[1], add(xv.narrow(0, 0, 2), xv.narrow(0, 2, 2)));
  expect_equal(out[3], conv2d(iv, wv));
  expect_equal(out[4], xv.narrow(0, 2, 2).contiguous());
}

// Probe ops: test.remember keeps a weak reference to its input's storage and passes a copy on;
// test.count_dead records how many remembered storages are gone when it runs.
std::vector<std::weak_ptr<Storage>> g_remembered;
std::atomic<int> g_dead_at_check{-1};

const OpDef& remember_op() {
  static const OpDef& def = OpRegistry::global().add(
      OpDef{"test.remember",
            1,
            [](TensorList in, const Attrs&) {
              TensorMeta m;
              m.sizes = in[0].sizes();
              m.dtype = in[0].dtype();
              return std::vector<TensorMeta>{m};
            },
            [](TensorList in, const Attrs&, const std::vector<TensorMeta>&) {
              g_remembered.push_back(in[0].impl().storage);
              return std::vector<Tensor>{in[0].clone()};
            },
            {},
            {}});
  return def;
}

const OpDef& count_dead_op() {
  static const OpDef& def = OpRegistry::global().add(
      OpDef{"test.count_dead",
            1,
            [](TensorList in, const Attrs&) {
              TensorMeta m;
              m.sizes = in[0].sizes();
              m.dtype = in[0].dtype();
              return std::vector<TensorMeta>{m};
            },
            [](TensorList in, const Attrs&, const std::vector<TensorMeta>&) {
              int dead = 0;
              for (const auto& w : g_remembered) dead += w.expired();
              g_dead_at_check = dead;
              return std::vector<Tensor>{in[0].clone()};
            },
            {},
            {}});
  return def;
}

TEST(Interpreter, ReleasesIntermediatesAtTheirLastUse) {
  Graph g;
  Value* x = g.add_input(T({16}), arg(0));
  Value* a = g.add_node(op("relu"), {x}, {}, {T({16})})->output();      // intermediate
  Value* ka = g.add_node(remember_op(), {a}, {}, {T({16})})->output();  // last use of a
  Value* b = g.add_node(op("neg"), {x}, {}, {T({16})})->output();       // graph output
  Value* kb = g.add_node(remember_op(), {b}, {}, {T({16})})->output();
  Value* kx = g.add_node(remember_op(), {x}, {}, {T({16})})->output();  // graph input
  Value* s = g.add_node(op("add"), {ka, kb}, Attrs{{"alpha", 1.0}}, {T({16})})->output();
  Value* t = g.add_node(op("add"), {s, kx}, Attrs{{"alpha", 1.0}}, {T({16})})->output();
  Value* chk = g.add_node(count_dead_op(), {t}, {}, {T({16})})->output();
  g.set_outputs({chk, b});
  auto exe = compile(g);
  g_remembered.clear();
  Tensor in = randn({16});
  auto out = exe->run({&in, 1}, {});
  ASSERT_EQ(g_remembered.size(), 3u);
  // Only relu's result was released before the check; b is an output and x the caller's input.
  EXPECT_EQ(g_dead_at_check.load(), 1);
  EXPECT_TRUE(g_remembered[0].expired());
  EXPECT_FALSE(g_remembered[1].expired());
  EXPECT_FALSE(g_remembered[2].expired());
  expect_equal(out[1], neg(in));
}

TEST(Interpreter, ConcurrentRunsAreIndependent) {
  manual_seed(3);
  ConvNet net;
  auto exe = compile(net.g);
  auto p = ConvNet::params();
  std::vector<Tensor> xs, want;
  for (int t = 0; t < 2; ++t) {
    xs.push_back(randn({2, 3, 8, 8}));
    want.push_back(ConvNet::eager(xs.back(), p));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      auto in = ConvNet::inputs(xs[t], p);
      for (int i = 0; i < 50; ++i) {
        auto out = exe->run(in, {});
        if (out[0].to_vector<float>() != want[t].to_vector<float>()) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Interpreter, ClearErrorsForBadCalls) {
  ConvNet net;
  auto exe = compile(net.g);
  auto p = ConvNet::params();
  Tensor x = randn({2, 3, 8, 8});
  std::vector<Tensor> too_few{x};
  try {
    exe->run(too_few, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[interpreter] the graph takes 7 inputs, got 1");
  }
  auto in = ConvNet::inputs(x.to(DType::f64), p);
  try {
    exe->run(in, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[interpreter] input 0 (arg0) is f64[2,3,8,8], the graph expects f32 with 4 dims");
  }
  // A kernel's error names the node.
  in = ConvNet::inputs(randn({2, 5, 8, 8}), p);
  try {
    exe->run(in, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[interpreter] node %7 (conv2d): [conv2d]", 0), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace lathe::backend
