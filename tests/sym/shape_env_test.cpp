// Scenario tests written as small traces: each creates the inputs' symbols as a tracer would,
// runs the shape logic of an op or two, and asserts the exact printed guard program.

#include "lathe/sym/shape_env.h"

#include <gtest/gtest.h>

#include <thread>

#include "lathe/sym/sym_error.h"
#include "tests/sym/sym_test_util.h"

namespace lathe::sym {
namespace {

using testing::error_of;

// A fake tensor's metadata, as the tracer would see it.
struct FakeTensor {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  explicit FakeTensor(std::vector<int64_t> s) : sizes(std::move(s)), strides(sizes.size(), 1) {}
  ArgView view() const {
    return ArgView::tensor(sizes.data(), strides.data(), static_cast<int64_t>(sizes.size()));
  }
};

// The symbolic sizes of input `arg` under one policy.
std::vector<SymInt> symbolic_sizes(ShapeEnv& env, int arg, const std::vector<int64_t>& sizes,
                                   DimPolicy policy = DimPolicy::kDuck) {
  std::vector<SymInt> out;
  for (size_t d = 0; d < sizes.size(); ++d)
    out.push_back(env.create_symbol(sizes[d], Source::size(arg, static_cast<int>(d)), policy));
  return out;
}

GuardCheck run(const GuardProgram& p, std::initializer_list<FakeTensor> tensors) {
  std::vector<ArgView> views;
  for (const FakeTensor& t : tensors) views.push_back(t.view());
  return p.check(views);
}

TEST(Scenario, DuckSizingOfTwoInputsWithEqualSizes) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {5, 3});
  auto y = symbolic_sizes(env, 1, {5});
  EXPECT_EQ(x[0].expr(), y[0].expr());  // one shared symbol
  EXPECT_TRUE(x[0] == y[0]);            // so this needs no guard
  EXPECT_TRUE(env.guards().empty());
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg0.size(0)  # dynamic dim (duck sized)\n"
            "s1 = arg0.size(1)  # dynamic dim (duck sized)\n"
            "arg1.size(0) == arg0.size(0)  # duck sizing: traced equal to arg0.size(0)\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n"
            "2 <= arg0.size(1)  # dynamic dim (0 and 1 are specialized)\n");
  EXPECT_TRUE(run(p, {FakeTensor({7, 3}), FakeTensor({7})}).ok());
  EXPECT_TRUE(run(p, {FakeTensor({9, 9}), FakeTensor({9})}).ok());
  GuardCheck r = run(p, {FakeTensor({7, 3}), FakeTensor({6})});
  EXPECT_EQ(r.failed, 2);
  FakeTensor a({7, 3}), b({6});
  std::vector<ArgView> v = {a.view(), b.view()};
  EXPECT_EQ(p.explain(v, r),
            "guard failed: arg1.size(0) == arg0.size(0)  # duck sizing: traced equal to "
            "arg0.size(0); actual: arg1.size(0) = 6, arg0.size(0) = 7");
}

TEST(Scenario, DuckSizingCanBeSwitchedOff) {
  ShapeEnvOptions o;
  o.duck_sizing = false;
  ShapeEnv env(o);
  auto x = symbolic_sizes(env, 0, {5});
  auto y = symbolic_sizes(env, 1, {5});
  EXPECT_NE(x[0].expr(), y[0].expr());
  EXPECT_EQ(env.produce_guards().to_string(),
            "s0 = arg0.size(0)  # dynamic dim\n"
            "s1 = arg1.size(0)  # dynamic dim\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n"
            "2 <= arg1.size(0)  # dynamic dim (0 and 1 are specialized)\n");
}

TEST(Scenario, ZeroOneSpecialization) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {1, 4, 0});
  EXPECT_EQ(x[0].maybe_int(), std::optional<int64_t>(1));
  EXPECT_EQ(x[2].maybe_int(), std::optional<int64_t>(0));
  EXPECT_TRUE(x[1].is_symbolic());
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg0.size(1)  # dynamic dim (duck sized)\n"
            "arg0.size(0) == 1  # size 0/1 specialization\n"
            "arg0.size(2) == 0  # size 0/1 specialization\n"
            "2 <= arg0.size(1)  # dynamic dim (0 and 1 are specialized)\n");
  EXPECT_TRUE(run(p, {FakeTensor({1, 9, 0})}).ok());
  EXPECT_EQ(run(p, {FakeTensor({2, 9, 0})}).failed, 1);
  EXPECT_EQ(run(p, {FakeTensor({1, 1, 0})}).failed, 3);
  EXPECT_EQ(run(p, {FakeTensor({1, 9})}).failed, 2);  // rank 2: size(2) is missing
}

