#include "lathe/backend/cpu/min_cut.h"

#include <algorithm>
#include <deque>

#include "lathe/base/error.h"

namespace lathe::backend::cpu {
namespace {
// Residual capacities below this count as saturated (sums of seconds-sized doubles).
constexpr double kEps = 1e-15;
}  // namespace

void MinCut::add_edge(int from, int to, double capacity) {
  LATHE_CHECK(from >= 0 && from < num_nodes() && to >= 0 && to < num_nodes() && capacity >= 0,
              "[min_cut] bad edge ", from, " -> ", to, " (", num_nodes(), " nodes), capacity ",
              capacity);
  if (from == to || capacity <= 0) return;
  const int rf = static_cast<int>(adj_[to].size()), rt = static_cast<int>(adj_[from].size());
  adj_[from].push_back({to, rf, std::min(capacity, kInfinite)});
  adj_[to].push_back({from, rt, 0.0});
}

bool MinCut::levels() {
  level_.assign(adj_.size(), -1);
  std::deque<int> q{kSource};
  level_[kSource] = 0;
  while (!q.empty()) {
    const int v = q.front();
    q.pop_front();
    for (const Edge& e : adj_[v])
      if (e.cap > kEps && level_[e.to] < 0) {
        level_[e.to] = level_[v] + 1;
        q.push_back(e.to);
      }
  }
  return level_[kSink] >= 0;
}

double MinCut::push(int v, double f) {
  if (v == kSink) return f;
  for (int& i = next_[v]; i < static_cast<int>(adj_[v].size()); ++i) {
    Edge& e = adj_[v][i];
    if (e.cap <= kEps || level_[e.to] != level_[v] + 1) continue;
    const double got = push(e.to, std::min(f, e.cap));
    if (got > 0) {
      e.cap -= got;
      adj_[e.to][e.rev].cap += got;
      return got;
    }
  }
  return 0;
}

double MinCut::solve() {
  double flow = 0;
  while (levels()) {
    next_.assign(adj_.size(), 0);
    while (true) {
      const double f = push(kSource, kInfinite);
      if (f <= 0) break;
      flow += f;
    }
  }
  reached_.assign(adj_.size(), false);
  std::deque<int> q{kSource};
  reached_[kSource] = true;
  while (!q.empty()) {
    const int v = q.front();
    q.pop_front();
    for (const Edge& e : adj_[v])
      if (e.cap > kEps && !reached_[e.to]) {
        reached_[e.to] = true;
        q.push_back(e.to);
      }
  }
  return flow;
}

}  // namespace lathe::backend::cpu
