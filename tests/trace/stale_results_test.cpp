// A compiled call returns what eager returns, or says why it cannot (issue 10, items 1-4, 9, 10):
// parameters re-assigned through param()/buffer(), modules reached from a lambda, tensors made
// inside the function and returned, verification mode, error messages, stats, reset, log sink.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/trace_errors.h"
#include "test_util.h"
#include "tests/test_env.h"

using namespace lathe;
using lathe::test::contains;
using lathe::test::randn_seeded;
using lathe::test::same_values;

namespace {

CompileOptions verified(const std::string& name = "fn") {
  CompileOptions o;
  o.name = name;
  o.verify = true;
  return o;
}

// Collects compile log lines for the life of the object.
class CapturedLogs {
 public:
  CapturedLogs() {
    previous_ = set_compile_log_sink([this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(m);
    });
  }
  ~CapturedLogs() { set_compile_log_sink(previous_); }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  CompileLogSink previous_;
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// A module whose forward depends on a plain C++ member: state no guard can see.
class Switchable : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return use_gelu ? gelu(x) : relu(x); }
  std::string type_name() const override { return "Switchable"; }
  bool use_gelu = false;
};

}  // namespace

// ---------------------------------------------------------------- item 4: verification mode

TEST(Verify, CatchesAFrozenHostCapture) {
  // A double captured by reference is read once, while tracing: the graph holds 2.0 for ever.
  double scale = 2.0;
  auto f = compile([&scale](const std::vector<Tensor>& in) { return mul(in[0], scale); },
                   verified("scaled"));
  Tensor x = randn_seeded({4}, 1);
  EXPECT_TRUE(same_values(f({x})[0], mul(x, 2.0)));
  scale = 3.0;
  try {
    f({x});
    FAIL() << "verification should have caught the frozen capture";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "[compile.verify] 'scaled' call 2 of cache entry #1: output 0 "
                         "differs from eager"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "scalar Arg")) << e.what();
  }
}

TEST(Verify, TheScalarArgAlternativeIsGuardedByValue) {
  auto f = compile(
      [](const std::vector<Arg>& in) {
        return mul(std::get<Tensor>(in[0]), std::get<double>(in[1]));
      },
      verified());
  Tensor x = randn_seeded({4}, 1);
  EXPECT_TRUE(same_values(f(std::vector<Arg>{x, 2.0})[0], mul(x, 2.0)));
  EXPECT_TRUE(same_values(f(std::vector<Arg>{x, 3.0})[0], mul(x, 3.0)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.stats().verified_calls, 2);
}

TEST(Verify, CatchesATensorVariableReboundAfterTracing) {
  // The class of item 1 that no guard can see: the lambda holds the tensor object it captured.
  Tensor bias = randn_seeded({3}, 1);
  auto f = compile([&bias](const std::vector<Tensor>& in) { return add(in[0], bias); }, verified());
  Tensor x = randn_seeded({3}, 2);
  f({x});
  bias = randn_seeded({3}, 3);
  EXPECT_THROW(f({x}), Error);
}

TEST(Verify, CatchesModuleStateThatIsNotAParameterBufferChildOrFlag) {
  // The class of item 2 that no guard can see: a plain member read by forward.
  auto m = nn::make<Switchable>();
  auto f = compile([m](const std::vector<Tensor>& in) { return m->forward(in[0]); }, verified());
  Tensor x = randn_seeded({8}, 1);
  f({x});
  m->use_gelu = true;
  try {
    f({x});
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "output 0 differs from eager")) << e.what();
  }
}

TEST(Verify, CatchesRandomValuesFrozenByTracing) {
  // The class of item 3 that stays: a random factory runs once, while tracing, so even the
  // first call differs from an eager run that draws new numbers.
  auto f =
      compile([](const std::vector<Tensor>& in) { return add(in[0], randn({3})); }, verified());
  EXPECT_THROW(f({zeros({3})}), Error);
}

TEST(Verify, CatchesAWrittenTensorThatDiffers) {
  // The output matches but the function's write into its argument depends on a frozen capture.
  double step = 1.0;
  auto f = compile(
      [&step](const std::vector<Tensor>& in) {
        Tensor acc = in[0];
        add_(acc, full({}, step));
        return mul(in[1], 2.0);
      },
      verified("stepper"));
  Tensor acc = zeros({2}), y = randn_seeded({2}, 1);
  f({acc, y});
  step = 5.0;
  try {
    f({acc, y});
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "argument 0 (written in place by the call) differs from eager"))
        << e.what();
  }
  // The state is eager's, updated once per call: 1 + 5.
  EXPECT_TRUE(same_values(acc, full({2}, 6.0)));
}

