// Recompile exactly when expected and never otherwise: one test per scenario of the issue, each
// asserting the compile count and, for recompiles, the explanation (the failing guard's printed
// form, expected vs actual).
#include <gtest/gtest.h>

#include "lathe/core/grad_mode.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/sym/sym_error.h"
#include "lathe/trace/compile.h"
#include "test_util.h"

using namespace lathe;
using lathe::test::contains;
using lathe::test::randn_seeded;
using lathe::test::same_values;

namespace {

// relu(x) * 2 + 1, flattened to [batch, -1]: view, elementwise and a symbolic reshape.
std::vector<Tensor> simple_fn(const std::vector<Tensor>& in) {
  Tensor y = add(mul(relu(in[0]), 2.0), 1.0);
  return {y.reshape({y.size(0), -1})};
}

Tensor simple_eager(const Tensor& x) { return simple_fn({x})[0]; }

CompileOptions with_policy(DynamicPolicy p) {
  CompileOptions o;
  o.dynamic = p;
  return o;
}

}  // namespace

TEST(Recompile, SameShapesHit) {
  auto f = compile(simple_fn);
  for (uint64_t seed = 0; seed < 4; ++seed) {
    Tensor x = randn_seeded({2, 3, 4}, seed);
    auto out = f({x});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(same_values(out[0], simple_eager(x)));
  }
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().hits, 3);
  EXPECT_EQ(f.last_recompile_reason(), "");
}

TEST(Recompile, NewBatchSizeUnderStaticRecompiles) {
  auto f = compile(simple_fn, with_policy(DynamicPolicy::kStatic));
  f({randn_seeded({2, 3}, 1)});
  Tensor x3 = randn_seeded({3, 3}, 2);
  EXPECT_TRUE(same_values(f({x3})[0], simple_eager(x3)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "guard failed: arg0.size(0) == 2"))
      << f.last_recompile_reason();
  EXPECT_TRUE(contains(f.last_recompile_reason(), "actual: arg0.size(0) = 3"))
      << f.last_recompile_reason();
  // Static never generalizes: every new size is another entry.
  f({randn_seeded({4, 3}, 3)});
  EXPECT_EQ(f.stats().compiles, 3);
  // Old sizes still hit their entries.
  f({randn_seeded({2, 3}, 4)});
  EXPECT_EQ(f.stats().compiles, 3);
}

TEST(Recompile, NewBatchSizeUnderAutoRecompilesOnceThenHits) {
  auto f = compile(simple_fn);  // auto is the default
  f({randn_seeded({2, 3, 5}, 1)});
  EXPECT_EQ(f.stats().compiles, 1);
  f({randn_seeded({3, 3, 5}, 2)});
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "arg0.size(0) == 2"))
      << f.last_recompile_reason();
  // The second entry has a symbolic batch: every later size hits it.
  EXPECT_TRUE(contains(f.graph_string(0), "s0")) << f.graph_string(0);
  EXPECT_TRUE(contains(f.guards_string(0), "2 <= arg0.size(0)")) << f.guards_string(0);
  for (int64_t b : {4, 7, 16, 5, 3}) {
    Tensor x = randn_seeded({b, 3, 5}, 10 + b);
    auto out = f({x});
    EXPECT_TRUE(same_values(out[0], simple_eager(x))) << "batch " << b;
    EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{b, 15}));
  }
  EXPECT_EQ(f.stats().compiles, 2);
  // A different inner size is a change in another dim: one more recompile.
  f({randn_seeded({4, 3, 6}, 5)});
  EXPECT_EQ(f.stats().compiles, 3);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "arg0.size(2) == 5"))
      << f.last_recompile_reason();
}

