// The cpu backend's fuse_dw_conv pass model by model: compiled calls with the pass on and off
// (LATHE_DW_FUSION) on each plan_layouts block (LATHE_CPU_BLOCK 0 = channels-last, 8, 16), all
// six compiled functions timed in interleaved rounds by process CPU time (robust to other jobs
// on a shared machine) and wall time, best of the rounds. Inference, frozen weights. The pass
// changes a graph only where oneDNN has a real fused kernel (nChw16c on AVX-512): on the other
// blocks "on" and "off" run the same graph, which shows the noise.
// Usage: bench_dw_fusion_models [threads (default 2)] [rounds (default 15)] [batch (default 8)]
//                               [model ...]
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
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 8;
  std::vector<std::string> names;
  for (int i = 4; i < argc; ++i) names.push_back(argv[i]);
  if (names.empty()) names = {"mobilenet_v2", "mnasnet1_0"};
  set_num_threads(threads);
  NoGradGuard no_grad;
  const std::vector<const char*> blocks{"0", "8", "16"};
  std::printf(
      "fuse_dw_conv on / off per plan_layouts block, batch %lld, %d thread(s), best of %d "
      "interleaved rounds, ms per call\n\n",
      static_cast<long long>(batch), threads, rounds);
  std::printf(
      "| model | time | channels-last off | on | nChw8c off | on | nChw16c off | on | nChw16c "
      "on/off speedup |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const std::string& name : names) {
    auto spec = models::create_model(name);
    spec->module->eval();
    auto in = models::default_inputs(name, batch, 1);
    // Both settings are read when an entry compiles: one compiled function per pair.
    std::vector<CompiledFunction> fs;
    for (const char* block : blocks) {
      for (const char* fusion : {"0", "1"}) {
        setenv("LATHE_CPU_BLOCK", block, 1);
        setenv("LATHE_DW_FUSION", fusion, 1);
        CompileOptions o;
        o.backend = "cpu";
        fs.push_back(compile(spec->module, o));
        fs.back()(in);
        fs.back()(in);
      }
    }
    unsetenv("LATHE_CPU_BLOCK");
    unsetenv("LATHE_DW_FUSION");
    std::vector<double> best_cpu(fs.size(), 1e30), best_wall(fs.size(), 1e30);
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < fs.size(); ++k) {
        const double c0 = cpu_seconds(), w0 = wall_seconds();
        fs[k](in);
        best_cpu[k] = std::min(best_cpu[k], cpu_seconds() - c0);
        best_wall[k] = std::min(best_wall[k], wall_seconds() - w0);
      }
    }
    for (const auto& [what, t] : {std::pair{"CPU", &best_cpu}, {"wall", &best_wall}}) {
      const std::vector<double>& v = *t;
      std::printf("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2fx |\n", name.c_str(),
                  what, v[0] * 1e3, v[1] * 1e3, v[2] * 1e3, v[3] * 1e3, v[4] * 1e3, v[5] * 1e3,
                  v[4] / v[5]);
    }
    std::fflush(stdout);
  }
  return 0;
}