TEST(Scenario, EqualityGuardBecomesAReplacementAndOneGuard) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {6}, DimPolicy::kDynamic);
  auto y = symbolic_sizes(env, 1, {3, 6}, DimPolicy::kDynamic);
  // [add] broadcasting x (6) against y's last dim (6).
  EXPECT_TRUE((x[0] == y[1]).guard("[add] broadcast dims match"));
  EXPECT_EQ(env.guards().size(), 1u);
  EXPECT_EQ((x[0] + y[1]).to_string(), "2*s0");  // later expressions use the representative
  EXPECT_TRUE(x[0] == y[1]);                     // now provable: no second guard
  EXPECT_EQ(env.guards().size(), 1u);
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg0.size(0)  # dynamic dim\n"
            "s1 = arg1.size(0)  # dynamic dim\n"
            "arg1.size(1) == arg0.size(0)  # [add] broadcast dims match\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n"
            "2 <= arg1.size(0)  # dynamic dim (0 and 1 are specialized)\n");
  EXPECT_TRUE(run(p, {FakeTensor({4}), FakeTensor({2, 4})}).ok());
  EXPECT_EQ(run(p, {FakeTensor({4}), FakeTensor({2, 5})}).failed, 2);
}

TEST(Scenario, EqualityWithAnExpressionReplacesTheLaterSymbol) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {6}, DimPolicy::kDynamic);
  auto y = symbolic_sizes(env, 1, {12}, DimPolicy::kDynamic);
  EXPECT_TRUE((y[0] == 2 * x[0]).guard("[cat] output is twice the input"));
  EXPECT_EQ(y[0].to_string(), "s1");
  EXPECT_EQ((y[0] + 0 * x[0]).to_string(), "2*s0");
  EXPECT_EQ(env.produce_guards().to_string(),
            "s0 = arg0.size(0)  # dynamic dim\n"
            "arg1.size(0) == 2*arg0.size(0)  # [cat] output is twice the input\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n"
            "2 <= arg1.size(0)  # dynamic dim (0 and 1 are specialized)\n");
}

TEST(Scenario, ReshapeMinusOneRecordsDivisibility) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {4, 6}, DimPolicy::kDynamic);
  // reshape(-1, 8): the inferred dim is numel / 8, which must divide exactly.
  SymInt numel = x[0] * x[1];
  EXPECT_TRUE((mod(numel, 8) == 0).guard("[reshape] 8 divides numel"));
  SymInt inferred = floordiv(numel, 8);
  EXPECT_EQ(inferred.to_string(), "FloorDiv(s0*s1, 8)");
  EXPECT_EQ((inferred * 8).to_string(), "s0*s1");  // the new shape's numel matches exactly
  EXPECT_TRUE(inferred * 8 == numel);              // provable, no guard
  EXPECT_EQ(mod(numel, 4).to_string(), "0");
  EXPECT_EQ(env.guards().size(), 1u);
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg0.size(0)  # dynamic dim\n"
            "s1 = arg0.size(1)  # dynamic dim\n"
            "arg0.size(0)*arg0.size(1) % 8 == 0  # [reshape] 8 divides numel\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n"
            "2 <= arg0.size(1)  # dynamic dim (0 and 1 are specialized)\n");
  EXPECT_TRUE(run(p, {FakeTensor({2, 4})}).ok());
  FakeTensor bad({3, 5});
  std::vector<ArgView> v = {bad.view()};
  GuardCheck r = p.check(v);
  EXPECT_EQ(r.failed, 2);
  EXPECT_EQ(p.explain(v, r),
            "guard failed: arg0.size(0)*arg0.size(1) % 8 == 0  # [reshape] 8 divides numel; "
            "actual: arg0.size(0) = 3, arg0.size(1) = 5");
}