TEST(Recompile, DynamicPolicyCompilesOnceForAllSizes) {
  auto f = compile(simple_fn, with_policy(DynamicPolicy::kDynamic));
  for (int64_t b : {2, 5, 9}) {
    Tensor x = randn_seeded({b, 4}, b);
    EXPECT_TRUE(same_values(f({x})[0], simple_eager(x)));
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(Recompile, DtypeChange) {
  auto f = compile(simple_fn);
  f({randn_seeded({2, 3}, 1)});
  Tensor x = randn_seeded({2, 3}, 2).to(DType::f64);
  auto out = f({x});
  EXPECT_EQ(out[0].dtype(), DType::f64);
  EXPECT_TRUE(same_values(out[0], simple_eager(x)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "guard failed: arg0.dtype == f32; actual: f64"))
      << f.last_recompile_reason();
}

TEST(Recompile, NonContiguousInput) {
  auto f = compile(simple_fn);
  f({randn_seeded({4, 6}, 1)});
  Tensor x = randn_seeded({6, 4}, 2).t();  // [4, 6], strides [1, 4]
  EXPECT_TRUE(same_values(f({x})[0], simple_eager(x)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(
      contains(f.last_recompile_reason(), "guard failed: arg0 is contiguous; actual: dense"))
      << f.last_recompile_reason();
  // The same strides hit the new entry.
  f({randn_seeded({6, 4}, 3).t()});
  EXPECT_EQ(f.stats().compiles, 2);
}

TEST(Recompile, ScalarArgumentChange) {
  auto f = compile([](const std::vector<Arg>& a) {
    const Tensor& x = std::get<Tensor>(a[0]);
    const int64_t* i = std::get_if<int64_t>(&a[1]);
    return mul(x, i ? static_cast<double>(*i) : std::get<double>(a[1]));
  });
  Tensor x = randn_seeded({3}, 1);
  EXPECT_TRUE(same_values(f({x, int64_t{2}})[0], mul(x, 2.0)));
  EXPECT_TRUE(same_values(f({x, int64_t{2}})[0], mul(x, 2.0)));
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_TRUE(same_values(f({x, int64_t{3}})[0], mul(x, 3.0)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "guard failed: arg1 == 2"))
      << f.last_recompile_reason();
  EXPECT_TRUE(contains(f.last_recompile_reason(), "actual: arg1 = 3")) << f.last_recompile_reason();
  // A double where an int was traced is a different kind of argument.
  f({x, 2.5});
  EXPECT_EQ(f.stats().compiles, 3);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "arg1 is int; actual: double"))
      << f.last_recompile_reason();
}

TEST(Recompile, RequiresGradChange) {
  auto f = compile(simple_fn);
  Tensor x = randn_seeded({2, 3}, 1);
  f({x});
  Tensor y = randn_seeded({2, 3}, 2);
  y.set_requires_grad(true);
  f({y});
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(),
                       "guard failed: arg0.requires_grad == false; actual: true"))
      << f.last_recompile_reason();
}

TEST(Recompile, GradModeChange) {
  auto f = compile(simple_fn);
  Tensor x = randn_seeded({2, 3}, 1);
  f({x});
  {
    NoGradGuard no_grad;
    f({x});
    f({x});
  }
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(),
                       "guard failed: GradMode::is_enabled() == true; actual: false"))
      << f.last_recompile_reason();
  f({x});  // back to grad mode: the first entry hits again
  EXPECT_EQ(f.stats().compiles, 2);
}

TEST(Recompile, ParameterReassignedRecompilesButInPlaceUpdateHits) {
  manual_seed(3);
  auto lin = nn::make<nn::Linear>(4, 2);
  auto f = compile(std::static_pointer_cast<nn::Module>(lin));
  Tensor x = randn_seeded({3, 4}, 1);
  EXPECT_TRUE(same_values(f({x})[0], lin->forward(x)));
  // In place: same tensor object, new values; the entry is reused and sees them.
  Tensor& w = lin->param("weight");
  Tensor before = f({x})[0];
  mul_(w, 2.0);
  Tensor after = f({x})[0];
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_TRUE(same_values(after, lin->forward(x)));
  EXPECT_FALSE(same_values(after, before));
  // Re-assigned: a new tensor object; the structure version changes and forces a recompile.
  lin->set_parameter("weight", randn_seeded({2, 4}, 9));
  EXPECT_TRUE(same_values(f({x})[0], lin->forward(x)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "guard failed: module.structure_version() == "))
      << f.last_recompile_reason();
  EXPECT_TRUE(contains(f.last_recompile_reason(), "a parameter, buffer or submodule was added"))
      << f.last_recompile_reason();
}