TEST(Verify, UpdatesStateOnceAndKeepsRandomStreams) {
  // Batch norm in training writes its running statistics; dropout draws random numbers. Both
  // run twice under verification and must neither differ nor be applied twice.
  manual_seed(5);
  auto make_net = [] {
    auto seq = nn::make<nn::Sequential>();
    seq->push_back(nn::make<nn::BatchNorm2d>(3));
    seq->push_back(nn::make<nn::Dropout>(0.3));
    seq->train();
    return seq;
  };
  auto net = make_net(), reference = make_net();
  auto f = compile(std::static_pointer_cast<nn::Module>(net), verified());
  for (uint64_t i = 0; i < 3; ++i) {
    Tensor x = randn_seeded({2, 3, 4, 4}, 10 + i);
    manual_seed(100 + i);
    Tensor got = f({x})[0];
    manual_seed(100 + i);
    EXPECT_TRUE(same_values(got, reference->forward(x), 1e-6));
  }
  auto bn = net->child("0"), bn_ref = reference->child("0");
  EXPECT_TRUE(same_values(bn->buffer("running_mean"), bn_ref->buffer("running_mean"), 1e-6));
  EXPECT_TRUE(same_values(bn->buffer("num_batches_tracked"), full({}, 3.0, DType::i64)));
  EXPECT_EQ(f.stats().verified_calls, 3);
}

TEST(Verify, StopsAfterTheFirstCallsOfEachEntry) {
  CompileOptions o = verified();
  o.verify_calls = 2;
  auto f = compile([](const std::vector<Tensor>& in) { return relu(in[0]); }, o);
  for (int i = 0; i < 5; ++i) f({randn_seeded({3}, i)});
  EXPECT_EQ(f.stats().verified_calls, 2);
  f({randn_seeded({5, 2}, 1)});  // a new entry is verified again
  EXPECT_EQ(f.stats().verified_calls, 3);
}

TEST(Verify, TheEnvironmentSwitchesItOn) {
  // The process default reads LATHE_COMPILE_VERIFY once; re-read it as a fresh process would.
  const CompileOptions saved = default_compile_options();
  {
    lathe::testing::ScopedEnv env("LATHE_COMPILE_VERIFY", "3");
    set_default_compile_options(compile_options_from_env());
  }
  auto f = compile([](const std::vector<Tensor>& in) { return relu(in[0]); });
  set_default_compile_options(saved);
  for (int i = 0; i < 5; ++i) f({randn_seeded({3}, i)});
  EXPECT_EQ(f.stats().verified_calls, 3);
  auto g = compile([](const std::vector<Tensor>& in) { return relu(in[0]); });
  g({randn_seeded({3}, 1)});
  EXPECT_EQ(g.stats().verified_calls, 0);
}

// ---------------------------------------------------------------- item 10: stats, reset, logs