TEST(Scenario, ReshapeOfOneDim) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {16});
  EXPECT_TRUE((mod(x[0], 8) == 0).guard("[reshape] 8 divides numel"));
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg0.size(0)  # dynamic dim (duck sized)\n"
            "arg0.size(0) % 8 == 0  # [reshape] 8 divides numel\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n");
  EXPECT_TRUE(run(p, {FakeTensor({24})}).ok());
  EXPECT_EQ(run(p, {FakeTensor({12})}).failed, 1);
}

TEST(Scenario, RangeGuardFromSizeGreaterThanFour) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {6});
  EXPECT_TRUE((x[0] > 4).guard("[pad] size(0) > 4"));
  EXPECT_TRUE(x[0] > 3);   // provable from the narrowed range [5, inf)
  EXPECT_FALSE(x[0] < 5);  // likewise
  EXPECT_EQ(env.guards().size(), 1u);
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg0.size(0)  # dynamic dim (duck sized)\n"
            "arg0.size(0) > 4  # [pad] size(0) > 4\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n");
  EXPECT_TRUE(run(p, {FakeTensor({5})}).ok());
  EXPECT_EQ(run(p, {FakeTensor({4})}).failed, 1);
}

TEST(Scenario, FalseBranchRecordsTheNegatedGuard) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {3});
  EXPECT_FALSE((x[0] > 4).guard("[pad] size(0) > 4"));
  EXPECT_EQ(env.produce_guards().to_string(),
            "s0 = arg0.size(0)  # dynamic dim (duck sized)\n"
            "arg0.size(0) <= 4  # [pad] size(0) > 4\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n");
}

TEST(Scenario, MarkDynamicDimThatGetsSpecialized) {
  ShapeEnv env;
  env.mark_dynamic(Source::size(0, 0), 2, 64);
  auto x = symbolic_sizes(env, 0, {8, 3});
  EXPECT_TRUE(x[0] <= 64);  // provable over the user's range: fine
  int line = __LINE__ + 1;
  std::string msg = error_of([&] { x[0].guard_int("[view] needs a static size"); });
  EXPECT_EQ(msg,
            "[ShapeEnv] constraint violation: arg0.size(0) was marked dynamic with range [2, 64], "
            "but tracing specialized it to 8 with the guard arg0.size(0) == 8  ([view] needs a "
            "static size, at shape_env_test.cpp:" +
                std::to_string(line) + ")");
  EXPECT_TRUE(env.guards().empty());
}

TEST(Scenario, MarkDynamicDimThatGetsNarrowed) {
  ShapeEnv env;
  env.mark_dynamic(Source::size(0, 0), 2, 64);
  auto x = symbolic_sizes(env, 0, {8});
  int line = __LINE__ + 1;
  std::string msg = error_of([&] { (x[0] > 4).guard("[pad] size(0) > 4"); });
  EXPECT_EQ(msg,
            "[ShapeEnv] constraint violation: arg0.size(0) was marked dynamic with range [2, 64], "
            "but tracing added the guard arg0.size(0) > 4  ([pad] size(0) > 4, at "
            "shape_env_test.cpp:" +
                std::to_string(line) + "), which does not hold for every value in that range");
}

TEST(Scenario, MarkDynamicRangeIsChecked) {
  ShapeEnv env;
  env.mark_dynamic(Source::size(0, 0), 2, 64);
  env.mark_dynamic(Source::size(1, 0), 4);
  auto x = symbolic_sizes(env, 0, {8});
  auto y = symbolic_sizes(env, 1, {8});
  EXPECT_NE(x[0].expr(), y[0].expr());  // constrained dims are never duck sized
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg0.size(0)  # marked dynamic\n"
            "s1 = arg1.size(0)  # marked dynamic\n"
            "2 <= arg0.size(0) <= 64  # mark_dynamic range [2, 64]\n"
            "4 <= arg1.size(0)  # mark_dynamic range [4, inf]\n");
  EXPECT_TRUE(run(p, {FakeTensor({64}), FakeTensor({4})}).ok());
  EXPECT_EQ(run(p, {FakeTensor({65}), FakeTensor({4})}).failed, 2);
  EXPECT_EQ(run(p, {FakeTensor({2}), FakeTensor({3})}).failed, 3);
}

