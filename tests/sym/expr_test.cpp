// Simplification rules of ExprPool, one test per rule, plus printing and errors.

#include "lathe/sym/expr.h"

#include <gtest/gtest.h>

#include "lathe/sym/expr_pool.h"
#include "lathe/sym/shape_env.h"
#include "tests/sym/sym_test_util.h"

namespace lathe::sym {
namespace {

using testing::error_of;

// A bare pool (no ranges, no facts): only structural rules apply.
class ExprRules : public ::testing::Test {
 protected:
  ExprPool p;
  const Expr* s0 = p.new_symbol(0, 0, false);
  const Expr* s1 = p.new_symbol(1, 1, false);
  const Expr* s2 = p.new_symbol(2, 2, false);
  const Expr* c(int64_t v) { return p.integer(v); }
  std::string str(const Expr* e) { return to_string(e); }
};

TEST_F(ExprRules, ConstantFolding) {
  EXPECT_EQ(p.add(c(2), c(3)), c(5));
  EXPECT_EQ(p.mul(c(-4), c(3)), c(-12));
  EXPECT_EQ(p.floordiv(c(-7), c(2)), c(-4));
  EXPECT_EQ(p.mod(c(-7), c(2)), c(1));
  EXPECT_EQ(p.ceildiv(c(-7), c(2)), c(-3));
  EXPECT_EQ(p.min(c(3), c(-1)), c(-1));
  EXPECT_EQ(p.max(c(3), c(-1)), c(3));
  EXPECT_EQ(p.relation(ExprKind::kLt, c(3), c(4)), p.boolean(true));
}

TEST_F(ExprRules, HashConsing) {
  EXPECT_EQ(p.add(s0, s1), p.add(s1, s0));
  EXPECT_EQ(p.mul(p.add(s0, c(1)), s1), p.add(p.mul(s1, s0), s1));
  EXPECT_NE(p.add(s0, s1), p.add(s0, s2));
  EXPECT_EQ(p.integer(7), p.integer(7));
}

TEST_F(ExprRules, CollectsLikeTerms) {
  EXPECT_EQ(str(p.add(s0, s0)), "2*s0");
  EXPECT_EQ(p.sub(s0, s0), c(0));
  EXPECT_EQ(str(p.add(p.mul(s0, s1), p.mul(c(2), s2))), "s0*s1 + 2*s2");
  EXPECT_EQ(str(p.mul(p.add(s0, c(1)), p.add(s0, c(-1)))), "s0**2 - 1");
  EXPECT_EQ(str(p.sub(c(3), s0)), "-s0 + 3");
  EXPECT_EQ(str(p.mul(p.mul(s1, s0), p.mul(s0, c(-3)))), "-3*s0**2*s1");
}

TEST_F(ExprRules, IdentitiesWithZeroAndOne) {
  EXPECT_EQ(p.add(s0, c(0)), s0);
  EXPECT_EQ(p.mul(s0, c(1)), s0);
  EXPECT_EQ(p.mul(s0, c(0)), c(0));
  EXPECT_EQ(p.floordiv(s0, c(1)), s0);
  EXPECT_EQ(p.ceildiv(s0, c(1)), s0);
  EXPECT_EQ(p.mod(s0, c(1)), c(0));
  EXPECT_EQ(p.floordiv(s0, c(-1)), p.neg(s0));
  EXPECT_EQ(p.floordiv(c(0), s0), c(0));
  EXPECT_EQ(p.mod(c(0), s0), c(0));
  EXPECT_EQ(p.floordiv(s0, s0), c(1));
  EXPECT_EQ(p.mod(s0, s0), c(0));
  EXPECT_EQ(p.min(s0, s0), s0);
}

TEST_F(ExprRules, NestedFloorDivMerges) {
  EXPECT_EQ(str(p.floordiv(p.floordiv(s0, c(2)), c(4))), "FloorDiv(s0, 8)");
  EXPECT_EQ(str(p.ceildiv(p.ceildiv(s0, c(3)), c(2))), "CeilDiv(s0, 6)");
  // After pulling multiples out, the residual merges too.
  EXPECT_EQ(str(p.floordiv(p.add(p.floordiv(s0, c(2)), c(4)), c(4))), "FloorDiv(s0, 8) + 1");
}

TEST_F(ExprRules, PullsMultiplesOfTheDivisor) {
  EXPECT_EQ(str(p.floordiv(p.add(p.mul(c(8), s0), s1), c(8))), "s0 + FloorDiv(s1, 8)");
  EXPECT_EQ(str(p.floordiv(p.add(s0, c(19)), c(8))), "FloorDiv(s0 + 3, 8) + 2");
  EXPECT_EQ(str(p.floordiv(p.add(s0, c(-1)), c(8))), "FloorDiv(s0 + 7, 8) - 1");
  EXPECT_EQ(str(p.ceildiv(p.add(p.mul(c(8), s0), c(1)), c(8))), "s0 + 1");
  EXPECT_EQ(str(p.mod(p.add(p.add(p.mul(c(8), s0), s1), c(9)), c(8))), "Mod(s1 + 1, 8)");
  EXPECT_EQ(str(p.mod(p.mul(c(9), s0), c(8))), "Mod(s0, 8)");
  // Symbolic divisors: multiples of a monomial divisor come out.
  EXPECT_EQ(p.floordiv(p.mul(s0, s1), s1), s0);
  EXPECT_EQ(str(p.floordiv(p.add(p.mul(s0, s1), s2), s1)), "s0 + FloorDiv(s2, s1)");
  EXPECT_EQ(str(p.mod(p.add(p.mul(s0, s1), s2), s1)), "Mod(s2, s1)");
}

TEST_F(ExprRules, CancelsCommonFactors) {
  EXPECT_EQ(str(p.floordiv(p.add(p.mul(c(4), s0), c(6)), c(8))), "FloorDiv(2*s0 + 3, 4)");
  EXPECT_EQ(p.floordiv(p.mul(c(8), s0), c(8)), s0);
  EXPECT_EQ(str(p.floordiv(p.mul(c(6), s0), c(4))), "FloorDiv(3*s0, 2)");
  EXPECT_EQ(str(p.mod(p.mul(c(4), s0), c(8))), "4*Mod(s0, 2)");
  EXPECT_EQ(str(p.floordiv(p.mul(c(2), s0), p.mul(c(4), s1))), "FloorDiv(s0, 2*s1)");
  EXPECT_EQ(str(p.relation(ExprKind::kEq, p.mul(c(2), s0), p.mul(c(2), s1))), "s0 == s1");
  EXPECT_EQ(p.relation(ExprKind::kEq, p.mul(c(2), s0), c(3)), p.boolean(false));
  // 2*s0 < 5  <=>  s0 <= 2  <=>  s0 < 3
  EXPECT_EQ(str(p.relation(ExprKind::kLt, p.mul(c(2), s0), c(5))), "s0 < 3");
}

TEST_F(ExprRules, NegativeDivisorsAreNormalized) {
  EXPECT_EQ(str(p.floordiv(s0, c(-2))), "FloorDiv(-s0, 2)");
  EXPECT_EQ(str(p.mod(s0, c(-2))), "-Mod(-s0, 2)");
  EXPECT_EQ(str(p.ceildiv(s0, c(-4))), "CeilDiv(-s0, 4)");
}

TEST_F(ExprRules, MinMaxOfComparableArguments) {
  EXPECT_EQ(p.min(s0, p.add(s0, c(1))), s0);
  EXPECT_EQ(p.max(s0, p.add(s0, c(1))), p.add(s0, c(1)));
  EXPECT_EQ(str(p.min(s1, s0)), "Min(s0, s1)");
  EXPECT_EQ(p.min(s1, s0), p.min(s0, s1));
  EXPECT_EQ(str(p.max(p.max(s0, s1), p.add(s0, c(2)))), "Max(s1, s0 + 2)");
}

TEST_F(ExprRules, Relations) {
  EXPECT_EQ(str(p.relation(ExprKind::kGt, s0, c(4))), "s0 > 4");
  EXPECT_EQ(str(p.relation(ExprKind::kLt, c(4), s0)), "4 < s0");
  EXPECT_EQ(str(p.relation(ExprKind::kGe, p.add(s0, c(3)), c(7))), "s0 >= 4");
  EXPECT_EQ(str(p.relation(ExprKind::kEq, s0, s1)), "s0 == s1");
  EXPECT_EQ(str(p.relation(ExprKind::kLe, p.mul(c(2), s0), p.add(s1, c(3)))), "2*s0 <= s1 + 3");
  EXPECT_EQ(p.relation(ExprKind::kLe, s0, s0), p.boolean(true));
  EXPECT_EQ(p.relation(ExprKind::kGt, p.add(s0, c(1)), s0), p.boolean(true));
  EXPECT_EQ(str(p.negate(p.relation(ExprKind::kGt, s0, c(4)))), "s0 <= 4");
  EXPECT_EQ(p.negate(p.boolean(true)), p.boolean(false));
}

TEST_F(ExprRules, PythonStylePrinting) {
  PrintOptions o;
  o.style = PrintOptions::Style::kPython;
  EXPECT_EQ(to_string(p.relation(ExprKind::kEq, p.mod(s0, c(8)), c(0)), o), "s0 % 8 == 0");
  EXPECT_EQ(to_string(p.mul(c(2), p.floordiv(s0, c(8))), o), "2*(s0 // 8)");
  EXPECT_EQ(to_string(p.floordiv(p.add(s0, s1), c(8)), o), "(s0 + s1) // 8");
  EXPECT_EQ(to_string(p.sub(c(1), p.floordiv(s0, c(8))), o), "-(s0 // 8) + 1");
  o.symbol_namer = [](std::ostream& os, const Expr* s) { os << "arg0.size(" << s->value() << ")"; };
  EXPECT_EQ(to_string(p.relation(ExprKind::kGt, s1, c(4)), o), "arg0.size(1) > 4");
}

TEST_F(ExprRules, OverflowInFoldingIsAnError) {
  EXPECT_EQ(error_of([&] { p.add(c(INT64_MAX), c(1)); }),
            "[sym] integer overflow: 9223372036854775807 + 1 does not fit in int64");
  EXPECT_EQ(error_of([&] { p.mul(c(INT64_MIN), c(-1)); }),
            "[sym] integer overflow: -9223372036854775808 * -1 does not fit in int64");
  EXPECT_EQ(error_of([&] { p.floordiv(c(INT64_MIN), c(-1)); }),
            "[sym] integer overflow: -9223372036854775808 // -1 does not fit in int64");
  // Like terms whose coefficients overflow.
  const Expr* big = p.mul(c(INT64_MAX), s0);
  EXPECT_EQ(error_of([&] { p.add(big, s0); }),
            "[sym] integer overflow: 9223372036854775807 + 1 does not fit in int64");
}

TEST_F(ExprRules, DivisionByZeroIsAnError) {
  EXPECT_EQ(error_of([&] { p.floordiv(s0, c(0)); }), "[sym] division by zero: FloorDiv(s0, 0)");
  EXPECT_EQ(error_of([&] { p.mod(p.add(s0, c(1)), c(0)); }),
            "[sym] division by zero: Mod(s0 + 1, 0)");
  EXPECT_EQ(error_of([&] { p.ceildiv(s0, c(0)); }), "[sym] division by zero: CeilDiv(s0, 0)");
}

TEST_F(ExprRules, ConditionsAreNotIntegers) {
  const Expr* cond = p.relation(ExprKind::kGt, s0, c(4));
  EXPECT_EQ(error_of([&] { p.add(cond, s0); }),
            "[sym] expected an integer expression, got the condition s0 > 4");
  EXPECT_EQ(error_of([&] { p.negate(s0); }), "[sym] negate: not a condition: s0");
  EXPECT_EQ(error_of([&] { p.decide(s0); }), "[sym] decide: not a condition: s0");
  EXPECT_EQ(error_of([&] { p.relation(ExprKind::kAdd, s0, s1); }),
            "[sym] relation: kind is not a comparison");
}

TEST_F(ExprRules, EvaluateErrors) {
  std::vector<int64_t> values = {3};
  EXPECT_EQ(error_of([&] { evaluate(p.add(s0, s1), values); }),
            "[sym] evaluate: no value given for symbol s1");
  const Expr* d = p.floordiv(s0, p.sub(s0, c(3)));
  EXPECT_EQ(error_of([&] { evaluate(d, values); }), "[sym] division by zero: 3 // 0");
}

// Rules that need ranges and facts use a ShapeEnv: dynamic sizes are in [2, inf).
class ContextRules : public ::testing::Test {
 protected:
  ShapeEnv env;
  SymInt x = env.create_symbol(16, Source::size(0, 0), DimPolicy::kDynamic);
  SymInt y = env.create_symbol(5, Source::size(0, 1), DimPolicy::kDynamic);
};

TEST_F(ContextRules, RangesDecideComparisonsStatically) {
  EXPECT_EQ((x >= 2).maybe_bool(), std::optional<bool>(true));
  EXPECT_EQ((x == 1).maybe_bool(), std::optional<bool>(false));
  EXPECT_EQ((x * y > 3).maybe_bool(), std::optional<bool>(true));
  EXPECT_EQ((x + y > x).maybe_bool(), std::optional<bool>(true));
  EXPECT_EQ((x > 2).maybe_bool(), std::nullopt);
  EXPECT_EQ(sym_max(x, 1).to_string(), "s0");
  EXPECT_EQ(sym_min(x, 1).to_string(), "1");
  EXPECT_EQ(mod(1, x).to_string(), "1");
  EXPECT_EQ(floordiv(1, x).to_string(), "0");
  EXPECT_EQ(floordiv(mod(x, 8), 8).to_string(), "0");
  EXPECT_EQ(mod(mod(x, 8), 8).to_string(), "Mod(s0, 8)");
  EXPECT_EQ(mod(mod(x, 16), 8).to_string(), "Mod(s0, 8)");
  EXPECT_TRUE(env.guards().empty());
}

TEST_F(ContextRules, DivisibilityMakesDivisionExact) {
  EXPECT_EQ(ceildiv(x, 8).to_string(), "CeilDiv(s0, 8)");
  EXPECT_TRUE((mod(x, 8) == 0).guard("[test] x divisible by 8"));
  EXPECT_EQ(mod(x, 8).to_string(), "0");
  EXPECT_EQ(mod(x, 4).to_string(), "0");
  EXPECT_EQ(mod(3 * x + 16, 8).to_string(), "0");
  EXPECT_EQ(ceildiv(x, 8).to_string(), "FloorDiv(s0, 8)");
  EXPECT_EQ((floordiv(x, 8) * 8).to_string(), "s0");
  EXPECT_EQ((floordiv(x, 8) * 16 - 2 * x).to_string(), "0");
  EXPECT_EQ((floordiv(x, 8) * y * 8).to_string(), "s0*s1");
  EXPECT_EQ(env.guards().size(), 1u);
}

TEST_F(ContextRules, RangeGuardsNarrowRanges) {
  EXPECT_TRUE((x > 4).guard("[test] big enough"));
  EXPECT_EQ(env.range_of(x.expr()), (ValueRange{5, ValueRange::kPosInf}));
  EXPECT_TRUE((x <= 20).guard("[test] small enough"));
  EXPECT_EQ(env.range_of(x.expr()), (ValueRange{5, 20}));
  EXPECT_EQ((x > 3).maybe_bool(), std::optional<bool>(true));
  EXPECT_EQ(floordiv(x, 32).to_string(), "0");
  EXPECT_TRUE((y != 2).guard("[test] not 2"));
  EXPECT_EQ(env.range_of(y.expr()), (ValueRange{3, ValueRange::kPosInf}));
}

}  // namespace
}  // namespace lathe::sym