// An inference call (eval, grad off) on the default backend freezes the weights into the
// compiled graph: an in-place update fails the entry's storage-version guard, the stale entry is
// dropped and the next call re-freezes with the new values. With freeze off the entry is reused
// and reads the weights at every call, as on the interpreter.
TEST(Recompile, InPlaceUpdateOfAFrozenParameterRefreezesUnlessFreezeIsOff) {
  for (bool freeze : {true, false}) {
    SCOPED_TRACE(freeze ? "freeze" : "no freeze");
    manual_seed(3);
    auto lin = nn::make<nn::Linear>(4, 2);
    lin->eval();
    NoGradGuard no_grad;
    CompileOptions options;
    options.freeze = freeze;
    auto f = compile(std::static_pointer_cast<nn::Module>(lin), options);
    Tensor x = randn_seeded({3, 4}, 1);
    Tensor before = f({x})[0];
    EXPECT_TRUE(same_values(before, lin->forward(x), 1e-6));
    EXPECT_EQ(contains(f.guards_string(), "frozen"), freeze) << f.guards_string();
    for (int step = 0; step < 3; ++step) {
      mul_(lin->param("weight"), 2.0);
      add_(lin->param("bias"), full({}, 0.5));
      Tensor after = f({x})[0];
      EXPECT_TRUE(same_values(after, lin->forward(x), 1e-6)) << "update " << step;
      EXPECT_FALSE(same_values(after, before)) << "update " << step;
      before = after;
    }
    EXPECT_EQ(f.stats().compiles, freeze ? 4 : 1);
    EXPECT_EQ(f.num_entries(), 1u);  // a stale frozen entry is dropped, not kept
    EXPECT_EQ(f.stats().eager_calls, 0);
  }
}

TEST(Recompile, SubmoduleReplaced) {
  manual_seed(4);
  auto seq = nn::make<nn::Sequential>(
      std::vector<nn::ModulePtr>{nn::make<nn::Linear>(4, 4), nn::make<nn::ReLU>()});
  auto f = compile(std::static_pointer_cast<nn::Module>(seq));
  Tensor x = randn_seeded({2, 4}, 1);
  f({x});
  f({x});
  EXPECT_EQ(f.stats().compiles, 1);
  seq->set_child("1", nn::make<nn::Tanh>());
  EXPECT_TRUE(same_values(f({x})[0], seq->forward(x)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "module.structure_version()"))
      << f.last_recompile_reason();
  // Replacing a deeper parameter names the module that owns it.
  seq->child("0")->set_parameter("bias", randn_seeded({4}, 2));
  f({x});
  EXPECT_EQ(f.stats().compiles, 3);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "module '0'.structure_version()"))
      << f.last_recompile_reason();
}

TEST(Recompile, TrainEvalSwitch) {
  manual_seed(5);
  auto drop = nn::make<nn::Sequential>(
      std::vector<nn::ModulePtr>{nn::make<nn::Linear>(4, 4), nn::make<nn::Dropout>(0.5)});
  drop->eval();
  auto f = compile(std::static_pointer_cast<nn::Module>(drop));
  Tensor x = randn_seeded({2, 4}, 1);
  f({x});
  drop->train();
  f({x});
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "is_training() == false; actual: true"))
      << f.last_recompile_reason();
}

