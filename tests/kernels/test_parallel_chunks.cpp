// Dynamic work sharing (lathe/kernels/parallel_chunks.h): every item runs once, the chunks do
// not depend on the thread count, and the kernels built on it give the same bits on 1, 2 and 3
// threads as the serial loop: strided copies and elementwise maps, softmax, layer norm, row
// reductions, batch-norm moments (partial sums over fixed blocks, added in order).
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/tensor.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/batch_norm.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/norm.h"
#include "lathe/kernels/parallel_chunks.h"
#include "lathe/kernels/reduce.h"

namespace lathe::kernels {
namespace {

struct ThreadCount {
  int before = num_threads();
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(before); }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && a.is_contiguous() &&
         b.is_contiguous() &&
         std::memcmp(a.raw_data(), b.raw_data(),
                     static_cast<size_t>(a.numel()) * itemsize(a.dtype())) == 0;
}

Tensor random_tensor(const Shape& sizes, uint64_t seed) {
  Generator g(seed);
  Tensor t = empty(sizes, DType::f32);
  g.fill_normal(t, 0.0, 1.0);
  return t;
}

TEST(ParallelChunks, EveryItemOnceInChunksThatIgnoreTheThreadCount) {
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    std::set<std::pair<int64_t, int64_t>> first;
    for (int threads : {1, 2, 3, 8}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex mu;
      std::set<std::pair<int64_t, int64_t>> chunks;
      parallel_chunks(n, 97, threads, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        chunks.insert({b, e});
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
      if (threads == 1) first = chunks;
      EXPECT_EQ(chunks, first) << "n=" << n << " threads=" << threads;
    }
  }
}

TEST(ParallelChunks, CallerWorksAndALateThreadOnlyDelaysItsChunk) {
  // One thread sleeps in its first chunk; the others (the caller among them) take the rest.
  std::atomic<int> slept{0};
  std::vector<int> owner(64, -1);
  parallel_chunks(64, 1, 2, [&](int64_t b, int64_t) {
    if (omp_get_thread_num() == 1 && slept.exchange(1) == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    owner[b] = omp_get_thread_num();
  });
  int by_caller = 0;
  for (int o : owner) by_caller += o == 0;
  EXPECT_GE(by_caller, 60) << "the caller takes the chunks while the other thread sleeps";
}

TEST(ParallelChunks, ChunkSize) {
  EXPECT_EQ(chunk_size(1600, 2), 100);
  EXPECT_EQ(chunk_size(10, 2), 1);
  EXPECT_EQ(chunk_size(10, 2, 16, 16), 16);
  EXPECT_EQ(chunk_size(100000, 2, 16, 16) % 16, 0);
}

// Runs `f` on 1, 2 and 3 threads and compares the bits of what it returns.
template <class F>
void expect_same_at_any_thread_count(F f, const char* what) {
  std::vector<Tensor> ref;
  {
    ThreadCount one(1);
    ref = f();
  }
  for (int threads : {2, 3}) {
    ThreadCount t(threads);
    std::vector<Tensor> got = f();
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_TRUE(same_bits(got[i], ref[i])) << what << " output " << i << " on " << threads;
  }
}

TEST(ParallelChunks, KernelsGiveTheSameBitsOnAnyThreadCount) {
  const Tensor x = random_tensor({64, 3, 33, 17}, 1);  // 107k elements
  const Tensor row = random_tensor({1, 200003}, 2);    // one long row
  // Strided rows: a transposed view of 300 x 400 values.
  const Tensor dense = random_tensor({300, 400}, 3);
  const Tensor xt = empty_strided({400, 300}, {1, 400}, DType::f32);
  std::memcpy(xt.raw_data(), dense.raw_data(), 300 * 400 * sizeof(float));
  expect_same_at_any_thread_count(
      [&] {
        Tensor a = empty(x.sizes(), DType::f32), b = empty(row.sizes(), DType::f32);
        Tensor c = empty(xt.sizes(), DType::f32);
        copy(a, x);
        copy(b, row);
        copy(c, xt);
        Tensor m = empty(xt.sizes(), DType::f32);
        map2<float, float>(m, xt, xt, [](float u, float v) { return u * v + 1.0f; });
        return std::vector<Tensor>{a, b, c, m};
      },
      "copy and map2");
  expect_same_at_any_thread_count(
      [&] {
        const int64_t M = 64 * 3 * 33, R = 17;
        Tensor s = empty(x.sizes(), DType::f32), l = empty(x.sizes(), DType::f32);
        Tensor n = empty(x.sizes(), DType::f32);
        softmax_rows(x, s, M, R, false);
        softmax_rows(x, l, M, R, true);
        layer_norm_rows(x, Tensor(), Tensor(), n, M, R, 1e-5);
        return std::vector<Tensor>{s, l, n};
      },
      "softmax and layer norm");
  expect_same_at_any_thread_count(
      [&] {
        return std::vector<Tensor>{reduce(x, {3}, false, ReduceKind::sum, DType::f32),
                                   reduce(x, {2, 3}, true, ReduceKind::mean, DType::f32),
                                   reduce(x, {0}, false, ReduceKind::amax, DType::f32)};
      },
      "reductions");
  expect_same_at_any_thread_count(
      [&] {
        std::vector<double> mean, var;
        channel_moments(x, mean, var);
        Tensor m = empty({static_cast<int64_t>(mean.size())}, DType::f64);
        Tensor v = empty({static_cast<int64_t>(var.size())}, DType::f64);
        std::memcpy(m.raw_data(), mean.data(), mean.size() * sizeof(double));
        std::memcpy(v.raw_data(), var.data(), var.size() * sizeof(double));
        Tensor out = empty(x.sizes(), DType::f32);
        channel_affine(x, mean, var, out);
        return std::vector<Tensor>{m, v, out};
      },
      "batch-norm moments");
}

}  // namespace
}  // namespace lathe::kernels
