#include "lathe/core/threads.h"

#include <omp.h>

#include <atomic>
#include <thread>

#include "lathe/core/core_options.h"
#include "lathe/core/error.h"

namespace lathe {
namespace {
std::atomic<int> g_threads{0};
}  // namespace

namespace detail {
int hardware_threads() {
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

void apply_num_threads(int n) {
  omp_set_num_threads(n);
  g_threads.store(n, std::memory_order_relaxed);
}
}  // namespace detail

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    const int configured = core_options().num_threads;
    n = configured > 0 ? configured : detail::hardware_threads();
    omp_set_num_threads(n);
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int n) {
  LATHE_CHECK(n > 0, "[threads] thread count must be positive, got ", n);
  CoreOptions o = core_options();
  o.num_threads = n;
  set_core_options(o);
}

}  // namespace lathe
