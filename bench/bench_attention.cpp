// Fused attention (sdpa_fused: blocked, online softmax) against the composition it replaces
// (matmul, scale, mask add, softmax, matmul through the eager ops) at bert-base (L = S = 128),
// vit-base (197) and a long sequence (1024), 12 heads of 64, batch 1, with an additive key mask.
// Interleaved rounds; best wall time and best process CPU time per call (CPU time counts only
// while this process runs, so it shows the kernels' own cost on a machine shared with others).
// Usage: bench_attention [rounds (default 10)]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

namespace {

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Best {
  double wall = 1e30, cpu = 1e30;
};

std::vector<Best> measure(const std::vector<std::function<void()>>& fs, int rounds) {
  for (const auto& f : fs) f();  // warm up (primitive creation)
  std::vector<Best> best(fs.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < fs.size(); ++i) {
      const double c0 = cpu_seconds();
      const auto t0 = Clock::now();
      fs[i]();
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      best[i].wall = std::min(best[i].wall, wall);
      best[i].cpu = std::min(best[i].cpu, cpu_seconds() - c0);
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 10;
  std::printf("threads %d, rounds %d; ms per call (best wall / best process CPU)\n", num_threads(),
              rounds);
  std::printf(
      "| L = S | composed wall | fused wall | wall ratio | composed CPU | fused CPU | "
      "CPU ratio |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int64_t L : {128, 197, 1024}) {
    Generator g(1);
    const int64_t H = 12, E = 64;
    // Heads as bert makes them: [B, L, H, E] transposed to [B, H, L, E].
    Tensor q = randn({1, L, H, E}, DType::f32, &g).transpose(1, 2);
    Tensor k = randn({1, L, H, E}, DType::f32, &g).transpose(1, 2);
    Tensor v = randn({1, L, H, E}, DType::f32, &g).transpose(1, 2);
    Tensor mask = mul(randn({1, 1, 1, L}, DType::f32, &g), 0.1);
    Tensor kt = k.transpose(-2, -1);
    Tensor scale = full({}, 1.0 / std::sqrt(static_cast<double>(E)));
    const OpDef& fused = OpRegistry::global().get("sdpa_fused");
    const Attrs attrs{{"scale", 1.0}, {"divide", false}};
    Tensor sink;
    auto composed = [&] { sink = scaled_dot_product_attention(q, k, v, mask); };
    auto fused_call = [&] {
      std::vector<Tensor> in{q, kt, v, scale, mask};
      sink = dispatch1(fused, in, attrs);
    };
    std::vector<Best> b = measure({composed, fused_call}, rounds);
    std::printf("| %lld | %.3f | %.3f | %.2fx | %.3f | %.3f | %.2fx |\n", static_cast<long long>(L),
                b[0].wall * 1e3, b[1].wall * 1e3, b[0].wall / b[1].wall, b[0].cpu * 1e3,
                b[1].cpu * 1e3, b[0].cpu / b[1].cpu);
  }
  return 0;
}
