// CompileOptions: the defaults, the environment read in one place (compile_options_from_env), the
// process default settable from code, per-call options, and to_string.
#include "lathe/trace/compile_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "test_util.h"
#include "tests/test_env.h"

using namespace lathe;
using lathe::test::contains;
using lathe::test::randn_seeded;
using lathe::testing::ScopedEnv;

namespace {

// Restores the process default when the test ends.
struct DefaultRestorer {
  CompileOptions saved = default_compile_options();
  ~DefaultRestorer() { set_default_compile_options(saved); }
};

// Collects the compile log lines while it lives.
struct Logs {
  Logs() {
    previous = set_compile_log_sink([this](const std::string& m) { lines.push_back(m); });
  }
  ~Logs() { set_compile_log_sink(previous); }
  bool any(const std::string& part) const {
    for (const std::string& l : lines)
      if (contains(l, part)) return true;
    return false;
  }
  std::vector<std::string> lines;
  CompileLogSink previous;
};

CompiledFunction relu_fn(CompileOptions o) {
  return compile([](const std::vector<Tensor>& in) { return relu(in[0]); }, std::move(o));
}

}  // namespace

TEST(CompileOptions, Defaults) {
  CompileOptions o;
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.dynamic, DynamicPolicy::kAuto);
  EXPECT_EQ(o.recompile_limit, 8);
  EXPECT_FALSE(o.error_on_recompile_limit);
  EXPECT_EQ(o.name, "fn");
  EXPECT_TRUE(o.freeze);
  EXPECT_FALSE(o.verify);
  EXPECT_EQ(o.verify_calls, 10);
  EXPECT_EQ(o.logs, "");
  EXPECT_EQ(o.partitioner, nullptr);
  EXPECT_EQ(o.to_string(),
            "CompileOptions(backend=cpu, dynamic=auto, recompile_limit=8, "
            "error_on_recompile_limit=false, name=fn, freeze=true, precision=f32, verify=false, "
            "verify_calls=10, "
            "verify_rtol=0.0001, verify_atol=1e-05, fullgraph=false, logs=, partitioner=default)");
}

TEST(CompileOptions, FromTheEnvironment) {
  {
    ScopedEnv logs("LATHE_LOGS", nullptr), verify("LATHE_COMPILE_VERIFY", nullptr);
    CompileOptions o = compile_options_from_env();
    EXPECT_EQ(o.to_string(), CompileOptions{}.to_string());
  }
  {
    ScopedEnv logs("LATHE_LOGS", "recompiles,graph"), verify("LATHE_COMPILE_VERIFY", "1");
    CompileOptions o = compile_options_from_env();
    EXPECT_EQ(o.logs, "recompiles,graph");
    EXPECT_TRUE(o.verify);
    EXPECT_EQ(o.verify_calls, 10);
  }
  {
    ScopedEnv verify("LATHE_COMPILE_VERIFY", "3");
    CompileOptions o = compile_options_from_env();
    EXPECT_TRUE(o.verify);
    EXPECT_EQ(o.verify_calls, 3);
  }
  {
    ScopedEnv verify("LATHE_COMPILE_VERIFY", "0");
    EXPECT_FALSE(compile_options_from_env().verify);
  }
  {
    ScopedEnv verify("LATHE_COMPILE_VERIFY", "yes");
    EXPECT_THROW(compile_options_from_env(), Error);
  }
  {
    Logs warnings;
    ScopedEnv logs("LATHE_LOGS", "recompiles,bogus");
    EXPECT_EQ(compile_options_from_env().logs, "");  // ignored, with a warning
    EXPECT_TRUE(warnings.any("unknown log topic 'bogus'"));
  }
}

TEST(CompileOptions, TheEnvironmentIsReadOnce) {
  DefaultRestorer restore;
  const std::string before = default_compile_options().to_string();
  ScopedEnv verify("LATHE_COMPILE_VERIFY", "3");
  EXPECT_EQ(default_compile_options().to_string(), before);
  auto f = relu_fn(CompileOptions{});
  f({randn_seeded({3}, 1)});
  EXPECT_EQ(f.stats().verified_calls, 0);
}

TEST(CompileOptions, TheProcessDefaultIsSettableFromCode) {
  DefaultRestorer restore;
  CompileOptions d;
  d.backend = "interpreter";
  d.verify = true;
  d.verify_calls = 2;
  set_default_compile_options(d);
  EXPECT_EQ(default_compile_options().to_string(), d.to_string());
  // compile() without options takes the default; options of its own keep the default's verify.
  auto f = compile([](const std::vector<Tensor>& in) { return relu(in[0]); });
  auto g = relu_fn(CompileOptions{});
  for (int i = 0; i < 4; ++i) {
    f({randn_seeded({3}, i)});
    g({randn_seeded({3}, i)});
  }
  EXPECT_EQ(f.stats().verified_calls, 2);
  EXPECT_EQ(g.stats().verified_calls, 2);
  CompileOptions bad;
  bad.logs = "nope";
  EXPECT_THROW(set_default_compile_options(bad), Error);
}

TEST(CompileOptions, PerCallLogsAndVerify) {
  DefaultRestorer restore;
  set_default_compile_options(CompileOptions{});
  Logs logs;
  CompileOptions o;
  o.name = "logged";
  o.logs = "graph";
  o.verify = true;
  o.verify_calls = 1;
  auto f = relu_fn(o);
  auto quiet = relu_fn(CompileOptions{});
  for (int i = 0; i < 3; ++i) {
    f({randn_seeded({3}, i)});
    quiet({randn_seeded({3}, i)});
  }
  EXPECT_TRUE(logs.any("[lathe.graph] graph of 'logged'"));
  EXPECT_FALSE(logs.any("graph of 'fn'"));
  EXPECT_EQ(f.stats().verified_calls, 1);
  EXPECT_EQ(quiet.stats().verified_calls, 0);
  o.logs = "graphs";
  EXPECT_THROW(relu_fn(o), Error);
}

TEST(CompileOptions, SetCompileLogsSetsTheDefaultsLogs) {
  DefaultRestorer restore;
  set_compile_logs("recompiles");
  EXPECT_EQ(default_compile_options().logs, "recompiles");
  set_compile_logs("");
  EXPECT_EQ(default_compile_options().logs, "");
}
