// AdaptiveThreads (lathe/backend/cpu/adaptive_threads.h) from made-up call times: it stays on
// all threads on a quiet machine, moves to one thread when the calls on all threads are clearly
// slower (a busy machine), comes back when the machine is quiet again, and does not switch on a
// small difference (hysteresis). A compiled model gives eager's result with it on.
#include <gtest/gtest.h>

#include <functional>

#include "lathe/backend/cpu/adaptive_threads.h"
#include "lathe/backend/cpu/cpu_options.h"
#include "lathe/core/threads.h"
#include "lathe/models/registry.h"
#include "lathe/trace/compile.h"
#include "tests/backend/backend_test_util.h"
#include "tests/models/small_models.h"

namespace lathe {
namespace {

using backend::cpu::AdaptivePolicy;
using backend::cpu::AdaptiveThreads;

// Runs `calls` calls whose time is `ms(threads)`; returns the thread count of the last call.
int run_calls(AdaptiveThreads& a, int calls, const std::function<double(int)>& ms, int full = 2) {
  int last = 0;
  for (int i = 0; i < calls; ++i) {
    last = a.begin_call(full);
    a.end_call(last, ms(last) * 1e-3);
  }
  return last;
}

TEST(AdaptiveThreads, QuietMachineKeepsAllThreads) {
  AdaptiveThreads a("test");
  run_calls(a, 200, [](int t) { return t == 2 ? 10.0 : 18.0; });
  EXPECT_EQ(a.current(), 2);
  EXPECT_EQ(a.switches(), 0);
}

TEST(AdaptiveThreads, BusyMachineMovesToOneThreadAndBack) {
  AdaptiveThreads a("test");
  bool busy = true;
  auto ms = [&](int t) { return busy ? (t == 2 ? 80.0 : 20.0) : (t == 2 ? 10.0 : 18.0); };
  EXPECT_EQ(run_calls(a, 30, ms), 1) << "on one thread within a few calls";
  EXPECT_EQ(a.switches(), 1);
  busy = false;
  run_calls(a, 200, ms);
  EXPECT_EQ(a.current(), 2) << "the recheck finds all threads faster again";
  EXPECT_EQ(a.switches(), 2);
}

TEST(AdaptiveThreads, SmallDifferencesDoNotSwitch) {
  AdaptiveThreads a("test");
  run_calls(a, 300, [](int t) { return t == 2 ? 10.0 : 9.0; });  // 1.11x: inside the margin
  EXPECT_EQ(a.current(), 2);
  EXPECT_EQ(a.switches(), 0);
}

TEST(AdaptiveThreads, FirstCallsAtACountAreNotTimed) {
  // The first calls on one thread create its primitives: slow, but not held against it.
  AdaptiveThreads a("test", AdaptivePolicy{});
  int one_thread_calls = 0;
  run_calls(a, 30, [&](int t) {
    if (t != 1) return 80.0;
    return ++one_thread_calls <= 2 ? 500.0 : 20.0;
  });
  EXPECT_EQ(a.current(), 1);
}

TEST(AdaptiveThreads, OneThreadProcessNeverProbes) {
  AdaptiveThreads a("test");
  EXPECT_EQ(run_calls(
                a, 100, [](int) { return 1.0; }, 1),
            1);
  EXPECT_EQ(a.switches(), 0);
}

TEST(AdaptiveThreads, CompiledCallsWithItOnMatchEager) {
  backend::cpu::CpuBackendOptions o = backend::cpu::options();
  o.adaptive_threads = true;
  backend::cpu::ScopedCpuOptions scope(o);
  const int before = num_threads();
  set_num_threads(2);
  {
    auto spec = test_models::small_model("squeezenet1_1", 3, 64);
    CompileOptions co;
    co.backend = "cpu";
    auto f = compile(spec->module, co);
    models::InputOptions io;
    io.image_size = 64;
    auto in = models::default_inputs("squeezenet1_1", 1, 5, io);
    auto want = spec->forward(in);
    for (int i = 0; i < 12; ++i) {
      auto got = f(in);
      EXPECT_LT(testing::max_rel_diff(got[0], want[0]), 1e-4) << "call " << i;
    }
    EXPECT_EQ(f.stats().compiles, 1);
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace lathe
