// CpuBackendOptions: defaults, parsing of the environment, set from code, to_string, and the
// pass list against docs/architecture.md.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/cpu/plan_layouts.h"
#include "lathe/base/error.h"
#include "tests/test_env.h"

namespace lathe {
namespace {

using backend::cpu::CpuBackendOptions;
using backend::cpu::ProfileMode;
using testing::ScopedEnv;

// Every variable unset for the scope.
struct CleanEnv {
  ScopedEnv a{"LATHE_LOGS", nullptr}, b{"LATHE_DISABLE_PASSES", nullptr},
      c{"LATHE_CPU_BLOCK", nullptr}, d{"LATHE_CPU_EXECUTOR", nullptr},
      e{"LATHE_CPU_LAYOUT_TUNING", nullptr}, f{"LATHE_CPU_WINOGRAD", nullptr},
      g{"LATHE_CPU_LAYOUT_REGIONS", nullptr}, h{"LATHE_DW_FUSION", nullptr},
      i{"LATHE_PROFILE", nullptr}, j{"LATHE_CPU_ADAPTIVE_THREADS", nullptr};
};

TEST(CpuOptions, Defaults) {
  CleanEnv clean;
  const CpuBackendOptions o = backend::cpu::options_from_environment();
  EXPECT_EQ(o, CpuBackendOptions{});
  EXPECT_FALSE(o.log_passes);
  EXPECT_FALSE(o.log_graphs);
  EXPECT_TRUE(o.disabled_passes.empty());
  EXPECT_FALSE(o.block);
  EXPECT_FALSE(o.interpreter);
  EXPECT_TRUE(o.layout_tuning);
  EXPECT_FALSE(o.winograd);
  EXPECT_TRUE(o.layout_regions);
  EXPECT_TRUE(o.dw_fusion);
  EXPECT_EQ(o.profile, ProfileMode::off);
  EXPECT_TRUE(o.adaptive_threads);
  EXPECT_FALSE(o.log_threads);
  EXPECT_EQ(backend::cpu::options(), o);
}

TEST(CpuOptions, FromEnvironment) {
  CleanEnv clean;
  ScopedEnv logs("LATHE_LOGS", "guards,passes");
  ScopedEnv off("LATHE_DISABLE_PASSES", "fuse_conv,,dce");
  ScopedEnv block("LATHE_CPU_BLOCK", "8");
  ScopedEnv exec("LATHE_CPU_EXECUTOR", "interpreter");
  ScopedEnv tuning("LATHE_CPU_LAYOUT_TUNING", "0");
  ScopedEnv winograd("LATHE_CPU_WINOGRAD", "1");
  ScopedEnv regions("LATHE_CPU_LAYOUT_REGIONS", "0");
  ScopedEnv dw("LATHE_DW_FUSION", "0");
  ScopedEnv profile("LATHE_PROFILE", "steps");
  ScopedEnv adaptive("LATHE_CPU_ADAPTIVE_THREADS", "0");
  const CpuBackendOptions o = backend::cpu::options_from_environment();
  EXPECT_FALSE(o.adaptive_threads);
  EXPECT_FALSE(o.log_threads);
  EXPECT_TRUE(o.log_passes);
  EXPECT_FALSE(o.log_graphs);
  EXPECT_EQ(o.disabled_passes, (std::vector<std::string>{"fuse_conv", "dce"}));
  EXPECT_EQ(o.block, 8);
  EXPECT_TRUE(o.interpreter);
  EXPECT_FALSE(o.layout_tuning);
  EXPECT_EQ(o.winograd, true);
  EXPECT_FALSE(o.layout_regions);
  EXPECT_FALSE(o.dw_fusion);
  EXPECT_EQ(o.profile, ProfileMode::steps);
  // options() follows the environment when it changes.
  EXPECT_EQ(backend::cpu::options(), o);
  {
    ScopedEnv all("LATHE_LOGS", "all");
    EXPECT_TRUE(backend::cpu::options().log_graphs);
    EXPECT_TRUE(backend::cpu::options().log_threads);
  }
  {
    ScopedEnv one("LATHE_PROFILE", "1");
    EXPECT_EQ(backend::cpu::options().profile, ProfileMode::summary);
  }
  EXPECT_EQ(backend::cpu::options(), o);
}

TEST(CpuOptions, MalformedValuesNameTheVariable) {
  CleanEnv clean;
  auto error = [](const char* name, const char* value) {
    ScopedEnv e(name, value);
    try {
      backend::cpu::options_from_environment();
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error("LATHE_CPU_BLOCK", "4").find("LATHE_CPU_BLOCK must be 0, 8 or 16"),
            std::string::npos);
  EXPECT_NE(error("LATHE_CPU_LAYOUT_TUNING", "2").find("LATHE_CPU_LAYOUT_TUNING must be 0 or 1"),
            std::string::npos);
  EXPECT_NE(error("LATHE_CPU_WINOGRAD", "yes").find("LATHE_CPU_WINOGRAD must be 0 or 1"),
            std::string::npos);
  EXPECT_NE(error("LATHE_CPU_LAYOUT_REGIONS", "x").find("LATHE_CPU_LAYOUT_REGIONS must be"),
            std::string::npos);
}

TEST(CpuOptions, SetFromCodeTakesPrecedence) {
  CleanEnv clean;
  ScopedEnv dw("LATHE_DW_FUSION", "0");
  CpuBackendOptions mine;
  mine.block = 16;
  {
    backend::cpu::ScopedCpuOptions scoped(mine);
    EXPECT_EQ(backend::cpu::options(), mine);
    EXPECT_TRUE(backend::cpu::options().dw_fusion);
    EXPECT_EQ(backend::cpu::plan_layouts_block(), 16);
  }
  EXPECT_FALSE(backend::cpu::options().dw_fusion);
  backend::cpu::set_options(mine);
  EXPECT_EQ(backend::cpu::options(), mine);
  backend::cpu::set_options(std::nullopt);
  EXPECT_FALSE(backend::cpu::options().dw_fusion);
}

TEST(CpuOptions, ToStringAndResultKey) {
  CpuBackendOptions o;
  EXPECT_EQ(o.to_string(),
            "log_passes=0 log_graphs=0 log_threads=0 disabled_passes= block=auto layout_tuning=1 "
            "winograd=auto layout_regions=1 dw_fusion=1 precision=f32 executor=planned "
            "adaptive_threads=1 profile=off");
  CpuBackendOptions p = o;
  p.log_passes = true;
  p.profile = ProfileMode::summary;
  p.interpreter = true;
  p.log_threads = true;
  p.adaptive_threads = false;
  EXPECT_EQ(p.result_key(), o.result_key()) << "logs and profiling do not change the result";
  p.block = 8;
  EXPECT_NE(p.result_key(), o.result_key());
  p = o;
  p.disabled_passes = {"fuse_conv"};
  EXPECT_NE(p.result_key(), o.result_key());
  p = o;
  p.precision = DType::bf16;
  EXPECT_NE(p.result_key(), o.result_key()) << "bf16 and f32 executables are different results";
}

// docs/architecture.md draws the cpu pipeline as one line "graph --a--> --b--> ... planned
// executor": the same names in the same order as the pass list.
TEST(CpuPipeline, ArchitectureDocListsThePasses) {
  std::ifstream in(std::string(LATHE_SOURCE_DIR) + "/docs/architecture.md");
  ASSERT_TRUE(in) << "docs/architecture.md not found";
  std::string line, drawn;
  while (std::getline(in, line))
    if (line.rfind("graph --", 0) == 0 && line.find("planned executor") != std::string::npos)
      drawn = line;
  ASSERT_FALSE(drawn.empty()) << "no 'graph --pass--> ... planned executor' line";
  std::string names;
  const std::regex pass("--([a-z_0-9]+)-->");
  for (auto it = std::sregex_iterator(drawn.begin(), drawn.end(), pass);
       it != std::sregex_iterator(); ++it)
    names += (*it)[1].str() + "\n";
  EXPECT_EQ(names, backend::cpu::pipeline_string());
  std::string from_names;
  for (const std::string& n : backend::cpu::pass_names()) from_names += n + "\n";
  EXPECT_EQ(from_names, backend::cpu::pipeline_string());
}

}  // namespace
}  // namespace lathe
