// A minimum s-t cut over a small directed graph with real capacities (Dinic's max-flow), for
// two-label choices with pairwise costs: plan_layouts labels each convolution channels-last
// (the source side) or blocked (the sink side), paying each convolution's time in its layout
// plus a reorder wherever a value crosses between the sides. Such costs are exactly a cut when
// they are written as edges (see plan_layouts.cpp), so the cheapest labelling is the minimum cut.
#pragma once

#include <vector>

namespace lathe::backend::cpu {

class MinCut {
 public:
  static constexpr int kSource = 0;
  static constexpr int kSink = 1;
  // A capacity that no finite cut pays: the edge is a hard constraint.
  static constexpr double kInfinite = 1e30;

  MinCut() : adj_(2) {}
  int add_node() {
    adj_.emplace_back();
    return static_cast<int>(adj_.size()) - 1;
  }
  int num_nodes() const { return static_cast<int>(adj_.size()); }
  // A directed edge: cut (its capacity paid) when `from` is on the source side and `to` on the
  // sink side. Capacities must be >= 0.
  void add_edge(int from, int to, double capacity);
  // The value of the minimum cut (the maximum flow); afterwards sink_side() tells the labels.
  double solve();
  // After solve(): whether the node is on the sink side of the minimum cut (the source side is
  // what the source still reaches in the residual graph; ties go to the source side).
  bool sink_side(int node) const { return !reached_[node]; }

 private:
  struct Edge {
    int to;
    int rev;  // index of the reverse edge in adj_[to]
    double cap;
  };
  bool levels();
  double push(int v, double f);
  std::vector<std::vector<Edge>> adj_;
  std::vector<int> level_, next_;
  std::vector<bool> reached_;
};

}  // namespace lathe::backend::cpu