TEST(Scenario, MarkDynamicErrors) {
  ShapeEnv env;
  env.mark_dynamic(Source::size(0, 0), 2, 64);
  EXPECT_EQ(error_of([&] { env.create_symbol(1, Source::size(0, 0)); }),
            "[ShapeEnv] constraint violation: arg0.size(0) was marked dynamic with range [2, 64], "
            "but its size 1 is specialized (sizes 0 and 1 are always specialized); trace with a "
            "size of at least 2 or do not mark it dynamic");
  EXPECT_EQ(error_of([&] { env.create_symbol(100, Source::size(0, 0)); }),
            "[ShapeEnv] constraint violation: arg0.size(0) was marked dynamic with range [2, 64], "
            "but the traced value 100 is outside it");
  EXPECT_EQ(error_of([&] { env.mark_dynamic(Source::size(0, 1), 8, 4); }),
            "[ShapeEnv] mark_dynamic(arg0.size(1)): min 8 is greater than max 4");
  env.create_symbol(5, Source::size(0, 2));
  EXPECT_EQ(error_of([&] { env.mark_dynamic(Source::size(0, 2)); }),
            "[ShapeEnv] mark_dynamic(arg0.size(2)) must come before create_symbol for that source");
  // The exception type says what kind of error it is.
  EXPECT_THROW(env.create_symbol(1, Source::size(0, 0)), ConstraintViolation);
}

TEST(Scenario, UnbackedSymbolGuardIsAnError) {
  ShapeEnv env;
  SymInt n = env.create_unbacked_symbol("nonzero() output size");
  EXPECT_EQ(n.to_string(), "u0");
  EXPECT_TRUE(n >= 0);  // provable from its range [0, inf)
  int line = __LINE__ + 1;
  std::string msg = error_of([&] { (n > 4).guard("[test] branch on the count"); });
  EXPECT_EQ(msg,
            "[ShapeEnv] cannot guard on the data-dependent condition u0 > 4 ([test] branch on the "
            "count, at shape_env_test.cpp:" +
                std::to_string(line) +
                "): u0 (from nonzero() output size) has no value at trace time. Avoid branching on "
                "it (e.g. compute with sym_min/sym_max), or state what is known with "
                "ShapeEnv::assume(condition) or ShapeEnv::constrain_range(symbol, min, max)");
  EXPECT_THROW((n > 4).guard("again"), DataDependentError);
  EXPECT_EQ(error_of([&] { n.hint(); }),
            "[ShapeEnv] u0 has no hint: u0 is data-dependent (from nonzero() output size)");
  EXPECT_EQ(error_of([&] { n.guard_int("[test] specialize"); }).substr(0, 60),
            "[ShapeEnv] cannot guard on the data-dependent condition u0 =");
  EXPECT_TRUE(env.guards().empty());
}

TEST(Scenario, UnbackedWaysOut) {
  ShapeEnv env;
  SymInt n = env.create_unbacked_symbol("nonzero() output size");
  env.assume(n >= 5, "[test] at least five");
  EXPECT_TRUE(n > 4);
  env.constrain_range(n, 0, 100);
  EXPECT_TRUE(n <= 100);
  EXPECT_EQ(env.range_of(n.expr()), (ValueRange{5, 100}));
  EXPECT_EQ(sym_max(n, 3).to_string(), "u0");
  SymInt s = env.create_symbol(7, Source::size(0, 0));
  env.assume(n == s, "[test] as many as rows");  // u0 -> s0: now it has a hint
  EXPECT_EQ((n + 1).to_string(), "s0 + 1");
  EXPECT_EQ((n + 1).hint(), 8);
  EXPECT_TRUE(env.guards().empty());
}

TEST(Scenario, AssumeOnBackedSizesIsAGuard) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {12});
  env.assume(x[0] > 10, "[test] caller promises a big batch");
  EXPECT_TRUE(x[0] > 5);  // decided from the narrowed range
  EXPECT_EQ(env.produce_guards().to_string(),
            "s0 = arg0.size(0)  # dynamic dim (duck sized)\n"
            "arg0.size(0) > 10  # [test] caller promises a big batch\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n");
}

