// Behaviour under compile, written down: what a compiled function does with mutations, aliasing,
// captured tensors, data reads and side effects, compared with eager.
#include <gtest/gtest.h>

#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "test_util.h"

using namespace lathe;
using lathe::test::contains;
using lathe::test::randn_seeded;
using lathe::test::same_values;

// With fullgraph, reading data while tracing stays an error (without it the function breaks into
// regions: graph_breaks_test.cpp).
static CompileOptions fullgraph() {
  CompileOptions o;
  o.fullgraph = true;
  return o;
}

TEST(Footguns, ItemWhileTracingIsAClearError) {
  auto f = compile(
      [](const std::vector<Tensor>& in) {
        double s = sum(in[0]).item();  // data-dependent: not traceable as one graph
        return mul(in[0], s);
      },
      fullgraph());
  try {
    f({randn_seeded({3}, 1)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "[trace] item() reads the data of f32[]")) << e.what();
    EXPECT_TRUE(contains(e.what(), "return the tensor from the compiled function")) << e.what();
  }
  EXPECT_EQ(f.stats().compiles, 0);
}

TEST(Footguns, ToVectorAndPrintingWhileTracingAreClearErrors) {
  auto g = compile(
      [](const std::vector<Tensor>& in) {
        auto v = relu(in[0]).to_vector<float>();
        return in[0];
      },
      fullgraph());
  try {
    g({randn_seeded({3}, 1)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "[trace] to_vector() reads the data")) << e.what();
  }
  auto h = compile(
      [](const std::vector<Tensor>& in) {
        std::string s = relu(in[0]).to_string();
        return in[0];
      },
      fullgraph());
  try {
    h({randn_seeded({3}, 1)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "[trace] printing a tensor's values")) << e.what();
  }
  // Shapes are metadata: reading them is fine.
  auto k = compile([](const std::vector<Tensor>& in) {
    EXPECT_EQ(in[0].shape_string(), "f32[3]");
    return relu(in[0]);
  });
  k({randn_seeded({3}, 1)});
}

TEST(Footguns, SideEffectsInTheFunctionRunOnlyWhenTracing) {
  int traced = 0;
  auto f = compile([&traced](const std::vector<Tensor>& in) {
    ++traced;  // host code runs at trace time only
    return relu(in[0]);
  });
  for (int i = 0; i < 3; ++i) f({randn_seeded({3}, i)});
  EXPECT_EQ(traced, 1);
}

TEST(Footguns, InPlaceUpdateOfAnInputLandsInTheCallersTensor) {
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    add_(x, in[1]);  // x += y
    return std::vector<Tensor>{mul(x, 2.0)};
  };
  auto f = compile(fn);
  for (uint64_t seed = 0; seed < 3; ++seed) {
    Tensor x = randn_seeded({4}, seed), y = randn_seeded({4}, 10 + seed);
    Tensor xe = x.clone();
    Tensor ye = fn({xe, y})[0];
    Tensor yc = f({x, y})[0];
    EXPECT_TRUE(same_values(x, xe)) << "the input was not updated like eager";
    EXPECT_TRUE(same_values(yc, ye));
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(Footguns, OptimizerStyleUpdateOfACapturedParameter) {
  Tensor w = randn_seeded({3}, 1);
  Tensor w_eager = w.clone();
  auto step = [](Tensor& p, const Tensor& g) {
    Tensor d = mul(g, -0.1);
    add_(p, d);
    return p;
  };
  auto f = compile([&w, &step](const std::vector<Tensor>& in) { return step(w, in[0]); });
  for (uint64_t i = 0; i < 3; ++i) {
    Tensor g = randn_seeded({3}, 20 + i);
    Tensor out = f({g})[0];
    step(w_eager, g);
    EXPECT_TRUE(same_values(w, w_eager));
    EXPECT_TRUE(out.is_same(w)) << "the returned parameter is the parameter itself, as in eager";
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(Footguns, OutputThatIsAnInputIsTheSameTensor) {
  auto f = compile([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0], relu(in[1])};
  });
  Tensor a = randn_seeded({2}, 1), b = randn_seeded({2}, 2);
  auto out = f({a, b});
  EXPECT_TRUE(out[0].is_same(a));
  Tensor a2 = randn_seeded({2}, 3);
  out = f({a2, b});
  EXPECT_TRUE(out[0].is_same(a2)) << "not the tensor of the first call";
}

TEST(Footguns, OutputViewOfAnInputSharesItsMemory) {
  auto f = compile([](const std::vector<Tensor>& in) { return in[0].transpose(0, 1); });
  Tensor x = randn_seeded({2, 3}, 1);
  Tensor v = f({x})[0];
  EXPECT_EQ(v.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(same_values(v, x.transpose(0, 1)));
  v.fill_(5.0);  // writing through the view writes the input, as in eager
  for (float e : x.to_vector<float>()) EXPECT_EQ(e, 5.0f);
}

TEST(Footguns, DuplicatedOutputsAreOneTensor) {
  auto f = compile([](const std::vector<Tensor>& in) {
    Tensor y = relu(in[0]);
    return std::vector<Tensor>{y, y, exp(in[0])};
  });
  Tensor x = randn_seeded({4}, 1);
  auto out = f({x});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].is_same(out[1]));
  EXPECT_TRUE(same_values(out[0], relu(x)));
  EXPECT_TRUE(same_values(out[2], exp(x)));
}

