// Per-call cost of the lazy device against eager for one zoo model, with lathe::lazy::metrics.
//   bench_lazy [MODEL] [BATCH] [REPEAT]     (defaults: resnet18 1 10)
// Prints eager and lazy medians (lazy: model and parameters on the device, input moved per call,
// output read back) and the lazy metrics over the timed calls (trace, hash, compile, execute).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "lathe/lazy/lazy.h"
#include "lathe/models/registry.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

template <class F>
double median_ms(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "resnet18";
  const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 1;
  const int reps = argc > 3 ? std::stoi(argv[3]) : 10;
  models::ModelOptions mo;
  mo.seed = 0;
  auto spec = models::create_model(name, mo);
  spec->module->eval();
  std::vector<Tensor> inputs = models::default_inputs(name, batch, 1);
  auto eager_call = [&] { spec->forward(inputs); };
  eager_call();
  double eager = median_ms(eager_call, reps);

  spec->module->to(Device::lazy());
  auto lazy_call = [&] {
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) in.push_back(t.to(Device::lazy()));
    for (const Tensor& t : spec->forward(in)) t.to(Device::cpu());
  };
  lazy_call();  // compiles
  lazy::reset_metrics();
  double lazy_ms = median_ms(lazy_call, reps);
  lazy::Metrics m = lazy::metrics();
  std::printf("%s batch %lld: eager %.2f ms, lazy %.2f ms (%.2fx of eager)\n", name.c_str(),
              static_cast<long long>(batch), eager, lazy_ms, lazy_ms / eager);
  std::printf("per lazy call: %.1f ops traced, trace %.3f ms, hash %.3f ms, execute %.2f ms\n",
              static_cast<double>(m.ops_traced) / reps, 1e3 * m.trace_s / reps,
              1e3 * m.hash_s / reps, 1e3 * m.execute_s / reps);
  std::printf("%s", m.to_string().c_str());
  return 0;
}
