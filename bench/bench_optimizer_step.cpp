// Per-tensor vs fused multi-tensor optimizer step (SGD with momentum, Adam) on a zoo model's
// parameter shapes with random gradients: median ms over interleaved rounds, same threads.
// Usage: build/bench_optimizer_step [rounds] [model ...]   (default: 20 rounds; resnet18,
// mobilenet_v2; LATHE_NUM_THREADS sets the threads)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/core/threads.h"
#include "lathe/models/registry.h"
#include "lathe/optim/optimizer.h"

using namespace lathe;

namespace {

std::vector<Tensor> params_like(const std::vector<Tensor>& shapes) {
  std::vector<Tensor> ps;
  for (const Tensor& s : shapes) {
    Tensor p = randn(s.sizes()).set_requires_grad(true);
    p.set_grad(randn(s.sizes()));
    ps.push_back(p);
  }
  return ps;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
  std::vector<std::string> names(argv + std::min(argc, 2), argv + argc);
  if (names.empty()) names = {"resnet18", "mobilenet_v2"};
  std::printf(
      "| model | tensors | elements | optimizer | per-tensor ms | fused ms | speedup |\n"
      "| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
  for (const std::string& name : names) {
    const std::vector<Tensor> shapes = models::create_model(name)->module->parameters();
    int64_t elements = 0;
    for (const Tensor& t : shapes) elements += t.numel();
    for (const char* kind : {"SGD momentum 0.9", "Adam"}) {
      std::unique_ptr<optim::Optimizer> opt[2];
      for (int fused = 0; fused < 2; ++fused) {
        manual_seed(1);
        std::vector<Tensor> ps = params_like(shapes);
        if (kind[0] == 'S') {
          optim::SGDOptions o;
          o.lr = 1e-3;
          o.momentum = 0.9;
          o.fused = fused;
          opt[fused] = std::make_unique<optim::SGD>(ps, o);
        } else {
          optim::AdamOptions o;
          o.fused = fused;
          opt[fused] = std::make_unique<optim::Adam>(ps, o);
        }
        opt[fused]->step();  // creates the state
      }
      std::vector<double> ms[2];
      for (int r = 0; r < rounds; ++r)
        for (int k = 0; k < 2; ++k) {
          const int fused = (r + k) % 2;
          auto t0 = std::chrono::steady_clock::now();
          opt[fused]->step();
          ms[fused].push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
        }
      std::printf("| %s | %zu | %lld | %s | %.3f | %.3f | %.2fx |\n", name.c_str(), shapes.size(),
                  static_cast<long long>(elements), kind, median(ms[0]), median(ms[1]),
                  median(ms[0]) / median(ms[1]));
      std::fflush(stdout);
    }
  }
  std::printf("\n%d threads, median of %d interleaved steps\n", num_threads(), rounds);
  return 0;
}
