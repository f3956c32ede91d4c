// Time to build each zoo model with random weights (PyTorch-default initialization), the part
// of a model's time to first result that precedes any compute. Usage:
//   build/bench_model_init [model ...]   (default: all ten; LATHE_NUM_THREADS sets the threads)
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "lathe/core/threads.h"
#include "lathe/models/registry.h"

int main(int argc, char** argv) {
  std::vector<std::string> names(argv + 1, argv + argc);
  if (names.empty()) names = lathe::models::model_names();
  std::printf("| model | parameters | build s | threads |\n| --- | ---: | ---: | ---: |\n");
  for (const std::string& name : names) {
    auto t0 = std::chrono::steady_clock::now();
    auto spec = lathe::models::create_model(name);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t params = 0;
    for (auto& [n, p] : spec->module->named_parameters()) params += p.numel();
    std::printf("| %s | %lld | %.3f | %d |\n", name.c_str(), static_cast<long long>(params), s,
                lathe::num_threads());
    std::fflush(stdout);
  }
  return 0;
}
