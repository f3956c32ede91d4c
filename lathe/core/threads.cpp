#include "lathe/core/threads.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "lathe/core/error.h"

namespace lathe {
namespace {
std::atomic<int> g_threads{0};

int initial_threads() {
  if (const char* env = std::getenv("LATHE_NUM_THREADS")) {
    try {
      int n = std::stoi(env);
      if (n > 0) return n;
    } catch (const std::exception&) {
    }
    throw Error(detail::str("[threads] LATHE_NUM_THREADS='", env, "' is not a positive integer"));
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}
}  // namespace

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = initial_threads();
    omp_set_num_threads(n);
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int n) {
  LATHE_CHECK(n > 0, "[threads] thread count must be positive, got ", n);
  omp_set_num_threads(n);
  g_threads.store(n, std::memory_order_relaxed);
}

}  // namespace lathe
