// The lazy device's per-op storage: the per-thread block pool (reuse, threads, its bound) and the
// inline vectors of a node (inline and heap cases, reassignment).
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "lathe/lazy/block_pool.h"
#include "lathe/lazy/inline_vector.h"

using namespace lathe;
using lazy::PoolAllocator;

namespace {

struct Object {
  int64_t words[37] = {};
};

template <class T>
std::shared_ptr<T> make_pooled() {
  return std::allocate_shared<T>(PoolAllocator<T>());
}

// A block size no pooled type of this binary has, for the tests of the lists themselves.
constexpr size_t kTestBlock = 4016;

}  // namespace

TEST(BlockPool, AFreedBlockIsTheNextOneTaken) {
  std::shared_ptr<Object> a = make_pooled<Object>();
  std::shared_ptr<Object> b = make_pooled<Object>();
  const void* a_at = a.get();
  const void* b_at = b.get();
  a->words[5] = 7;
  a.reset();
  b.reset();
  // Last freed, first taken: the blocks the previous op freed are the ones still in cache.
  std::shared_ptr<Object> c = make_pooled<Object>();
  std::shared_ptr<Object> d = make_pooled<Object>();
  EXPECT_EQ(c.get(), b_at);
  EXPECT_EQ(d.get(), a_at);
  EXPECT_EQ(d->words[5], 0);  // constructed afresh in the reused block
}

TEST(BlockPool, ABlockFreedOnAnotherThreadServesThatThread) {
  std::shared_ptr<Object> a = make_pooled<Object>();
  const void* a_at = a.get();
  const void* taken_there = nullptr;
  std::thread([&] {
    a.reset();  // the last owner is this thread: the block joins this (new) thread's list
    std::shared_ptr<Object> b = make_pooled<Object>();
    taken_there = b.get();
  }).join();
  EXPECT_EQ(taken_there, a_at);
}

TEST(BlockPool, KeepsAtMostTheBoundPerThread) {
  std::thread([] {
    using namespace lazy::detail;
    std::vector<void*> many;
    for (size_t i = 0; i < kMaxFreeBlocks + 10; ++i) many.push_back(take_block<kTestBlock>());
    EXPECT_EQ(free_blocks<kTestBlock>().count, 0u);
    for (void* p : many) give_block<kTestBlock>(p);
    EXPECT_EQ(free_blocks<kTestBlock>().count, kMaxFreeBlocks);
    void* again = take_block<kTestBlock>();
    EXPECT_EQ(again, many[kMaxFreeBlocks - 1]);  // the last one the list kept
    EXPECT_EQ(free_blocks<kTestBlock>().count, kMaxFreeBlocks - 1);
    give_block<kTestBlock>(again);
  }).join();
}

TEST(BlockPool, AClosedListSendsBlocksBackToTheHeap) {
  // The state of a thread's list once the thread's thread-locals are being destroyed.
  std::thread([] {
    using namespace lazy::detail;
    void* a = take_block<kTestBlock>();
    free_blocks<kTestBlock>().closed = true;
    give_block<kTestBlock>(a);
    EXPECT_EQ(free_blocks<kTestBlock>().count, 0u);
    EXPECT_EQ(free_blocks<kTestBlock>().head, nullptr);
    void* b = take_block<kTestBlock>();  // still allocates
    EXPECT_NE(b, nullptr);
    give_block<kTestBlock>(b);
  }).join();
}

TEST(InlineVector, KeepsFewElementsInlineAndMoreOnTheHeap) {
  for (size_t n : {0, 1, 5, 6, 9}) {
    std::vector<int> values;
    for (size_t i = 0; i < n; ++i) values.push_back(static_cast<int>(10 * i + 3));
    lazy::InlineVector<int, 5> v;
    v.assign(values);
    ASSERT_EQ(v.size(), n);
    EXPECT_EQ(v.empty(), n == 0);
    EXPECT_EQ(std::vector<int>(v.begin(), v.end()), values);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(v[i], values[i]);
    const bool inside = reinterpret_cast<const char*>(v.begin()) >= reinterpret_cast<char*>(&v) &&
                        reinterpret_cast<const char*>(v.begin()) < reinterpret_cast<char*>(&v + 1);
    EXPECT_EQ(inside, n <= 5) << n << " elements";
  }
}

TEST(InlineVector, MovesInAndReleasesWhatItHeldBefore) {
  auto a = std::make_shared<int>(1), b = std::make_shared<int>(2);
  std::vector<std::shared_ptr<int>> many(7, a);
  lazy::InlineVector<std::shared_ptr<int>, 3> v;
  v.assign_moved(many);         // heap
  EXPECT_EQ(a.use_count(), 8);  // the 7 moved-from copies are empty, the vector holds 7
  for (const auto& p : many) EXPECT_EQ(p, nullptr);
  std::vector<std::shared_ptr<int>> two = {b, b};
  v.assign_moved(two);  // inline now: the heap copies of `a` are released
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(b.use_count(), 3);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(*v[1], 2);
  std::vector<std::shared_ptr<int>> none;
  v.assign_moved(none);
  EXPECT_EQ(b.use_count(), 1);
  EXPECT_TRUE(v.empty());
}
