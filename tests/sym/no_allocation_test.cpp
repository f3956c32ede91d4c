// GuardProgram::check and inline SymInt arithmetic must not allocate. This file replaces the
// global operator new of the test binary with a counting one.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "lathe/sym/shape_env.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace lathe::sym {
namespace {

TEST(NoAllocation, CounterSeesAllocations) {
  long before = g_allocations.load();
  auto* v = new std::vector<int>(3);
  delete v;
  EXPECT_GE(g_allocations.load(), before + 2);
}

TEST(NoAllocation, GuardCheck) {
  ShapeEnv env;
  SymInt a = env.create_symbol(8, Source::size(0, 0));
  SymInt b = env.create_symbol(16, Source::size(0, 1));
  env.create_symbol(8, Source::size(1, 0));
  EXPECT_TRUE((mod(a * b, 8) == 0).guard("[reshape]"));
  EXPECT_TRUE((floordiv(a + b, 3) > 2).guard("[general]"));
  GuardProgram p = env.produce_guards();
  int64_t xs[2] = {8, 16}, xt[2] = {16, 1}, ys[1] = {8}, yt[1] = {1};
  ArgView in[2] = {ArgView::tensor(xs, xt, 2), ArgView::tensor(ys, yt, 1)};
  long before = g_allocations.load();
  int passed = 0;
  for (int i = 0; i < 1000; ++i) passed += p.check({in, 2}).ok();
  xs[0] = 3;
  for (int i = 0; i < 1000; ++i) passed += p.check({in, 2}).ok();
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_EQ(passed, 1000);
}

TEST(NoAllocation, InlineSymIntArithmetic) {
  long before = g_allocations.load();
  SymInt x = 3;
  for (int i = 0; i < 1000; ++i) {
    x = floordiv(x * 7 + i, 3) - mod(x, 5) + sym_max(x, 2);
    if (x > 1000000) x = 3;
  }
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_FALSE(x.is_symbolic());
}

}  // namespace
}  // namespace lathe::sym