TEST(Scenario, AssumeAndConstrainRangeErrors) {
  ShapeEnv env;
  SymInt n = env.create_unbacked_symbol("item()");
  SymInt s = env.create_symbol(7, Source::size(0, 0));
  EXPECT_EQ(error_of([&] { env.assume(SymBool(false), "[test] nope"); }),
            "[ShapeEnv] assume([test] nope): the condition is false");
  EXPECT_EQ(error_of([&] { env.assume(n < 0, "[test] negative"); }),
            "[ShapeEnv] assume([test] negative): the condition is false");  // folded at once
  SymBool small = n < 3;
  env.constrain_range(n, 5, 10);
  EXPECT_EQ(error_of([&] { env.assume(small, "[test] small"); }),
            "[ShapeEnv] assume([test] small): u0 < 3 is provably false");
  EXPECT_EQ(error_of([&] { env.assume(s > 9, "[test] big"); }),
            "[ShapeEnv] assume([test] big): s0 > 9 is false for the traced sizes");
  EXPECT_EQ(error_of([&] { env.constrain_range(s, 0, 4); }),
            "[ShapeEnv] constrain_range: s0 is not an unbacked symbol; guard on backed sizes with "
            "evaluate()");
  EXPECT_EQ(error_of([&] { env.constrain_range(n, -5, -1); }),
            "[ShapeEnv] constrain_range: [-5, -1] does not meet the range [5, 10] of u0");
}

TEST(Scenario, GuardLimitSpecializesTheSymbol) {
  ShapeEnvOptions o;
  o.max_guards_per_symbol = 3;
  ShapeEnv env(o);
  auto x = symbolic_sizes(env, 0, {6});
  EXPECT_TRUE((x[0] > 2).guard("[test] a"));
  EXPECT_TRUE((x[0] != 3).guard("[test] b"));
  EXPECT_TRUE((x[0] < 100).guard("[test] c"));
  EXPECT_EQ(x[0].to_string(), "s0");
  EXPECT_EQ((x[0] + 0).maybe_int(), std::optional<int64_t>(6));  // specialized
  EXPECT_EQ(env.produce_guards().to_string(),
            "arg0.size(0) == 6  # s0 reached 3 guards; specialized to 6\n");
}

TEST(Scenario, ScalarAndNamedSources) {
  ShapeEnv env;
  SymInt k = env.create_symbol(3, Source::scalar(2), DimPolicy::kStatic);
  SymInt n = env.create_symbol(-4, Source::scalar(3), DimPolicy::kDynamic);
  SymInt w = env.create_symbol(64, Source::size(4, 0, "layer1.0.conv1.weight"), DimPolicy::kStatic);
  auto x = symbolic_sizes(env, 0, {10});
  EXPECT_EQ(k.maybe_int(), std::optional<int64_t>(3));
  EXPECT_EQ(w.maybe_int(), std::optional<int64_t>(64));
  EXPECT_TRUE((x[0] + n > 5).guard("[narrow] start + offset in range"));
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg3  # dynamic scalar\n"
            "s1 = arg0.size(0)  # dynamic dim (duck sized)\n"
            "arg2 == 3  # static scalar\n"
            "layer1.0.conv1.weight.size(0) == 64  # static dim\n"
            "arg3 + arg0.size(0) > 5  # [narrow] start + offset in range\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n");
  std::vector<int64_t> xs = {10}, ws = {64, 3, 3, 3}, ones = {1, 1, 1, 1};
  std::vector<ArgView> in = {ArgView::tensor(xs.data(), ones.data(), 1), ArgView{},
                             ArgView::integer(3), ArgView::integer(-4),
                             ArgView::tensor(ws.data(), ones.data(), 4)};
  EXPECT_TRUE(p.check(in).ok());
  in[2] = ArgView::integer(4);
  EXPECT_EQ(p.check(in).failed, 2);
  in[2] = ArgView::integer(3);
  in[3] = ArgView::integer(-5);
  EXPECT_EQ(p.check(in).failed, 4);
  in[3] = ArgView::tensor(xs.data(), ones.data(), 1);  // a tensor where a scalar was traced
  EXPECT_EQ(p.check(in).failed, 0);
  EXPECT_EQ(p.explain(in, p.check(in)),
            "guard failed: s0 = arg3  # dynamic scalar; actual: arg3 is missing");
}

