// Fused pointwise programs (pointwise_fused, lathe/kernels/pointwise_program.h) against memory
// bandwidth and against the eager ops they replace, on large f32 tensors (default 16M elements,
// 64 MB per tensor: far beyond the caches). The bandwidth bar is a plain copy of one tensor into
// another (kernels::copy, all threads): bytes moved per second, read plus write. A fused program
// reading k tensors and writing one moves (k + 1) x 4 bytes per element; its "of copy" column is
// its own bytes per second over the copy's. Best wall time of interleaved rounds.
// Usage: bench_pointwise_fusion [elements (default 16777216)] [rounds (default 10)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/pointwise_program.h"
#include "lathe/ops/ops.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{1} << 24);
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  Tensor x = randn({n}), y = randn({n}), out = empty({n}), out2 = empty({n});
  Tensor a = full({}, 1.5), b = full({}, 0.25);

  struct Case {
    std::string name;
    int tensors;  // tensors read + written per element
    std::function<void()> run;
  };
  auto program = [&](const char* text, std::vector<Tensor> in) {
    auto p = std::make_shared<kernels::PointwiseProgram>(kernels::PointwiseProgram::parse(text));
    return [p, in, &out] { kernels::run_pointwise(*p, in, out); };
  };
  std::vector<Case> cases{
      {"copy (the bar)", 2, [&] { kernels::copy(out2, x); }},
      {"fused relu(x * 2)", 2, program("in 0; scale %0 2; relu %1", {x})},
      {"fused (x + y) * 0.5", 3, program("in 0; in 1; add %0 %1 1; scale %2 0.5", {x, y})},
      {"fused x * a + b (0-d a, b)", 2,
       program("in 0; in 1; mul %0 %1; in 2; add %2 %3 1", {x, a, b})},
      {"fused gelu(x * a + b)", 2,
       program("in 0; in 1; mul %0 %1; in 2; add %2 %3 1; gelu_erf %4", {x, a, b})},
      {"fused sigmoid(x) * y", 3, program("in 0; sigmoid %0; in 1; mul %1 %2", {x, y})},
      {"eager gelu(x * a + b), 3 ops", 2, [&] { out = gelu(add(mul(x, a), b)); }},
  };
  std::vector<double> best(cases.size(), 1e30);
  for (auto& c : cases) c.run();  // warm up: pages touched
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto t0 = Clock::now();
      cases[i].run();
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  const double copy_bw = 2.0 * 4.0 * static_cast<double>(n) / best[0];
  std::printf("%lld elements, %d threads, best of %d rounds\n\n", static_cast<long long>(n),
              num_threads(), rounds);
  std::printf("| case | ms | GB/s moved | of copy |\n| --- | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < cases.size(); ++i) {
    const double bw = cases[i].tensors * 4.0 * static_cast<double>(n) / best[i];
    std::printf("| %s | %.2f | %.1f | %.2f |\n", cases[i].name.c_str(), best[i] * 1e3, bw / 1e9,
                bw / copy_bw);
  }
  return 0;
}
