// Training batch norm, forward and backward, on resnet18's shapes at batch 8 (channels-last):
// the batch_norm op and the batch_norm_backward op against the same arithmetic composed of
// elementwise and reduction ops (what the vjp ran before batch_norm_backward existed), with a
// copy of the input as the memory-bandwidth yardstick. Median ms over interleaved rounds.
// Usage: build/bench_batch_norm [rounds] [batch]   (default 10 rounds, batch 8;
// LATHE_NUM_THREADS sets the threads)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/ops/backward_ops.h"
#include "lathe/ops/ops.h"

using namespace lathe;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The composed form of the training gradient (xhat = (x - mean) * rstd).
std::vector<Tensor> composed_backward(const Tensor& g, const Tensor& x, const Tensor& w) {
  std::vector<int64_t> dims{0, 2, 3};
  Shape channel{1, x.sizes()[1], 1, 1};
  Tensor mu = mean(x, dims, true);
  Tensor rstd = rsqrt(add(var(x, dims, 0, true), 1e-5));
  Tensor xhat = mul(sub(x, mu), rstd);
  Tensor gw = sum(mul(g, xhat), dims);
  Tensor gb = sum(g, dims);
  Tensor gxhat = mul(g, w.reshape(channel));
  Tensor gx = mul(rstd, sub(sub(gxhat, mean(gxhat, dims, true)),
                            mul(xhat, mean(mul(gxhat, xhat), dims, true))));
  return {gx, gw, gb};
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 10;
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 8;
  struct Case {
    int64_t c, hw;
  };
  const std::vector<Case> cases{{64, 112}, {64, 56}, {128, 28}, {256, 14}, {512, 7}};
  std::printf(
      "| shape | copy ms | batch_norm ms | composed backward ms | batch_norm_backward ms |\n"
      "| --- | ---: | ---: | ---: | ---: |\n");
  for (const Case& k : cases) {
    manual_seed(1);
    Tensor x = randn({n, k.c, k.hw, k.hw}).to_channels_last();
    Tensor g = randn({n, k.c, k.hw, k.hw}).to_channels_last();
    Tensor w = randn({k.c}), b = randn({k.c});
    Tensor rm = zeros({k.c}), rv = ones({k.c});
    std::vector<double> t[4];
    for (int r = 0; r < rounds + 1; ++r) {
      double c = ms([&] { x.clone(); });
      double f = ms([&] { batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5); });
      double cb = ms([&] { composed_backward(g, x, w); });
      double nb = ms([&] { batch_norm_backward(g, x, w, 1e-5); });
      if (r == 0) continue;  // warm-up
      t[0].push_back(c);
      t[1].push_back(f);
      t[2].push_back(cb);
      t[3].push_back(nb);
    }
    std::printf("| [%lld,%lld,%lld,%lld] | %.3f | %.3f | %.3f | %.3f |\n",
                static_cast<long long>(n), static_cast<long long>(k.c),
                static_cast<long long>(k.hw), static_cast<long long>(k.hw), median(t[0]),
                median(t[1]), median(t[2]), median(t[3]));
  }
  return 0;
}