TEST(Scenario, ProduceGuardsOverChosenSources) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {6, 6});
  std::vector<Source> only_x1 = {Source::size(0, 1)};
  EXPECT_EQ(env.produce_guards(only_x1).to_string(),
            "s0 = arg0.size(1)  # duck sizing: traced equal to arg0.size(0)\n"
            "2 <= arg0.size(1)  # dynamic dim (0 and 1 are specialized)\n");
  std::vector<Source> unknown = {Source::size(5, 0)};
  EXPECT_EQ(error_of([&] { env.produce_guards(unknown); }),
            "[ShapeEnv] produce_guards: arg5.size(0) has no symbol in this ShapeEnv (create_symbol "
            "was never called for it)");
}

TEST(Scenario, ProduceGuardsNeedsABindingSourceForEverySymbol) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {6}, DimPolicy::kDynamic);
  auto y = symbolic_sizes(env, 1, {7}, DimPolicy::kDynamic);
  EXPECT_TRUE((x[0] < y[0]).guard("[test] ordered"));
  std::vector<Source> only_x = {Source::size(0, 0)};
  EXPECT_EQ(error_of([&] { env.produce_guards(only_x); }),
            "[ShapeEnv] produce_guards: s1 is not bound by any of the given sources");
}

TEST(Scenario, CreateSymbolErrors) {
  ShapeEnv env;
  env.create_symbol(5, Source::size(0, 0));
  EXPECT_EQ(error_of([&] { env.create_symbol(5, Source::size(0, 0)); }),
            "[ShapeEnv] create_symbol: arg0.size(0) already has a symbol");
  EXPECT_EQ(error_of([&] { env.create_symbol(-2, Source::stride(0, 0)); }),
            "[ShapeEnv] create_symbol: arg0.stride(0) has the negative size -2");
}

TEST(Scenario, ConditionsFromAnotherEnvAreRejected) {
  ShapeEnv a, b;
  SymInt x = a.create_symbol(5, Source::size(0, 0));
  EXPECT_EQ(error_of([&] { b.evaluate(x > 3, "[test]"); }),
            "[ShapeEnv] evaluate: the condition belongs to another ShapeEnv");
}

TEST(Scenario, OriginsArePrintableOnRequest) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {6});
  int line = __LINE__ + 1;
  EXPECT_TRUE((x[0] > 4).guard("[pad] size(0) > 4"));
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.instruction(1).origin, "shape_env_test.cpp:" + std::to_string(line));
  EXPECT_TRUE(::lathe::sym::testing::contains(
      p.to_string(true), "arg0.size(0) > 4  # [pad] size(0) > 4 (at shape_env_test.cpp:"));
}

TEST(Scenario, CheckIsSafeFromManyThreads) {
  ShapeEnv env;
  auto x = symbolic_sizes(env, 0, {16, 4});
  EXPECT_TRUE((mod(x[0] * x[1], 8) == 0).guard("[reshape] 8 divides numel"));
  EXPECT_TRUE((x[0] > 4).guard("[pad]"));
  const GuardProgram p = env.produce_guards();
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        int64_t a = 5 + (i + t) % 20, b = 8;
        int64_t sizes[2] = {a, b}, strides[2] = {b, 1};
        ArgView v = ArgView::tensor(sizes, strides, 2);
        if (!p.check({&v, 1}).ok()) ++failures[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

}  // namespace
}  // namespace lathe::sym

