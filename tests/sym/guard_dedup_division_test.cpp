// ShapeEnv: a condition decided by an earlier guard records no second guard, and relations over
// FloorDiv / CeilDiv by constants are decided exactly through their residues (issue 10, item 8).
#include <gtest/gtest.h>

#include "lathe/sym/shape_env.h"

namespace lathe::sym {
namespace {

TEST(GuardDedup, AskingTwiceRecordsOneGuard) {
  ShapeEnv env;
  SymInt s = env.create_symbol(10, Source::size(0, 0));
  EXPECT_TRUE((s > 4).guard("first"));
  EXPECT_TRUE((s > 4).guard("again"));
  EXPECT_TRUE((4 < s).guard("flipped"));
  EXPECT_FALSE((s <= 4).guard("negated"));
  EXPECT_EQ(env.guards().size(), 1u) << env.format_guards();
}

TEST(DivisionFacts, MultiplesOfAFloorDivAreBoundedByTheDividend) {
  ShapeEnv env;
  SymInt s = env.create_symbol(10, Source::size(0, 0));
  SymInt third = floordiv(s, 3);
  EXPECT_TRUE((third <= s).guard("1"));
  EXPECT_TRUE((third * 2 <= s).guard("2"));
  EXPECT_TRUE((third * 3 <= s).guard("3"));
  EXPECT_FALSE((third * 3 > s).guard("3 negated"));
  EXPECT_TRUE((ceildiv(s, 4) * 4 >= s).guard("ceil"));
  EXPECT_EQ(env.guards().size(), 0u) << env.format_guards();
  // Not provable for every s >= 2 (false for s = 2): decided from the hint, with a guard.
  EXPECT_TRUE((third * 4 > s).guard("4"));
  EXPECT_EQ(env.guards().size(), 1u) << env.format_guards();
}

}  // namespace
}  // namespace lathe::sym
