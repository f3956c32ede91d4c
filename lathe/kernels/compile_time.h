// Where compile-time seconds go below the backend (LATHE_LOGS=passes' compile breakdown):
// process-wide counters of the time spent creating oneDNN primitives, reordering weights, and in
// the layout probes that measure convolutions and reorders. The cpu backend reads them before
// and after a compile; concurrent compiles in one process mix their counts.
#pragma once

#include <cstdint>

namespace lathe::detail {

struct CompileTimeCounters {
  double primitive_s = 0;       // oneDNN primitives created outside the probes
  uint64_t primitives = 0;      // how many
  double weight_reorder_s = 0;  // weights reordered outside the probes
  uint64_t weight_reorders = 0;
  double probe_s = 0;  // layout probes (their own primitives and reorders included)
  uint64_t probes = 0;
};

CompileTimeCounters compile_time_counters();

// The difference of two readings (after - before).
CompileTimeCounters operator-(const CompileTimeCounters& a, const CompileTimeCounters& b);

// Counts the time of one primitive creation or weight reorder, unless the thread is probing.
void count_primitive_creation(double seconds);
void count_weight_reorder(double seconds);

// Marks the calling thread as probing while alive: its time counts as probe time, once (a probe
// inside a probe is not counted twice), and the primitives it creates are not counted apart.
class ProbeTimer {
 public:
  ProbeTimer();
  ~ProbeTimer();
  ProbeTimer(const ProbeTimer&) = delete;
  ProbeTimer& operator=(const ProbeTimer&) = delete;

 private:
  int64_t start_ns_ = 0;
  bool outer_ = false;
};

}  // namespace lathe::detail
