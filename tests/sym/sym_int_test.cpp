#include "lathe/sym/sym_int.h"

#include <gtest/gtest.h>

#include <type_traits>

#include "lathe/sym/expr_pool.h"
#include "lathe/sym/shape_env.h"
#include "lathe/sym/sym_error.h"
#include "tests/sym/sym_test_util.h"

namespace lathe::sym {
namespace {

using testing::contains;
using testing::error_of;

TEST(SymInt, IsOneWordAndTriviallyCopyable) {
  static_assert(sizeof(SymInt) == sizeof(int64_t));
  static_assert(sizeof(SymBool) == sizeof(void*));
  static_assert(std::is_trivially_copyable_v<SymInt>);
  static_assert(std::is_trivially_copyable_v<SymBool>);
  EXPECT_EQ(SymInt().expect_int(), 0);
  EXPECT_FALSE(SymBool().expect_bool());
}

TEST(SymInt, InlineArithmetic) {
  SymInt a = 7, b = -3;
  EXPECT_EQ((a + b).expect_int(), 4);
  EXPECT_EQ((a - b).expect_int(), 10);
  EXPECT_EQ((a * b).expect_int(), -21);
  EXPECT_EQ((-a).expect_int(), -7);
  EXPECT_FALSE((a + b).is_symbolic());
  SymInt c = a;
  c += 5;
  c -= 2;
  c *= 3;
  EXPECT_EQ(c.expect_int(), 30);
  EXPECT_EQ(sym_min(a, b).expect_int(), -3);
  EXPECT_EQ(sym_max(a, b).expect_int(), 7);
  EXPECT_EQ(a.maybe_int(), std::optional<int64_t>(7));
}

TEST(SymInt, FloorSemanticsForNegativeValues) {
  EXPECT_EQ(floordiv(7, 2).expect_int(), 3);
  EXPECT_EQ(floordiv(-7, 2).expect_int(), -4);
  EXPECT_EQ(floordiv(7, -2).expect_int(), -4);
  EXPECT_EQ(floordiv(-7, -2).expect_int(), 3);
  EXPECT_EQ(mod(-7, 2).expect_int(), 1);
  EXPECT_EQ(mod(7, -2).expect_int(), -1);
  EXPECT_EQ(mod(-7, -2).expect_int(), -1);
  EXPECT_EQ(ceildiv(7, 2).expect_int(), 4);
  EXPECT_EQ(ceildiv(-7, 2).expect_int(), -3);
  EXPECT_EQ(ceildiv(7, -2).expect_int(), -3);
}

TEST(SymInt, InlineComparisons) {
  SymInt a = 3, b = 4;
  EXPECT_TRUE((a < b).expect_bool());
  EXPECT_TRUE((a <= b).expect_bool());
  EXPECT_FALSE((a > b).expect_bool());
  EXPECT_FALSE((a >= b).expect_bool());
  EXPECT_FALSE((a == b).expect_bool());
  EXPECT_TRUE((a != b).expect_bool());
  EXPECT_TRUE(bool(a == 3));
  EXPECT_TRUE((!(a == b)).expect_bool());
}

TEST(SymInt, OverflowIsAnError) {
  SymInt big = INT64_MAX;
  EXPECT_EQ(error_of([&] { (void)(big + 1); }),
            "[sym] integer overflow: 9223372036854775807 + 1 does not fit in int64");
  EXPECT_EQ(error_of([&] { (void)(big * 2); }),
            "[sym] integer overflow: 9223372036854775807 * 2 does not fit in int64");
  EXPECT_EQ(error_of([&] { (void)(SymInt(-4611686018427387904) - big); }),
            "[sym] integer overflow: -4611686018427387904 - 9223372036854775807 does not fit in "
            "int64");
}

TEST(SymInt, DivisionByZeroIsAnError) {
  EXPECT_EQ(error_of([] { (void)floordiv(5, 0); }), "[sym] division by zero: 5 // 0");
  EXPECT_EQ(error_of([] { (void)mod(5, 0); }), "[sym] division by zero: 5 % 0");
  EXPECT_EQ(error_of([] { (void)ceildiv(5, 0); }), "[sym] division by zero: 5 ceildiv 0");
}

TEST(SymInt, UnrepresentableIntegersAreRejected) {
  int64_t tagged = static_cast<int64_t>(uint64_t{5} << 61);
  EXPECT_PRED2(contains, error_of([&] { SymInt s(tagged); }),
               "[SymInt] integer -6917529027641081856 cannot be stored inline");
  EXPECT_EQ(error_of([] { SymInt s(uint64_t{1} << 63); }),
            "[SymInt] integer 9223372036854775808 does not fit in int64");
  // The reserved band is the only gap: its neighbours are fine.
  EXPECT_EQ(SymInt(tagged - 1).expect_int(), tagged - 1);
  EXPECT_EQ(SymInt(INT64_MIN).expect_int(), INT64_MIN);
}

TEST(SymInt, SymbolicValues) {
  ShapeEnv env;
  SymInt s0 = env.create_symbol(6, Source::size(0, 0), DimPolicy::kDynamic);
  SymInt s1 = env.create_symbol(5, Source::size(0, 1), DimPolicy::kDynamic);
  EXPECT_TRUE(s0.is_symbolic());
  EXPECT_EQ(s0.maybe_int(), std::nullopt);
  EXPECT_EQ(s0.to_string(), "s0");
  EXPECT_EQ((s0 * s1 + 2 * s0 - 1).to_string(), "s0*s1 + 2*s0 - 1");
  EXPECT_EQ(floordiv(s0, 8).to_string(), "FloorDiv(s0, 8)");
  EXPECT_EQ(mod(s0, 8).to_string(), "Mod(s0, 8)");
  EXPECT_EQ(ceildiv(s0, 8).to_string(), "CeilDiv(s0, 8)");
  EXPECT_EQ(sym_min(s0, s1).to_string(), "Min(s0, s1)");
  EXPECT_EQ(sym_max(s0, s0 + 1).to_string(), "s0 + 1");
  EXPECT_EQ((s0 - s0).maybe_int(), std::optional<int64_t>(0));
  EXPECT_EQ((s0 * s1 + 2).hint(), 32);
  std::ostringstream os;
  os << s0 + 1 << ' ' << (s0 > 4);
  EXPECT_EQ(os.str(), "s0 + 1 s0 > 4");
  // The same expression built twice is the same object.
  EXPECT_EQ((s0 + s1).expr(), (s1 + s0).expr());
}

TEST(SymInt, ExpectIntOnSymbolicThrows) {
  ShapeEnv env;
  SymInt s0 = env.create_symbol(6, Source::size(0, 0), DimPolicy::kDynamic);
  EXPECT_EQ(error_of([&] { s0.expect_int(); }),
            "[SymInt] expect_int() on the symbolic value s0; use guard_int(reason) to specialize "
            "it");
}

TEST(SymBool, ExpectBoolOnSymbolicThrows) {
  ShapeEnv env;
  SymInt s0 = env.create_symbol(6, Source::size(0, 0), DimPolicy::kDynamic);
  EXPECT_EQ(error_of([&] { (s0 > 4).expect_bool(); }),
            "[SymBool] expect_bool() on the symbolic condition s0 > 4; use guard(reason) to "
            "decide it");
}

TEST(SymInt, OperandsFromTwoEnvsAreAnError) {
  ShapeEnv a, b;
  SymInt x = a.create_symbol(6, Source::size(0, 0), DimPolicy::kDynamic);
  SymInt y = b.create_symbol(6, Source::size(0, 0), DimPolicy::kDynamic);
  EXPECT_EQ(error_of([&] { (void)(x + y); }),
            "[SymInt] operands come from different ShapeEnvs: s0 and s0");
}

TEST(SymInt, SymbolicGuardsGoThroughTheShapeEnv) {
  ShapeEnv env;
  SymInt s0 = env.create_symbol(6, Source::size(0, 0), DimPolicy::kDynamic);
  EXPECT_TRUE(s0 >= 2);  // provable from the range [2, inf): no guard
  EXPECT_TRUE(env.guards().empty());
  EXPECT_TRUE((s0 > 4).guard("[test] big"));
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.format_guards(), "s0 > 4  # [test] big\n");
  EXPECT_EQ(static_cast<int64_t>(s0), 6);  // specializes
  EXPECT_EQ(env.format_guards(), "s0 > 4  # [test] big\ns0 == 6  # int64_t(SymInt)\n");
  EXPECT_EQ((s0 + 1).maybe_int(), std::optional<int64_t>(7));  // replacement s0 -> 6
}

}  // namespace
}  // namespace lathe::sym