TEST(CompileStats, CountsFailedTraces) {
  auto f = compile([](const std::vector<Tensor>& in) {
    if (in[0].size(0) == 3) throw Error("[user] three is not allowed");
    return relu(in[0]);
  });
  EXPECT_THROW(f({randn_seeded({3}, 1)}), Error);
  f({randn_seeded({2}, 1)});
  EXPECT_EQ(f.stats().failed_traces, 1);
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(CompileReset, DropsEntriesAndTracesAgain) {
  int traces = 0;
  auto f = compile([&traces](const std::vector<Tensor>& in) {
    ++traces;
    return relu(in[0]);
  });
  Tensor x = randn_seeded({3}, 1);
  f({x});
  f({x});
  EXPECT_EQ(f.num_entries(), 1u);
  f.reset();
  EXPECT_EQ(f.num_entries(), 0u);
  EXPECT_EQ(f.check_guards({x}), -1);
  EXPECT_TRUE(same_values(f({x})[0], relu(x)));
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(f.stats().compiles, 2);
}

TEST(CompileLogSink, CapturesRecompilesAndTheLimitWarning) {
  CapturedLogs logs;
  set_compile_logs("recompiles");
  CompileOptions o;
  o.name = "sized";
  o.dynamic = DynamicPolicy::kStatic;
  o.recompile_limit = 1;
  auto f = compile([](const std::vector<Tensor>& in) { return relu(in[0]); }, o);
  f({randn_seeded({2}, 1)});
  f({randn_seeded({3}, 1)});  // past the limit: eager, one warning
  f({randn_seeded({4}, 1)});
  set_compile_logs("");
  std::vector<std::string> lines = logs.lines();
  int warnings = 0;
  for (const std::string& l : lines) {
    EXPECT_NE(l.back(), '\n');
    if (contains(l, "[lathe] warning: [compile] 'sized' reached its recompile limit")) ++warnings;
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(f.stats().eager_calls, 2);
}

TEST(CompileLogSink, CapturesRecompileExplanations) {
  CapturedLogs logs;
  set_compile_logs("recompiles");
  CompileOptions o;
  o.name = "twice";
  o.dynamic = DynamicPolicy::kStatic;
  auto f = compile([](const std::vector<Tensor>& in) { return relu(in[0]); }, o);
  f({randn_seeded({2}, 1)});
  f({randn_seeded({3}, 1)});
  set_compile_logs("");
  std::vector<std::string> lines = logs.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(contains(lines[0],
                       "[lathe.recompiles] recompiling 'twice' (entry 2 of at most 8): "
                       "guard failed: arg0.size(0) == 2"))
      << lines[0];
}

// ---------------------------------------------------------------- item 1: param() re-assignment

TEST(StaleParameters, ReassignedThroughParamIsSeen) {
  manual_seed(3);
  auto lin = nn::make<nn::Linear>(4, 2);
  auto f = compile(std::static_pointer_cast<nn::Module>(lin), verified());
  Tensor x = randn_seeded({3, 4}, 1);
  EXPECT_TRUE(same_values(f({x})[0], lin->forward(x)));
  lin->param("weight") = randn_seeded({2, 4}, 7);
  EXPECT_TRUE(same_values(f({x})[0], lin->forward(x)));
  // Same type: the new tensor is passed in its place, no recompile.
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(StaleParameters, OptimizerStepThroughTheReferenceIsSeen) {
  manual_seed(3);
  auto lin = nn::make<nn::Linear>(4, 2);
  auto f =
      compile([lin](const std::vector<Tensor>& in) { return lin->forward(in[0]); }, verified());
  Tensor x = randn_seeded({3, 4}, 1);
  Tensor g = randn_seeded({2, 4}, 2);
  for (int step = 0; step < 4; ++step) {
    EXPECT_TRUE(same_values(f({x})[0], lin->forward(x))) << "step " << step;
    Tensor& w = lin->param("weight");
    w = sub(w, mul(g, 0.1));  // w = w - lr * g: a new tensor object in the module
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(StaleParameters, ReassignedWithAnotherShapeRecompiles) {
  manual_seed(3);
  auto lin = nn::make<nn::Linear>(4, 2);
  auto f = compile(std::static_pointer_cast<nn::Module>(lin));
  Tensor x = randn_seeded({3, 4}, 1);
  f({x});
  lin->param("weight") = randn_seeded({5, 4}, 7);
  lin->param("bias") = randn_seeded({5}, 8);
  Tensor y = f({x})[0];
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(same_values(y, lin->forward(x)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "guard failed: module.weight is the tensor"))
      << f.last_recompile_reason();
}

TEST(StaleParameters, BufferReassignedThroughBufferIsSeen) {
  manual_seed(4);
  auto bn = nn::make<nn::BatchNorm2d>(3);
  bn->eval();
  auto f = compile([bn](const std::vector<Tensor>& in) { return bn->forward(in[0]); }, verified());
  Tensor x = randn_seeded({2, 3, 4, 4}, 1);
  EXPECT_TRUE(same_values(f({x})[0], bn->forward(x), 1e-6));
  bn->buffer("running_mean") = randn_seeded({3}, 9);
  bn->buffer("running_var") = full({3}, 4.0);
  EXPECT_TRUE(same_values(f({x})[0], bn->forward(x), 1e-6));
}

TEST(StaleParameters, TiedWeightsReassignedOnOneSideRecompile) {
  // One tensor held by two modules is one graph input: re-assigning one side cannot reuse it.
  manual_seed(5);
  auto a = nn::make<nn::Linear>(4, 4, false), b = nn::make<nn::Linear>(4, 4, false);
  b->set_parameter("weight", a->param("weight"));
  auto f = compile([a, b](const std::vector<Tensor>& in) { return b->forward(a->forward(in[0])); },
                   verified());
  Tensor x = randn_seeded({2, 4}, 1);
  f({x});
  b->param("weight") = randn_seeded({4, 4}, 3);
  EXPECT_TRUE(same_values(f({x})[0], b->forward(a->forward(x))));
  EXPECT_EQ(f.stats().compiles, 2);
}

// ---------------------------------------------------------------- item 2: modules in lambdas

TEST(StaleModules, ChildSwappedInALambdaIsSeen) {
  auto seq = nn::make<nn::Sequential>();
  seq->push_back(nn::make<nn::Linear>(4, 4));
  seq->push_back(nn::make<nn::ReLU>());
  auto f =
      compile([seq](const std::vector<Tensor>& in) { return seq->forward(in[0]); }, verified());
  Tensor x = randn_seeded({3, 4}, 1);
  EXPECT_TRUE(same_values(f({x})[0], seq->forward(x)));
  seq->set_child("1", nn::make<nn::GELU>());
  // The cpu backend runs linear + gelu as one oneDNN primitive with a gelu post-op, which
  // rounds slightly differently; relu in place of gelu would differ by far more.
  EXPECT_TRUE(same_values(f({x})[0], seq->forward(x), 1e-5));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "Sequential")) << f.last_recompile_reason();
}

TEST(StaleModules, TrainEvalInALambdaIsSeen) {
  auto drop = nn::make<nn::Dropout>(0.5);
  drop->eval();
  auto f = compile([drop](const std::vector<Tensor>& in) { return drop->forward(in[0]); });
  Tensor x = randn_seeded({64}, 1);
  EXPECT_TRUE(same_values(f({x})[0], x));
  drop->train();
  Tensor y = f({x})[0];
  EXPECT_FALSE(same_values(y, x));  // some elements dropped, the rest scaled
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "is_training() == false"))
      << f.last_recompile_reason();
  drop->eval();
  EXPECT_TRUE(same_values(f({x})[0], x));
  EXPECT_EQ(f.stats().compiles, 2);
}

TEST(StaleModules, ChildReachedThroughChildIsSeen) {
  auto outer = nn::make<nn::Sequential>();
  outer->append("act", nn::make<nn::ReLU>());
  auto f = compile(
      [outer](const std::vector<Tensor>& in) { return outer->child("act")->forward(in[0]); },
      verified());
  Tensor x = randn_seeded({6}, 1);
  f({x});
  outer->set_child("act", nn::make<nn::Tanh>());
  EXPECT_TRUE(same_values(f({x})[0], tanh(x)));
}

TEST(StaleModules, ModulesOfANestedModuleTreeAreGuarded) {
  // The lambda reaches a module tree (BatchNorm inside a Sequential); eval() on the root changes
  // the flag of every module.
  auto seq = nn::make<nn::Sequential>();
  seq->push_back(nn::make<nn::BatchNorm2d>(2));
  seq->train();
  auto f =
      compile([seq](const std::vector<Tensor>& in) { return seq->forward(in[0]); }, verified());
  Tensor x = randn_seeded({2, 2, 3, 3}, 1);
  f({x});
  seq->eval();
  EXPECT_TRUE(same_values(f({x})[0], seq->forward(x), 1e-6));
}

// ---------------------------------------------------------------- item 3: made inside, returned

TEST(FreshOutputs, AReturnedFactoryTensorIsNewEveryCall) {
  auto f = compile(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{relu(in[0]), zeros({3})};
      },
      verified());
  Tensor x = randn_seeded({3}, 1);
  std::vector<Tensor> a = f({x});
  a[1].fill_(5.0);  // the caller owns what it gets back
  std::vector<Tensor> b = f({x});
  EXPECT_TRUE(same_values(b[1], zeros({3})));
  EXPECT_FALSE(a[1].impl().storage == b[1].impl().storage);
}

