// Graph breaks (issue 30): a compiled function with one break (a branch on h.amax().item()
// between two MLP halves) against the sum of its two halves compiled separately, with the same
// read between them done by the caller. Each call of the broken function records both regions
// again (the host code runs every call) and finds their executables by structural hash; the
// halves only check guards. Argument: the MLP width (batch 32, 3 Linear+ReLU per half).
//
//   ninja -C build bench_graph_breaks
//   taskset -c 0 ./build/bench_graph_breaks --benchmark_repetitions=5
//     --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <memory>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"

using namespace lathe;

namespace {

struct Mlp {
  std::vector<std::shared_ptr<nn::Linear>> first, second;
  explicit Mlp(int64_t width) {
    for (int i = 0; i < 3; ++i) {
      first.push_back(std::make_shared<nn::Linear>(width, width));
      second.push_back(std::make_shared<nn::Linear>(width, width));
    }
  }
  static Tensor run(const std::vector<std::shared_ptr<nn::Linear>>& layers, Tensor h) {
    for (const auto& l : layers) h = relu(l->forward(h));
    return h;
  }
};

Tensor input(int64_t width) {
  Generator g(0);
  return randn({32, width}, DType::f32, &g);
}

void BM_OneBreak(benchmark::State& state) {
  NoGradGuard no_grad;
  Mlp m(state.range(0));
  auto f = compile([&m](const std::vector<Tensor>& in) {
    Tensor h = Mlp::run(m.first, in[0]);
    if (amax(h).item() > 1e30) h = mul(h, 0.0);  // the break: a branch on a value
    return std::vector<Tensor>{Mlp::run(m.second, h)};
  });
  Tensor x = input(state.range(0));
  f({x});
  for (auto _ : state) benchmark::DoNotOptimize(f({x}));
  state.counters["regions"] = static_cast<double>(f.explain_last_call().graph_count);
}
BENCHMARK(BM_OneBreak)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

void BM_TwoHalvesCompiled(benchmark::State& state) {
  NoGradGuard no_grad;
  Mlp m(state.range(0));
  auto first = compile([&m](const std::vector<Tensor>& in) {
    Tensor h = Mlp::run(m.first, in[0]);
    return std::vector<Tensor>{h, amax(h)};
  });
  auto second = compile([&m](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{Mlp::run(m.second, in[0])};
  });
  auto call = [&](const Tensor& x) {
    std::vector<Tensor> a = first({x});
    Tensor h = a[0];
    if (a[1].item() > 1e30) h = mul(h, 0.0);
    return second({h});
  };
  Tensor x = input(state.range(0));
  call(x);
  for (auto _ : state) benchmark::DoNotOptimize(call(x));
}
BENCHMARK(BM_TwoHalvesCompiled)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
