// matmul throughput: 128x768 @ 768x3072 (a BERT-base FFN layer at sequence 128) through
// lathe::matmul (both operands plain row-major), lathe::linear (weight [3072,768], reordered once
// and cached) and a raw oneDNN matmul with a blocked (format_tag::any) weight, the ceiling.
// Usage: bench_matmul [min_seconds_per_measurement (default 0.5)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/ops/ops.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

namespace {

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best wall time and best process CPU time per call (seconds) of each function, measured in
// interleaved rounds so load from other processes on a shared machine hits them alike; `min_s`
// seconds in total each. CPU time counts only while this process runs: on a machine shared with
// other jobs it shows the kernels' own speed (per core: divide by the thread count).
struct Times {
  std::vector<double> wall, cpu;
};
Times best_times(const std::vector<std::function<void()>>& fs, double min_s, int rounds = 20) {
  for (const auto& f : fs)
    for (int i = 0; i < 3; ++i) f();  // warm up (primitive creation, weight reorder)
  Times best{std::vector<double>(fs.size(), 1e30), std::vector<double>(fs.size(), 1e30)};
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < fs.size(); ++k) {
      int64_t iters = 0;
      auto t0 = Clock::now();
      double c0 = cpu_seconds();
      double el = 0;
      do {
        fs[k]();
        ++iters;
        el = std::chrono::duration<double>(Clock::now() - t0).count();
      } while (el < min_s / rounds);
      double n = static_cast<double>(iters);
      best.wall[k] = std::min(best.wall[k], el / n);
      best.cpu[k] = std::min(best.cpu[k], (cpu_seconds() - c0) / n);
    }
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
  std::printf("matmul %ldx%ld @ %ldx%ld, f32; GFLOP/s (best of 20 interleaved rounds)\n", M, K, K,
              N);
  std::printf("wall GFLOP/s; 'per core (CPU)' divides the flops by the process CPU time\n");
  std::printf("%7s %14s %14s %14s %10s %10s %16s\n", "threads", "lathe matmul", "lathe linear",
              "oneDNN any", "matmul/core", "ratio mm", "per core (CPU)");
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

    auto times = best_times({[&] { lathe::matmul(a, b); }, [&] { linear(a, w); },
                             [&] {
                               raw.execute(s, args);
                               s.wait();
                             }},
                            min_s);
    const double tm = times.wall[0], tl = times.wall[1], tr = times.wall[2];
    std::printf("%7d %14.1f %14.1f %14.1f %10.1f %9.1f%% %16.1f\n", t, flops / tm * 1e-9,
                flops / tl * 1e-9, flops / tr * 1e-9, flops / tm * 1e-9 / t, 100.0 * tr / tm,
                flops / times.cpu[0] * 1e-9);
    std::fflush(stdout);
  }
  return 0;
}
