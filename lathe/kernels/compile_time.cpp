#include "lathe/kernels/compile_time.h"

#include <atomic>
#include <chrono>

namespace lathe::detail {
namespace {

std::atomic<int64_t> g_primitive_ns{0}, g_reorder_ns{0}, g_probe_ns{0};
std::atomic<uint64_t> g_primitives{0}, g_reorders{0}, g_probes{0};
thread_local int t_probe_depth = 0;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t to_ns(double s) { return static_cast<int64_t>(s * 1e9); }

}  // namespace

CompileTimeCounters compile_time_counters() {
  CompileTimeCounters c;
  c.primitive_s = 1e-9 * static_cast<double>(g_primitive_ns.load(std::memory_order_relaxed));
  c.primitives = g_primitives.load(std::memory_order_relaxed);
  c.weight_reorder_s = 1e-9 * static_cast<double>(g_reorder_ns.load(std::memory_order_relaxed));
  c.weight_reorders = g_reorders.load(std::memory_order_relaxed);
  c.probe_s = 1e-9 * static_cast<double>(g_probe_ns.load(std::memory_order_relaxed));
  c.probes = g_probes.load(std::memory_order_relaxed);
  return c;
}

CompileTimeCounters operator-(const CompileTimeCounters& a, const CompileTimeCounters& b) {
  CompileTimeCounters d;
  d.primitive_s = a.primitive_s - b.primitive_s;
  d.primitives = a.primitives - b.primitives;
  d.weight_reorder_s = a.weight_reorder_s - b.weight_reorder_s;
  d.weight_reorders = a.weight_reorders - b.weight_reorders;
  d.probe_s = a.probe_s - b.probe_s;
  d.probes = a.probes - b.probes;
  return d;
}

void count_primitive_creation(double seconds) {
  if (t_probe_depth > 0) return;
  g_primitive_ns.fetch_add(to_ns(seconds), std::memory_order_relaxed);
  g_primitives.fetch_add(1, std::memory_order_relaxed);
}

void count_weight_reorder(double seconds) {
  if (t_probe_depth > 0) return;
  g_reorder_ns.fetch_add(to_ns(seconds), std::memory_order_relaxed);
  g_reorders.fetch_add(1, std::memory_order_relaxed);
}

ProbeTimer::ProbeTimer() : outer_(t_probe_depth++ == 0) {
  if (outer_) start_ns_ = now_ns();
}

ProbeTimer::~ProbeTimer() {
  --t_probe_depth;
  if (!outer_) return;
  g_probe_ns.fetch_add(now_ns() - start_ns_, std::memory_order_relaxed);
  g_probes.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace lathe::detail
