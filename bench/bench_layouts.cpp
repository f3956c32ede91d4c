// The cpu backend's plan_layouts pass on and off, model by model: compiled calls timed in
// interleaved rounds by process CPU time (robust to other jobs on a shared machine, unlike wall
// time) and wall time, best of the rounds. Inference, batch 1, frozen weights.
// Usage: bench_layouts [threads (default 1)] [rounds (default 10)] [model ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "lathe/core/grad_mode.h"
#include "lathe/core/threads.h"
#include "lathe/models/registry.h"
#include "lathe/trace/compile.h"

using namespace lathe;

namespace {

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  std::vector<std::string> names;
  for (int i = 3; i < argc; ++i) names.push_back(argv[i]);
  if (names.empty()) names = {"resnet18", "mobilenet_v2", "resnext50_32x4d", "squeezenet1_1"};
  set_num_threads(threads);
  NoGradGuard no_grad;
  std::printf("plan_layouts on vs off, batch 1, %d thread(s), best of %d interleaved rounds\n",
              threads, rounds);
  std::printf(
      "| model | CPU ms channels-last | CPU ms blocked | blocked speedup | wall ms "
      "channels-last | wall ms blocked |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const std::string& name : names) {
    auto spec = models::create_model(name);
    spec->module->eval();
    auto in = models::default_inputs(name, 1, 1);
    // The pass list is read when an entry compiles: one compiled function per setting.
    std::vector<CompiledFunction> fs;
    for (const char* off : {"plan_layouts", ""}) {
      setenv("LATHE_DISABLE_PASSES", off, 1);
      CompileOptions o;
      o.backend = "cpu";
      fs.push_back(compile(spec->module, o));
      fs.back()(in);
      fs.back()(in);
    }
    unsetenv("LATHE_DISABLE_PASSES");
    std::vector<double> best_cpu(2, 1e30), best_wall(2, 1e30);
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < fs.size(); ++k) {
        double c0 = cpu_seconds(), w0 = wall_seconds();
        fs[k](in);
        best_cpu[k] = std::min(best_cpu[k], cpu_seconds() - c0);
        best_wall[k] = std::min(best_wall[k], wall_seconds() - w0);
      }
    }
    std::printf("| %s | %.2f | %.2f | %.2fx | %.2f | %.2f |\n", name.c_str(), best_cpu[0] * 1e3,
                best_cpu[1] * 1e3, best_cpu[0] / best_cpu[1], best_wall[0] * 1e3,
                best_wall[1] * 1e3);
    std::fflush(stdout);
  }
  return 0;
}
