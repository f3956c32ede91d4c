// Eager elementwise bandwidth and per-op dispatch overhead.
//   bench_eager_overhead [--threads N]
// Prints: add of two 16M-float tensors (GB/s, counting 2 reads + 1 write) next to a plain memcpy
// of the same bytes (GB/s, read + write) in the same run, and the time of a 1-element add.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/ops/ops.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

template <class F>
double median_seconds(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--threads") set_num_threads(std::stoi(argv[i + 1]));
  const int64_t n = 16 << 20;
  manual_seed(0);
  Tensor a = rand({n}), b = rand({n});
  Tensor out = empty({n});
  std::vector<char> src(n * 4 * 2), dst(n * 4 * 2);
  std::memset(src.data(), 1, src.size());
  std::memset(dst.data(), 0, dst.size());
  std::printf("threads: %d\n", num_threads());
  // Interleave the two so both see the same machine state.
  std::vector<double> t_add, t_copy;
  for (int r = 0; r < 15; ++r) {
    t_add.push_back(median_seconds([&] { Tensor c = a + b; }, 1));
    // memcpy of as many bytes as add moves (2 reads + 1 write = 3 x 64 MiB): copy 96 MiB
    // (read 96 + write 96 = 192 MiB).
    t_copy.push_back(median_seconds(
        [&] {
          const size_t bytes = n * 4 * 3 / 2;
#pragma omp parallel for num_threads(num_threads())
          for (int t = 0; t < num_threads(); ++t) {
            size_t chunk = bytes / num_threads();
            std::memcpy(dst.data() + t * chunk, src.data() + t * chunk, chunk);
          }
        },
        1));
  }
  std::sort(t_add.begin(), t_add.end());
  std::sort(t_copy.begin(), t_copy.end());
  double add_gbs = 3.0 * n * 4 / t_add[t_add.size() / 2] / 1e9;
  double copy_gbs = 3.0 * n * 4 / t_copy[t_copy.size() / 2] / 1e9;
  std::printf("add 16M f32:      %.2f ms  %.1f GB/s\n", t_add[t_add.size() / 2] * 1e3, add_gbs);
  std::printf("memcpy same bytes: %.2f ms  %.1f GB/s\n", t_copy[t_copy.size() / 2] * 1e3,
              copy_gbs);
  std::printf("add / memcpy bandwidth: %.0f%%\n", 100.0 * add_gbs / copy_gbs);

  Tensor x = rand({1}), y = rand({1});
  const int iters = 200000;
  for (int i = 0; i < 1000; ++i) Tensor z = x + y;
  double t = median_seconds(
      [&] {
        for (int i = 0; i < iters; ++i) Tensor z = x + y;
      },
      7);
  std::printf("1-element add (dispatch + shape rule + alloc + kernel): %.0f ns per op\n",
              t / iters * 1e9);
  return 0;
}