namespace lathe::sym {
namespace {

TEST(GuardProgramTest, GeneralExpressionsEvaluateLikeTheirExpr) {
  ShapeEnv env;
  SymInt a = env.create_symbol(12, Source::size(0, 0), DimPolicy::kDynamic);
  SymInt b = env.create_symbol(5, Source::size(0, 1), DimPolicy::kDynamic);
  SymInt c = env.create_symbol(7, Source::scalar(1), DimPolicy::kDynamic);
  SymInt e = sym_max(floordiv(a * a + 3 * b, c), ceildiv(a, b) * mod(b - a * c, 4)) - sym_min(a, c);
  EXPECT_TRUE((e >= 3).guard("[test] general"));
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.instruction(3).text,
            "Max((arg0.size(0)**2 + 3*arg0.size(1)) // arg1, CeilDiv(arg0.size(0), "
            "arg0.size(1))*((-arg0.size(0)*arg1 + arg0.size(1)) % 4)) >= Min(arg0.size(0), arg1) "
            "+ 3");
  // Sweep inputs: the program passes exactly when the expression (and the ranges) hold.
  for (int64_t x = 2; x < 30; ++x) {
    for (int64_t y = 2; y < 9; ++y) {
      for (int64_t z = -6; z < 9; ++z) {
        if (z == 0) continue;
        int64_t sizes[2] = {x, y}, strides[2] = {y, 1};
        ArgView in[2] = {ArgView::tensor(sizes, strides, 2), ArgView::integer(z)};
        auto py_floordiv = [](int64_t p, int64_t q) {
          return p / q - ((p % q != 0) && ((p < 0) != (q < 0)));
        };
        auto py_mod = [&](int64_t p, int64_t q) { return p - q * py_floordiv(p, q); };
        int64_t expect =
            std::max(py_floordiv(x * x + 3 * y, z), -py_floordiv(-x, y) * py_mod(y - x * z, 4)) -
            std::min(x, z);
        EXPECT_EQ(p.check({in, 2}).ok(), expect >= 3) << x << " " << y << " " << z;
      }
    }
  }
}

TEST(GuardProgramTest, PowerOfTwoDivisionUsesPythonSemantics) {
  ShapeEnv env;
  SymInt a = env.create_symbol(12, Source::size(0, 0), DimPolicy::kDynamic);
  SymInt c = env.create_symbol(-7, Source::scalar(1), DimPolicy::kDynamic);
  EXPECT_TRUE((floordiv(c - a, 8) + mod(c * a, 16) >= 9).guard("[test] pow2"));
  EXPECT_TRUE((mod(c, 4) == 1).guard("[test] mask"));
  GuardProgram p = env.produce_guards();
  EXPECT_EQ(p.to_string(),
            "s0 = arg0.size(0)  # dynamic dim\n"
            "s1 = arg1  # dynamic scalar\n"
            "(-arg0.size(0) + arg1) // 8 + arg0.size(0)*arg1 % 16 >= 9  # [test] pow2\n"
            "arg1 % 4 == 1  # [test] mask\n"
            "2 <= arg0.size(0)  # dynamic dim (0 and 1 are specialized)\n");
  for (int64_t x = 2; x < 40; ++x) {
    for (int64_t z = -40; z < 40; ++z) {
      int64_t sizes[1] = {x}, strides[1] = {1};
      ArgView in[2] = {ArgView::tensor(sizes, strides, 1), ArgView::integer(z)};
      auto fd = [](int64_t p, int64_t q) { return p / q - ((p % q != 0) && ((p < 0) != (q < 0))); };
      auto md = [&](int64_t p, int64_t q) { return p - q * fd(p, q); };
      bool expect = fd(z - x, 8) + md(z * x, 16) >= 9 && md(z, 4) == 1;
      EXPECT_EQ(p.check({in, 2}).ok(), expect) << x << " " << z;
    }
  }
}

TEST(GuardProgramTest, TooDeepExpressionIsAnError) {
  ShapeEnv env;
  SymInt a = env.create_symbol(5, Source::size(0, 0), DimPolicy::kDynamic);
  SymInt b = env.create_symbol(3, Source::size(0, 1), DimPolicy::kDynamic);
  SymInt e = b;
  for (int i = 0; i < 70; ++i) e = floordiv(a, e);
  EXPECT_TRUE((e > 0).guard("[test] deep"));
  std::string msg = testing::error_of([&] { env.produce_guards(); });
  EXPECT_TRUE(testing::contains(msg, "[GuardProgram] the guard arg0.size(0) // (arg0.size(0) //"))
      << msg;
  EXPECT_TRUE(testing::contains(msg, "needs an evaluation stack of 71 values; the limit is 64"))
      << msg;
}

TEST(GuardProgramTest, EmptyProgramPassesAndExplains) {
  GuardProgram p;
  EXPECT_TRUE(p.check({}).ok());
  EXPECT_EQ(p.explain({}, p.check({})), "all guards passed");
  EXPECT_EQ(p.explain({}, GuardCheck{3}), "guard 3 failed (no such instruction)");
  EXPECT_EQ(p.to_string(), "");
}

}  // namespace
}  // namespace lathe::sym
