// conv2d throughput: lathe::conv2d on a channels-last input against a raw oneDNN primitive with
// format_tag::any (blocked) src/weights/dst, the ceiling, side by side in one run.
// Usage: bench_conv [min_seconds_per_measurement (default 0.5)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_common.h"
#include "lathe/ops/ops.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

namespace {

// Best time per call (seconds) over `rounds` rounds of at least `min_s` seconds each.
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

struct ConvCase {
  const char* name;
  int64_t N, C, H, W, O, K, stride, pad;
  int64_t groups = 1;  // C for a depthwise convolution
};

// A raw oneDNN convolution with every layout left to the primitive (blocked), inputs reordered
// once outside the timed loop.
struct RawConv {
  dnnl::convolution_forward prim;
  std::unordered_map<int, dnnl::memory> args;
  dnnl::stream stream;
  RawConv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
    using namespace dnnl;
    engine& eng = detail::dnnl_engine();
    stream = dnnl::stream(eng);
    const int64_t OH = (c.H + 2 * c.pad - c.K) / c.stride + 1;
    const int64_t OW = (c.W + 2 * c.pad - c.K) / c.stride + 1;
    auto f32 = memory::data_type::f32;
    memory::desc src({c.N, c.C, c.H, c.W}, f32, memory::format_tag::any);
    const int64_t G = c.groups;
    memory::dims wdims =
        G == 1 ? memory::dims{c.O, c.C, c.K, c.K} : memory::dims{G, c.O / G, c.C / G, c.K, c.K};
    memory::desc wei(wdims, f32, memory::format_tag::any);
    memory::desc bia({c.O}, f32, memory::format_tag::a);
    memory::desc dst({c.N, c.O, OH, OW}, f32, memory::format_tag::any);
    convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                wei, bia, dst, {c.stride, c.stride}, {0, 0}, {c.pad, c.pad},
                                {c.pad, c.pad});
    convolution_forward::primitive_desc pd(d, eng);
    prim = convolution_forward(pd);
    memory xs({{c.N, c.C, c.H, c.W}, f32, memory::format_tag::nchw}, eng,
              detail::to_contiguous(x).raw_data());
    memory ws({wdims, f32, G == 1 ? memory::format_tag::oihw : memory::format_tag::goihw}, eng,
              w.raw_data());
    memory xb(pd.src_desc(), eng), wb(pd.weights_desc(), eng), yb(pd.dst_desc(), eng);
    reorder(xs, xb).execute(stream, xs, xb);
    reorder(ws, wb).execute(stream, ws, wb);
    stream.wait();
    args = {{DNNL_ARG_SRC, xb},
            {DNNL_ARG_WEIGHTS, wb},
            {DNNL_ARG_BIAS, memory(bia, eng, b.raw_data())},
            {DNNL_ARG_DST, yb}};
    std::printf("  raw oneDNN layouts: impl %s\n", pd.impl_info_str());
  }
  void run() {
    prim.execute(stream, args);
    stream.wait();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const double min_s = argc > 1 ? std::atof(argv[1]) : 0.5;
  // Dense (resnet), depthwise (mobilenet_v2, mnasnet) and grouped (resnext50_32x4d) cases.
  const ConvCase cases[] = {{"3x3 64->64 @56", 1, 64, 56, 56, 64, 3, 1, 1},
                            {"1x1 256->64 @56", 1, 256, 56, 56, 64, 1, 1, 0},
                            {"dw3x3 144 @56", 1, 144, 56, 56, 144, 3, 1, 1, 144},
                            {"dw3x3 96 @112 s2", 1, 96, 112, 112, 96, 3, 2, 1, 96},
                            {"dw3x3 576 @14", 1, 576, 14, 14, 576, 3, 1, 1, 576},
                            {"1x1 32->192 @56", 1, 32, 56, 56, 192, 1, 1, 0},
                            {"g32 3x3 128 @56", 1, 128, 56, 56, 128, 3, 1, 1, 32},
                            {"g32 3x3 512 @14", 1, 512, 14, 14, 512, 3, 1, 1, 32}};
  std::printf("conv2d, batch 1, f32, forward inference; GFLOP/s (best of 20 interleaved rounds)\n");
  std::printf("%-18s %7s | %12s %12s %7s | %12s %12s %7s\n", "", "", "wall:", "", "",
              "CPU time:", "per core", "");
  std::printf("%-18s %7s | %12s %12s %7s | %12s %12s %7s\n", "conv", "threads", "lathe NHWC",
              "oneDNN any", "ratio", "lathe NHWC", "oneDNN any", "ratio");
  for (const ConvCase& c : cases) {
    manual_seed(1);
    Tensor x = detail::to_channels_last_copy(randn({c.N, c.C, c.H, c.W}));
    Tensor w = randn({c.O, c.C / c.groups, c.K, c.K});
    Tensor b = randn({c.O});
    const int64_t OH = (c.H + 2 * c.pad - c.K) / c.stride + 1;
    const int64_t OW = (c.W + 2 * c.pad - c.K) / c.stride + 1;
    const double flops = 2.0 * c.N * c.O * OH * OW * (c.C / c.groups) * c.K * c.K;
    for (int nt : {1, 2}) {
      set_num_threads(nt);
      RawConv raw(c, x, w, b);
      auto t =
          best_times({[&] {
                        conv2d(x, w, b, {c.stride, c.stride}, {c.pad, c.pad}, {1, 1}, c.groups);
                      },
                      [&] { raw.run(); }},
                     min_s);
      const double tl = t.wall[0], tr = t.wall[1];
      const double cl = t.cpu[0], cr = t.cpu[1];  // CPU seconds per call, all threads
      std::printf("%-18s %7d | %12.1f %12.1f %6.1f%% | %12.1f %12.1f %6.1f%%\n", c.name, nt,
                  flops / tl * 1e-9, flops / tr * 1e-9, 100.0 * tr / tl, flops / cl * 1e-9,
                  flops / cr * 1e-9, 100.0 * cr / cl);
      std::fflush(stdout);
    }
  }
  // Per-call overhead (dispatch, shape rule, cache lookups, allocation) on a conv so small that
  // the kernel itself costs almost nothing.
  {
    set_num_threads(1);
    ConvCase c{"1x1 16->16 @4", 1, 16, 4, 4, 16, 1, 1, 0};
    Tensor x = detail::to_channels_last_copy(randn({c.N, c.C, c.H, c.W}));
    Tensor w = randn({c.O, c.C, 1, 1});
    Tensor b = randn({c.O});
    RawConv raw(c, x, w, b);
    auto t = best_times({[&] { conv2d(x, w, b); }, [&] { raw.run(); }}, min_s);
    std::printf("per-call time on %s, 1 thread: lathe %.2f us, raw oneDNN %.2f us (CPU time)\n",
                c.name, t.cpu[0] * 1e6, t.cpu[1] * 1e6);
  }
  return 0;
}
