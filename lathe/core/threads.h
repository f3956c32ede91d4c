// The number of threads Lathe's own loops and oneDNN use: LATHE_NUM_THREADS, else all cores.
#pragma once

#include <cstdint>

namespace lathe {

// Threads for parallel loops (read once from LATHE_NUM_THREADS; applied to OpenMP).
int num_threads();
// Overrides the thread count for this process (also sets OpenMP's).
void set_num_threads(int n);

// Elements below which elementwise loops stay single-threaded.
constexpr int64_t kParallelGrain = 32768;

}  // namespace lathe
