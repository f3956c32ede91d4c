// Two views of one storage passed as two arguments, with an in-place write (issue 33). The trace
// takes distinct tensors for independent ones; when its graph writes an argument, the entry
// guards that no written argument shares memory with another, and a call that shares some runs
// eagerly (one warning naming the arguments) instead of giving a different value.
#include <gtest/gtest.h>

#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "tests/trace/test_util.h"

using namespace lathe;
using lathe::test::contains;
using lathe::test::randn_seeded;
using lathe::test::same_values;
using V = std::vector<Tensor>;

namespace {

// g(a, b) = { a += 1; return b * 2 }: b sees the write when it views a's memory.
V write_then_read(const V& args) {
  Tensor a = args[0];
  add_(a, ones({}));
  return {mul(args[1], 2.0)};
}

// Runs g on fresh copies of base (same layout): eager's result and what the write left in base.
std::pair<Tensor, Tensor> eager_aliased(const Tensor& base) {
  Tensor b = base.clone();
  Tensor out = write_then_read({b, b.view({3, 4})})[0];
  return {out, b};
}

class AliasedViews : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Backends, AliasedViews, ::testing::Values("interpreter", "cpu"));

TEST_P(AliasedViews, DistinctThenAliased) {
  CompileOptions o;
  o.backend = GetParam();
  o.name = "write_then_read";
  auto f = compile(write_then_read, o);
  // Distinct storages: compiled, as eager.
  Tensor a = randn_seeded({12}, 1), b = randn_seeded({3, 4}, 2);
  Tensor a_eager = a.clone();
  Tensor got = f({a, b})[0];
  EXPECT_TRUE(same_values(got, mul(b, 2.0)));
  EXPECT_TRUE(same_values(a, add(a_eager, 1.0)));
  EXPECT_TRUE(contains(f.guards_string(), "written arguments share no memory"))
      << f.guards_string();
  // One storage under both arguments: eager's value, a warning, no new trace.
  Tensor base = randn_seeded({12}, 3);
  auto [want, base_want] = eager_aliased(base);
  ::testing::internal::CaptureStderr();
  Tensor aliased = f({base, base.view({3, 4})})[0];
  Tensor again = f({base, base.view({3, 4})})[0];
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(same_values(aliased, want));
  EXPECT_TRUE(same_values(again, mul(add(base_want, 1.0), 2.0).view({3, 4})));
  EXPECT_TRUE(contains(err, "'write_then_read': arguments 0 and 1 share memory")) << err;
  EXPECT_TRUE(contains(err, "writes arg0 in place")) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "one warning: " << err;
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().eager_calls, 2);
  EXPECT_EQ(f.check_guards({base, base.view({3, 4})}), -1);
  // Distinct storages still run the entry.
  Tensor c = randn_seeded({12}, 4), d = randn_seeded({3, 4}, 5);
  EXPECT_TRUE(same_values(f({c, d})[0], mul(d, 2.0)));
  EXPECT_EQ(f.stats().eager_calls, 2);
  EXPECT_EQ(f.stats().hits, 1);
}

TEST_P(AliasedViews, AliasedFirst) {
  CompileOptions o;
  o.backend = GetParam();
  auto f = compile(write_then_read, o);
  Tensor base = randn_seeded({12}, 6);
  auto [want, base_want] = eager_aliased(base);
  ::testing::internal::CaptureStderr();
  Tensor got = f({base, base.view({3, 4})})[0];
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(same_values(got, want));
  EXPECT_TRUE(same_values(base, base_want));  // written once, by the eager run
  EXPECT_TRUE(contains(err, "share memory")) << err;
  EXPECT_EQ(f.stats().compiles, 1);  // the entry serves later calls without shared memory
  EXPECT_EQ(f.stats().eager_calls, 1);
  Tensor a = randn_seeded({12}, 7), b = randn_seeded({3, 4}, 8);
  Tensor a_eager = a.clone();
  EXPECT_TRUE(same_values(f({a, b})[0], mul(b, 2.0)));
  EXPECT_TRUE(same_values(a, add(a_eager, 1.0)));
  EXPECT_EQ(f.stats().compiles, 1);
  EXPECT_EQ(f.stats().hits, 1);
}

// Disjoint parts of one storage do not meet, and a graph that writes no argument needs no
// check: both run the compiled entry.
TEST(AliasedViewsGuard, DisjointOrReadOnlyViewsStayCompiled) {
  auto f = compile(write_then_read);
  Tensor base = randn_seeded({24}, 9);
  Tensor lo = base.slice(0, 0, 12), hi = base.slice(0, 12, 24);
  Tensor hi_before = hi.clone();
  f({randn_seeded({12}, 10), randn_seeded({3, 4}, 11)});
  Tensor got = f({lo, hi.view({3, 4})})[0];
  EXPECT_TRUE(same_values(got, mul(hi_before, 2.0).view({3, 4})));
  EXPECT_EQ(f.stats().eager_calls, 0);

  auto read_only = compile([](const V& a) { return V{add(a[0], a[1].view({12}))}; });
  Tensor x = randn_seeded({12}, 12);
  read_only({randn_seeded({12}, 13), randn_seeded({3, 4}, 14)});
  EXPECT_TRUE(same_values(read_only({x, x.view({3, 4})})[0], add(x, x)));
  EXPECT_EQ(read_only.stats().eager_calls, 0);
  EXPECT_EQ(read_only.stats().hits, 1);
  EXPECT_FALSE(contains(read_only.guards_string(), "share no memory"));
}

}  // namespace

namespace {

// Writes its first argument; reads the others.
V write_first_read_rest(const V& a) {
  Tensor w = a[0];
  mul_(w, 3.0);
  return {add(add(a[1], a[2]), a[3])};
}

}  // namespace

// Among many arguments: only sharing with a written one matters. Two read-only views of one
// storage stay compiled; a view of the written argument placed last is found.
TEST(AliasedViewsGuard, OnlySharingWithAWrittenArgumentMatters) {
  auto f = compile(write_first_read_rest);
  f({randn_seeded({8}, 20), randn_seeded({8}, 21), randn_seeded({8}, 22), randn_seeded({8}, 23)});
  Tensor w = randn_seeded({8}, 24), shared = randn_seeded({12}, 25), other = randn_seeded({8}, 26);
  Tensor r1 = shared.slice(0, 0, 8), r2 = shared.slice(0, 4, 12);
  Tensor got = f({w, r1, r2, other})[0];
  EXPECT_TRUE(same_values(got, add(add(r1, r2), other)));
  EXPECT_EQ(f.stats().eager_calls, 0);
  EXPECT_EQ(f.stats().hits, 1);

  Tensor big = randn_seeded({16}, 27);
  Tensor written = big.slice(0, 0, 8), tail = big.slice(0, 7, 15);  // element 7 in both
  Tensor tail_want = tail.clone();
  {
    std::vector<float> t = tail_want.to_vector<float>();
    t[0] *= 3.0f;  // eager: the write reaches tail's first element before the read
    tail_want = from_vector(t, {8});
  }
  ::testing::internal::CaptureStderr();
  Tensor got2 = f({written, r1, other, tail})[0];
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(same_values(got2, add(add(r1, other), tail_want)));
  EXPECT_TRUE(contains(err, "arguments 0 and 3 share memory")) << err;
  EXPECT_EQ(f.stats().eager_calls, 1);
}
