// The measurement cache seen from compile: a cold compile stores the probes and the layout
// tuning's winner, a warm one (a new process: nothing measured in memory) measures nothing and
// computes what eager and the cold compile compute; with the cache off nothing is written.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lathe/core/grad_mode.h"
#include "lathe/kernels/compile_time.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/kernels/kernel_options.h"
#include "lathe/kernels/measure_cache.h"
#include "lathe/models/registry.h"
#include "lathe/trace/compile.h"
#include "tests/backend/backend_test_util.h"
#include "tests/models/small_models.h"
#include "tests/test_env.h"

using namespace lathe;

namespace {

using lathe::testing::count_files;
using lathe::testing::ScopedEnv;
using lathe::testing::TempDir;

using lathe::testing::max_rel_diff;

// The kernel options with the measurement cache in `dir`, on or off.
lathe::detail::KernelOptions cache_in(const std::string& dir, bool on) {
  lathe::detail::KernelOptions o = lathe::detail::kernel_options();
  o.cache = on;
  o.cache_dir = dir;
  return o;
}

// A small mobilenet_v2 (depthwise convolutions: the layout is chosen by measurement and tuned),
// compiled for inference and called once, as a new process would: nothing measured in memory.
struct MobileNet {
  MobileNet() : spec(test_models::small_model("mobilenet_v2", 5)) {
    spec->module->eval();
    models::InputOptions io;
    io.image_size = 64;
    in = models::default_inputs("mobilenet_v2", 1, 7, io);
    NoGradGuard no_grad;
    eager = spec->forward(in)[0];
  }
  Tensor compile_and_call() {
    NoGradGuard no_grad;
    lathe::detail::dnnl_forget_probes();
    CompileOptions o;
    o.backend = "cpu";
    auto f = compile(spec->module, o);
    return f(in)[0];
  }
  std::shared_ptr<models::ModelSpec> spec;
  std::vector<Tensor> in;
  Tensor eager;
};

TEST(MeasureCacheCompile, WarmCacheMeasuresNothingAndComputesTheSame) {
  TempDir tmp;
  lathe::detail::ScopedKernelOptions on(cache_in(tmp.path, true));
  ScopedEnv tuning("LATHE_CPU_LAYOUT_TUNING", "1");
  MobileNet m;

  const auto s0 = lathe::detail::measure_cache_stats();
  const auto c0 = lathe::detail::compile_time_counters();
  const Tensor cold = m.compile_and_call();
  const auto s1 = lathe::detail::measure_cache_stats();
  const auto c1 = lathe::detail::compile_time_counters();
  ASSERT_GT((c1 - c0).probes, 0u) << "the cold compile measures its convolutions";
  EXPECT_GT(s1.writes, s0.writes);
  const size_t entries = count_files(tmp.path);
  EXPECT_GT(entries, 0u);

  const Tensor warm = m.compile_and_call();
  const auto s2 = lathe::detail::measure_cache_stats();
  EXPECT_EQ((lathe::detail::compile_time_counters() - c1).probes, 0u) << "nothing measured";
  EXPECT_EQ(s2.writes, s1.writes) << "nothing new to store: the tuning's winner was cached too";
  EXPECT_GT(s2.hits, s1.hits);
  EXPECT_EQ(count_files(tmp.path), entries);

  EXPECT_LT(max_rel_diff(cold, m.eager), 1e-4);
  EXPECT_LT(max_rel_diff(warm, m.eager), 1e-4);
  EXPECT_LT(max_rel_diff(warm, cold), 1e-5);
}

TEST(MeasureCacheCompile, TurnedOffWritesNothing) {
  TempDir tmp;
  lathe::detail::ScopedKernelOptions off(cache_in(tmp.path, false));
  MobileNet m;
  const auto c0 = lathe::detail::compile_time_counters();
  const Tensor got = m.compile_and_call();
  EXPECT_GT((lathe::detail::compile_time_counters() - c0).probes, 0u);
  EXPECT_LT(max_rel_diff(got, m.eager), 1e-4);
  EXPECT_EQ(count_files(tmp.path), 0u);
}

}  // namespace