TEST(FreshOutputs, AViewOfAFactoryTensorIsNewEveryCall) {
  auto f = compile(
      [](const std::vector<Tensor>& in) {
        Tensor table = full({2, 3}, 1.0);
        return std::vector<Tensor>{add(in[0], table), table.t()};
      },
      verified());
  Tensor x = randn_seeded({2, 3}, 1);
  std::vector<Tensor> a = f({x});
  a[1].fill_(-1.0);
  std::vector<Tensor> b = f({x});
  EXPECT_TRUE(same_values(b[0], add(x, 1.0)));
  EXPECT_TRUE(same_values(b[1], full({3, 2}, 1.0)));
}

TEST(FreshOutputs, AFactoryTensorWrittenInPlaceStartsFreshEveryCall) {
  auto f = compile(
      [](const std::vector<Tensor>& in) {
        Tensor acc = zeros({3});
        add_(acc, in[0]);
        return acc;
      },
      verified());
  Tensor x1 = randn_seeded({3}, 1), x2 = randn_seeded({3}, 2);
  EXPECT_TRUE(same_values(f({x1})[0], x1));
  EXPECT_TRUE(same_values(f({x2})[0], x2));
}

TEST(FreshOutputs, OutputsOfTwoCallsNeverShareMemory) {
  auto f = compile([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].view({-1}), mul(in[0], 2.0), ones({2}).unsqueeze(0)};
  });
  Tensor x = randn_seeded({2, 2}, 1);
  std::vector<Tensor> a = f({x}), b = f({x});
  EXPECT_TRUE(a[0].impl().storage == x.impl().storage);  // a view of the argument, as eager
  for (size_t i = 1; i < a.size(); ++i)
    EXPECT_FALSE(a[i].impl().storage == b[i].impl().storage) << "output " << i;
}