TEST(Recompile, MarkDynamicThenSpecializedIsAConstraintError) {
  Tensor c = randn_seeded({4, 3}, 7);  // a captured constant: broadcasting pins dim 0 to 4
  auto f = compile([c](const std::vector<Tensor>& in) { return add(in[0], c); });
  Tensor x = randn_seeded({4, 3}, 1);
  mark_dynamic(x, 0);
  try {
    f({x});
    FAIL() << "expected a constraint violation";
  } catch (const sym::ConstraintViolation& e) {
    EXPECT_TRUE(contains(e.what(), "arg0.size(0)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "specialized it to 4")) << e.what();
  }
  EXPECT_EQ(f.stats().compiles, 0);
  // Without the mark the same call compiles (statically).
  Tensor y = randn_seeded({4, 3}, 2);
  EXPECT_TRUE(same_values(f({y})[0], add(y, c)));
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(Recompile, MarkDynamicRangeIsGuarded) {
  auto f = compile(simple_fn, with_policy(DynamicPolicy::kStatic));
  Tensor x = randn_seeded({4, 3}, 1);
  mark_dynamic(x, 0, 2, 8);
  f({x});
  EXPECT_TRUE(contains(f.guards_string(0), "2 <= arg0.size(0) <= 8")) << f.guards_string(0);
  f({randn_seeded({6, 3}, 2)});  // inside the range: hit, even under the static policy
  EXPECT_EQ(f.stats().compiles, 1);
  f({randn_seeded({9, 3}, 3)});  // outside: recompile
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_TRUE(contains(f.last_recompile_reason(), "arg0.size(0) = 9")) << f.last_recompile_reason();
}

TEST(Recompile, MarkStaticKeepsADimStaticUnderDynamic) {
  auto f = compile(simple_fn, with_policy(DynamicPolicy::kDynamic));
  Tensor x = randn_seeded({4, 3}, 1);
  mark_static(x, 0);
  f({x});
  EXPECT_TRUE(contains(f.guards_string(0), "arg0.size(0) == 4")) << f.guards_string(0);
  f({randn_seeded({4, 5}, 2)});  // dim 1 is dynamic: hit
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(Recompile, LimitReachedFallsBackToEagerWithOneWarning) {
  CompileOptions o = with_policy(DynamicPolicy::kStatic);
  o.recompile_limit = 2;
  o.name = "limited";
  auto f = compile(simple_fn, o);
  f({randn_seeded({2, 3}, 1)});
  f({randn_seeded({3, 3}, 2)});
  ::testing::internal::CaptureStderr();
  Tensor x4 = randn_seeded({4, 3}, 3), x5 = randn_seeded({5, 3}, 4);
  Tensor y4 = f({x4})[0];
  Tensor y5 = f({x5})[0];
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(same_values(y4, simple_eager(x4)));
  EXPECT_TRUE(same_values(y5, simple_eager(x5)));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.stats().eager_calls, 2);
  // One warning for both eager calls, naming the failing guard.
  EXPECT_TRUE(contains(err, "'limited' reached its recompile limit (2 entries)")) << err;
  EXPECT_TRUE(contains(err, "arg0.size(0) == 3")) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << err;
  // Cached sizes still hit.
  f({randn_seeded({2, 3}, 5)});
  EXPECT_EQ(f.stats().eager_calls, 2);
}

TEST(Recompile, LimitReachedThrowsWithErrorOption) {
  CompileOptions o = with_policy(DynamicPolicy::kStatic);
  o.recompile_limit = 1;
  o.error_on_recompile_limit = true;
  auto f = compile(simple_fn, o);
  f({randn_seeded({2, 3}, 1)});
  try {
    f({randn_seeded({3, 3}, 2)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "reached its recompile limit")) << e.what();
    EXPECT_TRUE(contains(e.what(), "guard failed: arg0.size(0) == 2")) << e.what();
  }
  EXPECT_EQ(f.stats().eager_calls, 0);
}

TEST(Recompile, EntriesAreCheckedMostRecentlyUsedFirst) {
  auto f = compile(simple_fn, with_policy(DynamicPolicy::kStatic));
  Tensor a = randn_seeded({2, 3}, 1), b = randn_seeded({3, 3}, 2);
  f({a});
  f({b});
  EXPECT_TRUE(contains(f.guards_string(0), "arg0.size(0) == 3"));
  f({a});  // hits the older entry, which moves to the front
  EXPECT_TRUE(contains(f.guards_string(0), "arg0.size(0) == 2"));
  EXPECT_EQ(f.stats().compiles, 2);
  EXPECT_EQ(f.stats().hits, 1);
}

TEST(Recompile, LogsPrintReasonsGuardsAndGraph) {
  set_compile_logs("recompiles,guards,graph");
  auto f = compile(simple_fn, with_policy(DynamicPolicy::kStatic));
  ::testing::internal::CaptureStderr();
  f({randn_seeded({2, 3}, 1)});
  f({randn_seeded({3, 3}, 2)});
  std::string err = ::testing::internal::GetCapturedStderr();
  set_compile_logs("");
  EXPECT_TRUE(contains(err, "[lathe.recompiles] recompiling 'fn'")) << err;
  EXPECT_TRUE(contains(err, "guard failed: arg0.size(0) == 2")) << err;
  EXPECT_TRUE(contains(err, "[lathe.guards] guards of 'fn'")) << err;
  EXPECT_TRUE(contains(err, "arg0: Tensor f32 cpu dim 2 contiguous")) << err;
  EXPECT_TRUE(contains(err, "[lathe.graph] graph of 'fn'")) << err;
  EXPECT_TRUE(contains(err, "relu(")) << err;
  EXPECT_THROW(set_compile_logs("recompiles,bogus"), Error);
}
