// Property tests: random expression trees over random symbol values within their ranges. The
// simplified expression must evaluate like a direct evaluation of the unsimplified tree, and its
// bounds must contain the value.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "lathe/sym/expr.h"
#include "lathe/sym/int_math.h"
#include "lathe/sym/shape_env.h"
#include "lathe/sym/sym_error.h"

namespace lathe::sym {
namespace {

// An unsimplified expression tree, evaluated directly with Python semantics.
struct Tree {
  enum Op { kConst, kSym, kAdd, kSub, kMul, kNeg, kFloorDiv, kCeilDiv, kMod, kMin, kMax };
  Op op = kConst;
  int64_t value = 0;  // kConst: the value; kSym: the symbol index
  std::unique_ptr<Tree> a, b;

  // nullopt where Python would raise (division by zero) or int64 overflows.
  std::optional<int64_t> eval(const std::vector<int64_t>& syms) const {
    if (op == kConst) return value;
    if (op == kSym) return syms[value];
    auto x = a->eval(syms);
    if (!x) return std::nullopt;
    if (op == kNeg) {
      int64_t r;
      if (!detail::try_sub(0, *x, &r)) return std::nullopt;
      return r;
    }
    auto y = b->eval(syms);
    if (!y) return std::nullopt;
    int64_t r = 0;
    bool ok = true;
    switch (op) {
      case kAdd:
        ok = detail::try_add(*x, *y, &r);
        break;
      case kSub:
        ok = detail::try_sub(*x, *y, &r);
        break;
      case kMul:
        ok = detail::try_mul(*x, *y, &r);
        break;
      case kFloorDiv:
        ok = detail::try_floordiv(*x, *y, &r);
        break;
      case kCeilDiv:
        ok = detail::try_ceildiv(*x, *y, &r);
        break;
      case kMod:
        ok = detail::try_mod(*x, *y, &r);
        break;
      case kMin:
        r = std::min(*x, *y);
        break;
      case kMax:
        r = std::max(*x, *y);
        break;
      default:
        ok = false;
    }
    if (!ok) return std::nullopt;
    return r;
  }

  SymInt build(const std::vector<SymInt>& syms) const {
    switch (op) {
      case kConst:
        return SymInt(value);
      case kSym:
        return syms[value];
      case kNeg:
        return -a->build(syms);
      default:
        break;
    }
    SymInt x = a->build(syms), y = b->build(syms);
    switch (op) {
      case kAdd:
        return x + y;
      case kSub:
        return x - y;
      case kMul:
        return x * y;
      case kFloorDiv:
        return floordiv(x, y);
      case kCeilDiv:
        return ceildiv(x, y);
      case kMod:
        return mod(x, y);
      case kMin:
        return sym_min(x, y);
      default:
        return sym_max(x, y);
    }
  }
};

class TreeGen {
 public:
  TreeGen(uint64_t seed, int num_syms) : rng_(seed), num_syms_(num_syms) {}

  std::unique_ptr<Tree> gen(int depth) {
    auto t = std::make_unique<Tree>();
    int choice = depth <= 0 ? pick(0, 1) : pick(0, 12);
    if (choice == 0) {
      t->op = Tree::kConst;
      t->value = pick(-10, 10);
    } else if (choice == 1 || choice == 2) {
      t->op = Tree::kSym;
      t->value = pick(0, num_syms_ - 1);
    } else {
      static const Tree::Op ops[] = {Tree::kAdd,      Tree::kSub,     Tree::kMul, Tree::kNeg,
                                     Tree::kFloorDiv, Tree::kCeilDiv, Tree::kMod, Tree::kMin,
                                     Tree::kMax,      Tree::kFloorDiv};
      t->op = ops[pick(0, 9)];
      t->a = gen(depth - 1);
      if (t->op != Tree::kNeg) {
        bool div = t->op == Tree::kFloorDiv || t->op == Tree::kCeilDiv || t->op == Tree::kMod;
        // Divisors: mostly nonzero constants of both signs, sometimes any expression.
        if (div && pick(0, 2) != 0) {
          t->b = std::make_unique<Tree>();
          int64_t k = pick(1, 9) * (pick(0, 3) == 0 ? -1 : 1);
          t->b->value = k;
        } else {
          t->b = gen(depth - 1);
        }
      }
    }
    return t;
  }

  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

