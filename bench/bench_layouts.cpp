// The cpu backend's plan_layouts pass with each layout, model by model: channels-last (the pass
// off, LATHE_CPU_BLOCK=0), nChw8c (8) and nChw16c (16) on the whole graph, and the default
// (LATHE_CPU_BLOCK unset: the block and the regions chosen by measurement); compiled calls timed
// in interleaved rounds by process CPU time (robust to other jobs on a shared machine, unlike
// wall time) and wall time, best of the rounds. Inference, frozen weights. First prints the probe
// the pass's machine block comes from (dnnl_measured_conv_layout).
// Usage: bench_layouts [threads (default 1)] [rounds (default 10)] [--batch N] [model ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "lathe/core/grad_mode.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_conv.h"
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
  int64_t batch = 1;
  for (int i = 3; i < argc; ++i) {
    if (std::string(argv[i]) == "--batch" && i + 1 < argc)
      batch = std::atoll(argv[++i]);
    else
      names.push_back(argv[i]);
  }
  if (names.empty()) names = {"resnet18", "mobilenet_v2", "resnext50_32x4d", "squeezenet1_1"};
  set_num_threads(threads);
  NoGradGuard no_grad;
  const auto& probe = lathe::detail::dnnl_measured_conv_layout();
  std::printf(
      "probe (3x3 64->64 @28, relu): oneDNN prefers block %d; channels-last %.3f ms, blocked %.3f "
      "ms; default block %d\n\n",
      probe.preferred_block, probe.channels_last_s * 1e3, probe.blocked_s * 1e3, probe.block);
  std::printf("plan_layouts by block, batch %lld, %d thread(s), best of %d interleaved rounds\n",
              static_cast<long long>(batch), threads, rounds);
  const std::vector<const char*> blocks{"0", "8", "16", nullptr};  // nullptr: measured choice
  std::printf(
      "| model | CPU ms channels-last | CPU ms nChw8c | CPU ms nChw16c | CPU ms measured | wall ms "
      "channels-last | wall ms nChw8c | wall ms nChw16c | wall ms measured |\n| --- | ---: | ---: "
      "| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const std::string& name : names) {
    auto spec = models::create_model(name);
    spec->module->eval();
    auto in = models::default_inputs(name, batch, 1);
    // The block is read when an entry compiles: one compiled function per setting.
    std::vector<CompiledFunction> fs;
    for (const char* block : blocks) {
      if (block)
        setenv("LATHE_CPU_BLOCK", block, 1);
      else
        unsetenv("LATHE_CPU_BLOCK");
      CompileOptions o;
      o.backend = "cpu";
      fs.push_back(compile(spec->module, o));
      fs.back()(in);
      fs.back()(in);
    }
    unsetenv("LATHE_CPU_BLOCK");
    std::vector<double> best_cpu(fs.size(), 1e30), best_wall(fs.size(), 1e30);
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < fs.size(); ++k) {
        double c0 = cpu_seconds(), w0 = wall_seconds();
        fs[k](in);
        best_cpu[k] = std::min(best_cpu[k], cpu_seconds() - c0);
        best_wall[k] = std::min(best_wall[k], wall_seconds() - w0);
      }
    }
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", name.c_str(),
                best_cpu[0] * 1e3, best_cpu[1] * 1e3, best_cpu[2] * 1e3, best_cpu[3] * 1e3,
                best_wall[0] * 1e3, best_wall[1] * 1e3, best_wall[2] * 1e3, best_wall[3] * 1e3);
    std::fflush(stdout);
  }
  return 0;
}
