#include "lathe/core/threads.h"

#include <omp.h>

#include <atomic>

#include "lathe/core/core_options.h"
#include "lathe/core/cpu_share.h"
#include "lathe/core/error.h"

namespace lathe {
namespace {
std::atomic<int> g_threads{0};
thread_local int t_override = 0;  // ScopedThreadCount's count on this thread, 0: none
}  // namespace

namespace detail {
void apply_num_threads(int n) {
  omp_set_num_threads(n);
  g_threads.store(n, std::memory_order_relaxed);
}
}  // namespace detail

int num_threads() {
  if (t_override > 0) return t_override;
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    const int configured = core_options().num_threads;
    n = configured > 0 ? configured : process_cpu_share().threads;
    omp_set_num_threads(n);
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

ScopedThreadCount::ScopedThreadCount(int n) : previous_(t_override) {
  if (n > 0) t_override = n;
}

ScopedThreadCount::~ScopedThreadCount() { t_override = previous_; }

std::string num_threads_reason() {
  const int configured = core_options().num_threads;
  if (configured > 0)
    return detail::str(num_threads(), " threads: set by LATHE_NUM_THREADS or set_num_threads");
  return process_cpu_share().reason;
}

void set_num_threads(int n) {
  LATHE_CHECK(n > 0, "[threads] thread count must be positive, got ", n);
  CoreOptions o = core_options();
  o.num_threads = n;
  set_core_options(o);
}

}  // namespace lathe
