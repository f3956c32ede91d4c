// Winograd against the direct convolution on the blocked layout (nChw16c), as plan_layouts
// chooses between them: Lathe's conv2d_forward_blocked with Conv2dParams::winograd off and on,
// for resnet's 3x3 stride-1 shapes at batch 1 and 8, plus Lathe's own reorders between
// channels-last and nChw16c for the same activations. Best wall time of interleaved rounds.
// Where oneDNN has no Winograd kernel (AVX2 machines) both columns run the direct kernel.
// Usage: bench_winograd [rounds (default 15)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/blocked_layout.h"
#include "lathe/kernels/dnnl_conv.h"

using namespace lathe;

namespace {

double best_of(int rounds, const std::function<void()>& f) {
  f();
  f();  // primitives made, weights transformed
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  const auto& probe = detail::dnnl_measured_winograd();
  std::printf("%d threads, best of %d; probe: Winograd %s, %.3f ms vs direct %.3f ms -> %s\n\n",
              num_threads(), rounds, probe.available ? "available" : "not available",
              probe.winograd_s * 1e3, probe.direct_s * 1e3, probe.use ? "used" : "not used");
  std::printf(
      "| 3x3 conv | batch | direct ms | Winograd ms | speedup | to_blocked ms | "
      "from_blocked ms |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  struct Shape {
    int64_t c, h, n;
  };
  for (Shape s : {Shape{64, 56, 1},
                  {128, 28, 1},
                  {256, 14, 1},
                  {512, 7, 1},
                  {64, 56, 8},
                  {128, 28, 8},
                  {256, 14, 8},
                  {512, 7, 8}}) {
    Tensor x = randn({s.n, s.c / 16, s.h, s.h, 16}), y = empty({s.n, s.c / 16, s.h, s.h, 16});
    Tensor w = randn({s.c, s.c, 3, 3}), b = randn({s.c});
    detail::Conv2dParams direct;
    direct.padding[0] = direct.padding[1] = 1;
    detail::Conv2dParams wino = direct;
    wino.winograd = true;
    detail::ConvPostOps post;
    post.act = detail::ConvPostOps::Act::relu;
    const double d =
        best_of(rounds, [&] { detail::conv2d_forward_blocked(x, w, b, direct, y, post); });
    const double g =
        best_of(rounds, [&] { detail::conv2d_forward_blocked(x, w, b, wino, y, post); });
    Tensor cl = randn({s.n, s.c, s.h, s.h}).to_channels_last();
    const double to = best_of(rounds, [&] { kernels::to_blocked(cl, x); });
    const double from = best_of(rounds, [&] { kernels::from_blocked(x, cl); });
    std::printf("| %lld -> %lld @ %lld | %lld | %.3f | %.3f | %.2fx | %.3f | %.3f |\n",
                static_cast<long long>(s.c), static_cast<long long>(s.c),
                static_cast<long long>(s.h), static_cast<long long>(s.n), d, g, d / g, to, from);
  }
  return 0;
}
