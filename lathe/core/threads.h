// The number of threads Lathe's own loops and oneDNN use: CoreOptions::num_threads
// (lathe/core/core_options.h; LATHE_NUM_THREADS), else all cores.
#pragma once

#include <cstdint>

namespace lathe {

// Threads for parallel loops (core_options().num_threads at first use, else all cores; applied
// to OpenMP).
int num_threads();
// Overrides the thread count for this process (also sets OpenMP's and core_options()'s).
void set_num_threads(int n);

// Elements below which elementwise loops stay single-threaded.
constexpr int64_t kParallelGrain = 32768;

namespace detail {
// The cores this machine has (at least 1).
int hardware_threads();
// Makes `n` (> 0) the thread count in effect, for OpenMP too (set_core_options uses it).
void apply_num_threads(int n);
}  // namespace detail

}  // namespace lathe
