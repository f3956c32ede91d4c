#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "lathe/base/error.h"
#include "lathe/data/sampler.h"

using namespace lathe::data;

TEST(Sampler, SequentialIsInOrderEveryEpoch) {
  SequentialSampler s(5);
  EXPECT_EQ(s.indices(0), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.indices(3), s.indices(0));
  EXPECT_EQ(s.size(), 5);
}

TEST(Sampler, ShuffleIsAPermutationFixedBySeedAndEpoch) {
  ShuffleSampler a(100, 7), b(100, 7), c(100, 8);
  std::vector<int64_t> e0 = a.indices(0);
  EXPECT_EQ(e0, b.indices(0));
  EXPECT_NE(e0, a.indices(1));
  EXPECT_NE(e0, c.indices(0));
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, SequentialSampler(100).indices(0));
  EXPECT_NE(e0, sorted);
}

TEST(Sampler, DistributedShardsAreDisjointCoverAndPadToEqualLength) {
  const int64_t n = 10, world = 4;  // 10 = 3 + 3 + 2 + 2: padded to 12 as PyTorch does
  std::vector<int64_t> all;
  for (int64_t r = 0; r < world; ++r) {
    DistributedSampler s(n, {r, world, true, 3, false});
    std::vector<int64_t> mine = s.indices(2);
    EXPECT_EQ(static_cast<int64_t>(mine.size()), 3);
    EXPECT_EQ(s.size(), 3);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::set<int64_t> unique(all.begin(), all.end());
  EXPECT_EQ(static_cast<int64_t>(unique.size()), n);  // covers everything
  EXPECT_EQ(all.size(), 12u);                         // two padded repeats
  // The padding repeats the start of the epoch's permutation.
  std::vector<int64_t> perm = seeded_permutation(n, 3, 2);
  DistributedSampler r2(n, {2, world, true, 3, false}), r3(n, {3, world, true, 3, false});
  EXPECT_EQ(r2.indices(2).back(), perm[0]);
  EXPECT_EQ(r3.indices(2).back(), perm[1]);
}

TEST(Sampler, DistributedSequentialMatchesPyTorchLayout) {
  DistributedSampler r1(5, {1, 2, false, 0, false});
  EXPECT_EQ(r1.indices(0), (std::vector<int64_t>{1, 3, 0}));
  DistributedSampler d1(5, {1, 2, false, 0, true});
  EXPECT_EQ(d1.indices(0), (std::vector<int64_t>{1, 3}));
}

TEST(Sampler, DistributedRanksAgreeOnTheEpochOrder) {
  std::vector<int64_t> a, b;
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<int64_t> s = DistributedSampler(8, {r, 2, true, 11, false}).indices(5);
    (r == 0 ? a : b) = s;
  }
  for (int64_t i : a) EXPECT_EQ(std::count(b.begin(), b.end(), i), 0);
}

TEST(Sampler, DistributedRejectsABadRank) {
  try {
    DistributedSampler s(10, {2, 2, true, 0, false});
    FAIL() << "expected an error";
  } catch (const lathe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 is outside [0, 2)"), std::string::npos)
        << e.what();
  }
}
