// matmul throughput: 128x768 @ 768x3072 (a BERT-base FFN layer at sequence 128) through
// lathe::matmul (both operands plain row-major), lathe::linear (weight [3072,768], reordered once
// and cached) and a raw oneDNN matmul with a blocked (format_tag::any) weight, the ceiling.
// Usage: bench_matmul [min_seconds_per_measurement (default 0.5)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/ops/ops.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

namespace {

double best_time(const std::function<void()>& f, double min_s, int rounds = 5) {
  for (int i = 0; i < 3; ++i) f();
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    int64_t iters = 0;
    auto t0 = Clock::now();
    double el = 0;
    do {
      f();
      ++iters;
      el = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (el < min_s / rounds);
    best = std::min(best, el / static_cast<double>(iters));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const double min_s = argc > 1 ? std::atof(argv[1]) : 0.5;
  const int64_t M = 128, K = 768, N = 3072;
  const double flops = 2.0 * M * K * N;
  manual_seed(1);
  Tensor a = randn({M, K});
  Tensor b = randn({K, N});
  Tensor w = randn({N, K});  // linear weight: y = a @ w^T
  std::printf("matmul %ldx%ld @ %ldx%ld, f32; GFLOP/s (best of 5 rounds)\n", M, K, K, N);
  std::printf("%7s %14s %14s %14s %10s %10s\n", "threads", "lathe matmul", "lathe linear",
              "oneDNN any", "matmul/core", "ratio mm");
  for (int t : {1, 2}) {
    set_num_threads(t);
    using dnnl::memory;
    using dnnl::reorder;
    dnnl::engine& eng = detail::dnnl_engine();
    dnnl::stream s(eng);
    auto f32 = memory::data_type::f32;
    memory::desc ad({M, K}, f32, memory::format_tag::ab);
    memory::desc bd({K, N}, f32, memory::format_tag::any);
    memory::desc cd({M, N}, f32, memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), eng);
    dnnl::matmul raw(pd);
    memory bu({{K, N}, f32, memory::format_tag::ab}, eng, b.raw_data());
    memory bb(pd.weights_desc(), eng), cm(cd, eng);
    reorder(bu, bb).execute(s, bu, bb);
    s.wait();
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(ad, eng, a.raw_data())}, {DNNL_ARG_WEIGHTS, bb}, {DNNL_ARG_DST, cm}};

    double tm = best_time([&] { lathe::matmul(a, b); }, min_s);
    double tl = best_time([&] { linear(a, w); }, min_s);
    double tr = best_time(
        [&] {
          raw.execute(s, args);
          s.wait();
        },
        min_s);
    tm = std::min(tm, best_time([&] { lathe::matmul(a, b); }, min_s));
    std::printf("%7d %14.1f %14.1f %14.1f %10.1f %9.1f%%\n", t, flops / tm * 1e-9,
                flops / tl * 1e-9, flops / tr * 1e-9, flops / tm * 1e-9 / t, 100.0 * tr / tm);
    std::fflush(stdout);
  }
  return 0;
}