namespace lathe::sym {
namespace {

using testing::error_of;

TEST(SymErrors, RemainingMessages) {
  ExprPool bare;
  const Expr* s0 = bare.new_symbol(0, 0, false);
  const Expr* cond = bare.relation(ExprKind::kGt, s0, bare.integer(4));
  EXPECT_EQ(error_of([&] { SymInt::from_expr(s0).hint(); }),
            "[SymInt] hint() of s0 needs a ShapeEnv, but this expression belongs to a bare "
            "ExprPool");
  EXPECT_EQ(error_of([&] { SymInt::from_expr(s0).guard_int("[test]"); }),
            "[SymInt] guard_int() of s0 needs a ShapeEnv, but this expression belongs to a bare "
            "ExprPool");
  EXPECT_EQ(error_of([&] { SymBool::from_expr(cond).guard("[test]"); }),
            "[SymInt] guard() of s0 > 4 needs a ShapeEnv, but this expression belongs to a bare "
            "ExprPool");
  EXPECT_EQ(error_of([&] { SymInt::from_expr(cond); }),
            "[SymInt] from_expr: s0 > 4 is a condition, not an integer");
  EXPECT_EQ(error_of([&] { SymBool::from_expr(s0); }),
            "[SymBool] from_expr: s0 is not a condition");
  EXPECT_EQ(error_of([&] { negate_relation(ExprKind::kAdd); }),
            "[sym] negate_relation: not a relation");
  // Arithmetic on a bare pool's symbols still simplifies.
  EXPECT_EQ((SymInt::from_expr(s0) * 2 - SymInt::from_expr(s0)).to_string(), "s0");
  EXPECT_EQ((!SymBool::from_expr(cond)).to_string(), "s0 <= 4");
}

TEST(SymErrors, GuardProgramBuilderRejectsWrongKinds) {
  ExprPool pool;
  const Expr* s0 = pool.new_symbol(0, 0, false);
  const Expr* cond = pool.relation(ExprKind::kGt, s0, pool.integer(4));
  auto source_of = [](const Expr*) { return Source::size(0, 0); };
  GuardProgram p;
  EXPECT_EQ(error_of([&] { p.add_condition(s0, source_of, "r", ""); }),
            "[GuardProgram] add_condition: s0 is not a relation");
  EXPECT_EQ(error_of([&] { p.add_equal_expr(Source::size(0, 1), cond, source_of, "r"); }),
            "[GuardProgram] cannot compile the condition s0 > 4 as an integer expression");
}

}  // namespace
}  // namespace lathe::sym
