// Dynamic work sharing for Lathe's own loops: the range is cut into chunks whose boundaries
// depend only on its length and the chunk size (never on the thread count), and the threads,
// the calling one among them, claim chunks from a shared counter until none is left. A thread
// the OS has descheduled (another process on its core) then delays only the chunk it holds,
// where a static split makes every call wait for its whole share. A kernel whose chunks write
// disjoint outputs, or reduce within a chunk and combine the chunks in order afterwards, gives
// the same bits at any thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace lathe::kernels {

// Chunks per thread a loop aims for: enough that a late thread's chunk is a small part of the
// call, few enough that claiming one (an atomic add) costs nothing next to it.
constexpr int64_t kChunksPerThread = 8;

// The chunk size for `n` items on `threads` threads, at least `min_chunk` items (a multiple of
// `align`): n / (threads * kChunksPerThread) rounded up.
inline int64_t chunk_size(int64_t n, int threads, int64_t min_chunk = 1, int64_t align = 1) {
  const int64_t want = (n + threads * kChunksPerThread - 1) / (threads * kChunksPerThread);
  int64_t c = std::max<int64_t>({want, min_chunk, 1});
  return (c + align - 1) / align * align;
}

// Runs f(begin, end) over [0, n) in chunks of `chunk` items (the last one shorter) on up to
// `threads` threads (OpenMP's team), the caller working too. threads <= 1 runs the same chunks
// in order on the caller.
template <class F>
void parallel_chunks(int64_t n, int64_t chunk, int threads, F&& f) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int team = static_cast<int>(std::min<int64_t>(std::max(threads, 1), chunks));
  if (team <= 1) {
    for (int64_t c = 0; c < chunks; ++c) f(c * chunk, std::min(n, (c + 1) * chunk));
    return;
  }
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(team)
  {
    for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
         c = next.fetch_add(1, std::memory_order_relaxed))
      f(c * chunk, std::min(n, (c + 1) * chunk));
  }
}

// parallel_chunks for a loop over items that are independent of each other: f(i) per item.
template <class F>
void parallel_items(int64_t n, int threads, F&& f) {
  parallel_chunks(n, chunk_size(n, std::max(threads, 1)), threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

}  // namespace lathe::kernels