 private:
  std::mt19937_64 rng_;
  int num_syms_;
};

struct Stats {
  int exprs = 0;
  int checks = 0;
};

// Builds `count` random trees and compares on `assignments` values from `sample`.
template <typename Sample>
void check_random_trees(ShapeEnv& env, const std::vector<SymInt>& syms, uint64_t seed, int count,
                        Sample sample, Stats& stats) {
  TreeGen gen(seed, static_cast<int>(syms.size()));
  for (int i = 0; i < count; ++i) {
    auto tree = gen.gen(static_cast<int>(gen.pick(1, 4)));
    std::optional<SymInt> built;
    std::string build_error;
    try {
      built = tree->build(syms);
    } catch (const SymError& e) {
      build_error = e.what();
    }
    ++stats.exprs;
    for (int k = 0; k < 12; ++k) {
      std::vector<int64_t> tree_values;  // per tree symbol
      std::vector<int64_t> ids;          // per ShapeEnv symbol id
      sample(gen, tree_values, ids);
      auto expected = tree->eval(tree_values);
      if (!built) {
        // Building fails only where evaluation fails too (a divisor that is identically 0).
        ASSERT_FALSE(expected.has_value()) << "build failed: " << build_error;
        continue;
      }
      if (!expected) continue;
      ++stats.checks;
      int64_t got;
      if (auto v = built->maybe_int()) {
        got = *v;
      } else {
        const Expr* e = env.simplify(built->expr());
        try {
          got = evaluate(e, ids);
        } catch (const SymError& err) {
          FAIL() << "simplified " << to_string(e) << " failed: " << err.what();
        }
        ValueRange r = env.pool().bound(e);
        ASSERT_TRUE(r.contains(got))
            << to_string(e) << " = " << got << " outside " << r.to_string();
      }
      ASSERT_EQ(got, *expected) << "simplified: " << built->to_string()
                                << " values:" << ::testing::PrintToString(tree_values);
    }
  }
}

TEST(Property, SimplifiedEqualsDirectEvaluation) {
  ShapeEnv env;
  std::vector<SymInt> syms;
  for (int i = 0; i < 3; ++i)
    syms.push_back(env.create_symbol(10 + i, Source::size(0, i), DimPolicy::kDynamic));
  // Dynamic sizes are in [2, inf): sample within that.
  Stats s;
  check_random_trees(
      env, syms, 1234, 4000,
      [](TreeGen& g, std::vector<int64_t>& tv, std::vector<int64_t>& ids) {
        tv = {g.pick(2, 40), g.pick(2, 40), g.pick(2, 40)};
        ids = tv;
      },
      s);
  EXPECT_GT(s.checks, 20000);
  EXPECT_TRUE(env.guards().empty());
}

TEST(Property, SimplifiedEqualsDirectEvaluationUnderFacts) {
  // s0 divisible by 4, s1 > 5, s2 replaced by s0 + 1: values are sampled to satisfy all three.
  ShapeEnv env;
  std::vector<SymInt> syms;
  syms.push_back(env.create_symbol(8, Source::size(0, 0), DimPolicy::kDynamic));
  syms.push_back(env.create_symbol(7, Source::size(0, 1), DimPolicy::kDynamic));
  syms.push_back(env.create_symbol(9, Source::size(0, 2), DimPolicy::kDynamic));
  ASSERT_TRUE((mod(syms[0], 4) == 0).guard("[test] divisible"));
  ASSERT_TRUE((syms[1] > 5).guard("[test] range"));
  ASSERT_TRUE((syms[2] == syms[0] + 1).guard("[test] replacement"));
  Stats s;
  check_random_trees(
      env, syms, 99, 4000,
      [](TreeGen& g, std::vector<int64_t>& tv, std::vector<int64_t>& ids) {
        int64_t a = 4 * g.pick(1, 10), b = g.pick(6, 40);
        tv = {a, b, a + 1};
        ids = tv;
      },
      s);
  EXPECT_GT(s.checks, 20000);
}

TEST(Property, StaticDecisionsAgreeWithEvaluation) {
  ShapeEnv env;
  std::vector<SymInt> syms;
  for (int i = 0; i < 2; ++i)
    syms.push_back(env.create_symbol(10 + i, Source::size(0, i), DimPolicy::kDynamic));
  TreeGen gen(7, 2);
  int decided = 0;
  for (int i = 0; i < 3000; ++i) {
    auto l = gen.gen(2), r = gen.gen(2);
    SymBool cond;
    int kind = static_cast<int>(gen.pick(0, 5));
    try {
      SymInt a = l->build(syms), b = r->build(syms);
      SymBool cs[] = {a == b, a != b, a<b, a <= b, a> b, a >= b};
      cond = cs[kind];
    } catch (const SymError&) {
      continue;
    }
    std::optional<bool> fixed = cond.maybe_bool();
    if (!fixed) fixed = env.static_value(cond);
    if (!fixed) continue;
    ++decided;
    for (int k = 0; k < 12; ++k) {
      std::vector<int64_t> v = {gen.pick(2, 60), gen.pick(2, 60)};
      auto x = l->eval(v), y = r->eval(v);
      if (!x || !y) continue;
      bool truth[] = {*x == *y, *x != *y, *x<*y, *x <= *y, *x> * y, *x >= *y};
      ASSERT_EQ(*fixed, truth[kind]) << cond.to_string() << " at " << ::testing::PrintToString(v);
    }
  }
  EXPECT_GT(decided, 300);
  EXPECT_TRUE(env.guards().empty());
}

TEST(Property, RangeArithmeticContainsEveryValue) {
  std::mt19937_64 rng(5);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int i = 0; i < 20000; ++i) {
    int64_t a0 = pick(-50, 50), a1 = a0 + pick(0, 30);
    int64_t b0 = pick(-50, 50), b1 = b0 + pick(0, 30);
    ValueRange a{a0, a1}, b{b0, b1};
    if (pick(0, 5) == 0) a.hi = ValueRange::kPosInf;
    if (pick(0, 5) == 0) b.lo = ValueRange::kNegInf;
    int64_t x = pick(a0, a1), y = pick(b0, b1);
    int64_t r;
    EXPECT_TRUE(range_add(a, b).contains(x + y));
    EXPECT_TRUE(range_mul(a, b).contains(x * y));
    EXPECT_TRUE(range_min(a, b).contains(std::min(x, y)));
    EXPECT_TRUE(range_max(a, b).contains(std::max(x, y)));
    EXPECT_TRUE(range_pow(a, 2).contains(x * x));
    if (y != 0) {
      detail::try_floordiv(x, y, &r);
      ASSERT_TRUE(range_floordiv(a, b).contains(r)) << x << "//" << y;
      detail::try_ceildiv(x, y, &r);
      ASSERT_TRUE(range_ceildiv(a, b).contains(r));
      detail::try_mod(x, y, &r);
      ASSERT_TRUE(range_mod(a, b).contains(r))
          << x << "%" << y << " " << range_mod(a, b).to_string();
    }
  }
}

}  // namespace
}  // namespace lathe::sym