// ---------------------------------------------------------------- item 9: messages

// A dynamic trace that fails is traced again with static sizes (item 5's fallback). When the
// static trace fails too the error is the program's, and it is thrown with concrete sizes; the
// dynamic attempt's error, with the traced values of its symbols and the way out, goes to the
// recompiles log.
TEST(TraceErrors, PrintTracedSizesAndSayWhatToChange) {
  CompileOptions o;
  o.name = "rows_of_8";
  o.dynamic = DynamicPolicy::kDynamic;
  auto f = compile([](const std::vector<Tensor>& in) { return in[0].reshape({-1, 8}); }, o);
  std::vector<std::string> logs;
  set_compile_logs("recompiles");
  CompileLogSink prev = set_compile_log_sink([&](const std::string& m) { logs.push_back(m); });
  try {
    f({randn_seeded({20}, 1)});
    ADD_FAILURE() << "20 elements are not rows of 8";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(contains(m, "[reshape] shape [-1,8] is invalid for input f32[20] of 20 elements"))
        << m;
    EXPECT_FALSE(contains(m, "f32[s0]")) << m;
  }
  set_compile_log_sink(prev);
  set_compile_logs("");
  std::string log;
  for (const std::string& l : logs) log += l + "\n";
  EXPECT_TRUE(contains(log, "[reshape] shape [-1,8] is invalid for input f32[s0=20]")) << log;
  EXPECT_FALSE(contains(log, "f32[s0]")) << log;
  EXPECT_TRUE(contains(log, "While tracing 'rows_of_8' with symbolic sizes (s0 = arg0.size(0))"))
      << log;
  EXPECT_TRUE(contains(log, "lathe::mark_static(tensor, dim)")) << log;
  EXPECT_TRUE(contains(log, "DynamicPolicy::kStatic")) << log;
  EXPECT_EQ(f.stats().failed_traces, 1);
}

TEST(TraceErrors, SymbolsInsideExpressionsAreListed) {
  std::vector<detail::TracedSize> sizes = {{"s0", 20, "arg0.size(0)"}, {"s1", 3, "arg0.size(1)"}};
  EXPECT_EQ(
      detail::with_traced_sizes("f32[s0,s1] has 2*s0 rows; s12 and cos0 are not symbols", sizes),
      "f32[s0=20,s1=3] has 2*s0 rows; s12 and cos0 are not symbols (s0=20)");
}

TEST(TraceErrors, StaticTracesAreUnchanged) {
  auto f = compile([](const std::vector<Tensor>& in) { return in[0].reshape({-1, 8}); });
  try {
    f({randn_seeded({20}, 1)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "[reshape] shape [-1,8] is invalid for input f32[20]"))
        << e.what();
    EXPECT_FALSE(contains(e.what(), "mark_static")) << e.what();
  }
}
