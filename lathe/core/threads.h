// The number of threads Lathe's own loops and oneDNN use: CoreOptions::num_threads
// (lathe/core/core_options.h; LATHE_NUM_THREADS), else the process's CPU share
// (lathe/core/cpu_share.h: OMP_NUM_THREADS, the affinity mask, the cgroup CPU quota).
#pragma once

#include <cstdint>
#include <string>

namespace lathe {

// Threads for parallel loops (core_options().num_threads at first use, else the CPU share;
// applied to OpenMP).
int num_threads();
// Why num_threads() is what it is, one line ("2 threads: affinity 2 of 2 cores, no cgroup CPU
// quota"), for LATHE_LOGS and lathe-bench.
std::string num_threads_reason();
// Overrides the thread count for this process (also sets OpenMP's and core_options()'s).
void set_num_threads(int n);

// Makes num_threads() return `n` on the calling thread for the scope (a compiled call that runs
// on fewer threads than the process's count); n <= 0 changes nothing. Nests.
class ScopedThreadCount {
 public:
  explicit ScopedThreadCount(int n);
  ~ScopedThreadCount();
  ScopedThreadCount(const ScopedThreadCount&) = delete;
  ScopedThreadCount& operator=(const ScopedThreadCount&) = delete;

 private:
  int previous_;
};

// Elements below which elementwise loops stay single-threaded.
constexpr int64_t kParallelGrain = 32768;

namespace detail {
// Makes `n` (> 0) the thread count in effect, for OpenMP too (set_core_options uses it).
void apply_num_threads(int n);
}  // namespace detail

}  // namespace lathe
