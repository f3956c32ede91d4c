// MinCut (Dinic's max-flow): the minimum cut's value and labels, checked against enumerating every
// labelling of small graphs with the same cost structure plan_layouts builds (unary costs per
// label, a cost when neighbours differ).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lathe/backend/cpu/min_cut.h"

using lathe::backend::cpu::MinCut;

namespace {

// A two-label problem: node i costs blk[i] on the sink side, cl[i] on the source side, and
// pair[i][j] when i is on the source side and j on the sink side.
struct Problem {
  std::vector<double> blk, cl;
  std::vector<std::vector<double>> pair;
  double cost(unsigned mask) const {  // bit i set: node i on the sink side
    double c = 0;
    const size_t n = blk.size();
    for (size_t i = 0; i < n; ++i) c += (mask >> i & 1) ? blk[i] : cl[i];
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j)
        if (!(mask >> i & 1) && (mask >> j & 1)) c += pair[i][j];
    return c;
  }
};

}  // namespace

TEST(MinCut, AChainTakesTheCheapRegionAndPaysItsTwoEdges) {
  // Nodes 1-4 in a chain; the middle two are cheap on the sink side, the ends on the source
  // side; crossing between neighbours costs 1 each way.
  MinCut cut;
  const double blk[] = {5, 1, 1, 5}, cl[] = {1, 5, 5, 1};
  int id[4];
  for (int i = 0; i < 4; ++i) {
    id[i] = cut.add_node();
    cut.add_edge(MinCut::kSource, id[i], blk[i]);
    cut.add_edge(id[i], MinCut::kSink, cl[i]);
  }
  for (int i = 0; i + 1 < 4; ++i) {
    cut.add_edge(id[i], id[i + 1], 1);
    cut.add_edge(id[i + 1], id[i], 1);
  }
  EXPECT_DOUBLE_EQ(cut.solve(), 6);  // 1 + 1 + 1 + 1 unary, two crossings
  EXPECT_FALSE(cut.sink_side(id[0]));
  EXPECT_TRUE(cut.sink_side(id[1]));
  EXPECT_TRUE(cut.sink_side(id[2]));
  EXPECT_FALSE(cut.sink_side(id[3]));
}

TEST(MinCut, InfiniteEdgesAreHardConstraints) {
  // Node a would rather be on the sink side, b on the source side; a -> b infinite forbids
  // (a source, b sink) only, and b -> a forbids (b source, a sink): with both, they go together.
  MinCut cut;
  const int a = cut.add_node(), b = cut.add_node();
  cut.add_edge(MinCut::kSource, a, 1);
  cut.add_edge(a, MinCut::kSink, 4);
  cut.add_edge(MinCut::kSource, b, 2);
  cut.add_edge(b, MinCut::kSink, 1);
  cut.add_edge(b, a, MinCut::kInfinite);
  EXPECT_DOUBLE_EQ(cut.solve(), 3);  // both on the sink side: 1 + 2
  EXPECT_TRUE(cut.sink_side(a));
  EXPECT_TRUE(cut.sink_side(b));
}

TEST(MinCut, EqualsTheBestOfEveryLabellingOnRandomGraphs) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + trial % 7;
    Problem p;
    p.pair.assign(n, std::vector<double>(n, 0));
    MinCut cut;
    std::vector<int> id;
    for (size_t i = 0; i < n; ++i) {
      p.blk.push_back(u(rng));
      p.cl.push_back(u(rng));
      id.push_back(cut.add_node());
      cut.add_edge(MinCut::kSource, id[i], p.blk[i]);
      cut.add_edge(id[i], MinCut::kSink, p.cl[i]);
    }
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j)
        if (i != j && u(rng) < 0.4) {
          p.pair[i][j] = u(rng);
          cut.add_edge(id[i], id[j], p.pair[i][j]);
        }
    double best = INFINITY;
    for (unsigned mask = 0; mask < (1u << n); ++mask) best = std::min(best, p.cost(mask));
    const double got = cut.solve();
    EXPECT_NEAR(got, best, 1e-9) << "trial " << trial;
    unsigned labels = 0;
    for (size_t i = 0; i < n; ++i) labels |= cut.sink_side(id[i]) ? 1u << i : 0u;
    EXPECT_NEAR(p.cost(labels), best, 1e-9) << "the labels realize the cut, trial " << trial;
  }
}

TEST(MinCut, BadEdgesAreErrors) {
  MinCut cut;
  const int a = cut.add_node();
  EXPECT_THROW(cut.add_edge(a, 7, 1), std::exception);
  EXPECT_THROW(cut.add_edge(a, MinCut::kSink, -1), std::exception);
}