TEST(Footguns, InputPassedTwiceIsOneGraphInputWithAnAliasGuard) {
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor a = in[0];
    add_(a, 1.0 * ones({3}));  // writes a; when b is the same tensor, b sees it
    return std::vector<Tensor>{mul(in[1], 2.0)};
  };
  auto f = compile(fn);
  Tensor x = randn_seeded({3}, 1);
  Tensor xe = x.clone();
  Tensor yc = f({x, x})[0];
  Tensor ye = fn({xe, xe})[0];
  EXPECT_TRUE(same_values(yc, ye));
  EXPECT_TRUE(same_values(x, xe));
  EXPECT_TRUE(contains(f.graph_string(), "input arg0")) << f.graph_string();
  EXPECT_FALSE(contains(f.graph_string(), "input arg1")) << f.graph_string();
  // Two distinct tensors do not hit the aliased entry.
  Tensor p = randn_seeded({3}, 2), q = randn_seeded({3}, 3);
  Tensor pe = p.clone(), qe = q.clone();
  EXPECT_TRUE(same_values(f({p, q})[0], fn({pe, qe})[0]));
  EXPECT_TRUE(same_values(p, pe));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "guard failed: arg1 is arg0"))
      << f.last_recompile_reason();
}

TEST(Footguns, CapturedTensorUpdatedInPlaceIsSeen) {
  Tensor bias = randn_seeded({3}, 1);
  auto f = compile([bias](const std::vector<Tensor>& in) { return add(in[0], bias); });
  Tensor x = randn_seeded({3}, 2);
  f({x});
  bias.fill_(7.0);  // captured by reference: the next call uses the new values
  EXPECT_TRUE(same_values(f({x})[0], add(x, full({3}, 7.0))));
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(Footguns, CapturedTensorReboundOutsideIsNotSeen) {
  // The trace holds the tensor object it captured. Rebinding the variable to another tensor is
  // invisible to it (no guard can see a C++ variable): pass such tensors as arguments, or update
  // them in place.
  Tensor bias = randn_seeded({3}, 1);
  Tensor original = bias.clone();
  auto f = compile([&bias](const std::vector<Tensor>& in) { return add(in[0], bias); });
  Tensor x = randn_seeded({3}, 2);
  f({x});
  bias = full({3}, 7.0);
  EXPECT_TRUE(same_values(f({x})[0], add(x, original)));
}

TEST(Footguns, TensorsMadeInsideAreConstantsOfTheTrace) {
  // Factories (zeros, randn, ...) run while tracing, on real data: their result is captured as a
  // constant. Random values are therefore frozen across calls.
  auto f = compile([](const std::vector<Tensor>& in) { return add(in[0], randn({3})); });
  Tensor x = zeros({3});
  Tensor a = f({x})[0], b = f({x})[0];
  EXPECT_TRUE(same_values(a, b));
}

TEST(Footguns, BatchNormRunningStatsUpdateInTrainMode) {
  manual_seed(11);
  auto make_bn = [] {
    auto bn = nn::make<nn::BatchNorm2d>(3);
    bn->train();
    return bn;
  };
  auto eager = make_bn();
  auto compiled_bn = make_bn();
  auto f = compile(std::static_pointer_cast<nn::Module>(compiled_bn));
  for (uint64_t i = 0; i < 3; ++i) {
    Tensor x = randn_seeded({2, 3, 4, 4}, 30 + i);
    EXPECT_TRUE(same_values(f({x})[0], eager->forward(x), 1e-6));
  }
  EXPECT_TRUE(
      same_values(compiled_bn->buffer("running_mean"), eager->buffer("running_mean"), 1e-6));
  EXPECT_TRUE(same_values(compiled_bn->buffer("running_var"), eager->buffer("running_var"), 1e-6));
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(Footguns, TensorFromAnEarlierTraceIsAnError) {
  Tensor leaked;
  auto f = compile([&leaked](const std::vector<Tensor>& in) {
    if (!leaked.defined()) leaked = relu(in[0]);  // a fake tensor escapes the trace
    return add(in[0], leaked);
  });
  f({randn_seeded({3}, 1)});
  auto g = compile([&leaked](const std::vector<Tensor>& in) { return add(in[0], leaked); });
  try {
    g({randn_seeded({3}, 2)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "does not belong to this trace")) << e.what();
  }
}

TEST(Footguns, UnknownBackendIsAnError) {
  CompileOptions o;
  o.backend = "no-such-backend";
  EXPECT_THROW(compile([](const std::vector<Tensor>& in) { return in[0]; }, o), Error);
}
