// conv2d throughput: lathe::conv2d on a channels-last input against a raw oneDNN primitive with
// format_tag::any (blocked) src/weights/dst, the ceiling, side by side in one run.
// Usage: bench_conv [min_seconds_per_measurement (default 0.5)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
double best_time(const std::function<void()>& f, double min_s, int rounds = 5) {
  for (int i = 0; i < 3; ++i) f();  // warm up (primitive creation, weight reorder)
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

struct ConvCase {
  const char* name;
  int64_t N, C, H, W, O, K, stride, pad;
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
    memory::desc wei({c.O, c.C, c.K, c.K}, f32, memory::format_tag::any);
    memory::desc bia({c.O}, f32, memory::format_tag::a);
    memory::desc dst({c.N, c.O, OH, OW}, f32, memory::format_tag::any);
    convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                wei, bia, dst, {c.stride, c.stride}, {0, 0}, {c.pad, c.pad},
                                {c.pad, c.pad});
    convolution_forward::primitive_desc pd(d, eng);
    prim = convolution_forward(pd);
    memory xs({{c.N, c.C, c.H, c.W}, f32, memory::format_tag::nchw}, eng,
              detail::to_contiguous(x).raw_data());
    memory ws({{c.O, c.C, c.K, c.K}, f32, memory::format_tag::oihw}, eng, w.raw_data());
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
  const ConvCase cases[] = {{"3x3 64->64 @56", 1, 64, 56, 56, 64, 3, 1, 1},
                            {"1x1 256->64 @56", 1, 256, 56, 56, 64, 1, 1, 0}};
  std::printf("conv2d, batch 1, f32, forward inference; GFLOP/s (best of 5 rounds)\n");
  std::printf("%-18s %7s %14s %14s %7s\n", "conv", "threads", "lathe (NHWC)", "oneDNN any",
              "ratio");
  for (const ConvCase& c : cases) {
    manual_seed(1);
    Tensor x = detail::to_channels_last_copy(randn({c.N, c.C, c.H, c.W}));
    Tensor w = randn({c.O, c.C, c.K, c.K});
    Tensor b = randn({c.O});
    const int64_t OH = (c.H + 2 * c.pad - c.K) / c.stride + 1;
    const int64_t OW = (c.W + 2 * c.pad - c.K) / c.stride + 1;
    const double flops = 2.0 * c.N * c.O * OH * OW * c.C * c.K * c.K;
    for (int t : {1, 2}) {
      set_num_threads(t);
      RawConv raw(c, x, w, b);
      double tl = best_time(
          [&] {
            conv2d(x, w, b, {c.stride, c.stride}, {c.pad, c.pad}, {1, 1}, 1);
          },
          min_s);
      double tr = best_time([&] { raw.run(); }, min_s);
      // A second lathe measurement after the raw one, to see drift on a shared machine.
      tl = std::min(tl, best_time(
                            [&] {
                              conv2d(x, w, b, {c.stride, c.stride}, {c.pad, c.pad}, {1, 1}, 1);
                            },
                            min_s));
      std::printf("%-18s %7d %14.1f %14.1f %6.1f%%\n", c.name, t, flops / tl * 1e-9,
                  flops / tr * 1e-9, 100.0 * tr / tl);
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
    double tl = best_time([&] { conv2d(x, w, b); }, min_s);
    double tr = best_time([&] { raw.run(); }, min_s);
    std::printf("per-call time on %s, 1 thread: lathe %.2f us, raw oneDNN %.2f us\n", c.name,
                tl * 1e6, tr * 1e6);
  }
  return 0;
}
