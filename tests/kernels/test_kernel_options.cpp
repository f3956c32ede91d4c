// KernelOptions (lathe/kernels/kernel_options.h): the environment's switches parse as the README
// says, the process default is settable from code, and to_string names every field.
#include <gtest/gtest.h>

#include <string>

#include "lathe/kernels/kernel_options.h"
#include "tests/test_env.h"

namespace lathe::detail {
namespace {

using lathe::testing::ScopedEnv;

TEST(KernelOptions, DefaultsWithNothingSet) {
  ScopedEnv cache("LATHE_CACHE", nullptr);
  ScopedEnv dir("LATHE_CACHE_DIR", nullptr);
  ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  ScopedEnv home("HOME", nullptr);
  ScopedEnv gemv("LATHE_GEMV", nullptr);
  const KernelOptions o = kernel_options_from_env();
  EXPECT_TRUE(o.cache);
  EXPECT_EQ(o.cache_dir, "");
  EXPECT_EQ(o.measure_cache_dir(), "") << "no directory named: no cache";
  EXPECT_TRUE(o.gemv);
}

TEST(KernelOptions, CacheDirectoryFallsBackFromLatheToXdgToHome) {
  ScopedEnv cache("LATHE_CACHE", nullptr);
  ScopedEnv home("HOME", "/h");
  ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  ScopedEnv dir("LATHE_CACHE_DIR", nullptr);
  EXPECT_EQ(kernel_options_from_env().cache_dir, "/h/.cache/lathe");
  {
    ScopedEnv empty("XDG_CACHE_HOME", "");
    EXPECT_EQ(kernel_options_from_env().cache_dir, "/h/.cache/lathe") << "empty is unset";
  }
  ScopedEnv x("XDG_CACHE_HOME", "/x");
  EXPECT_EQ(kernel_options_from_env().cache_dir, "/x/lathe");
  {
    ScopedEnv empty("LATHE_CACHE_DIR", "");
    EXPECT_EQ(kernel_options_from_env().cache_dir, "/x/lathe") << "empty is unset";
  }
  ScopedEnv d("LATHE_CACHE_DIR", "/mine");
  const KernelOptions o = kernel_options_from_env();
  EXPECT_EQ(o.cache_dir, "/mine");
  EXPECT_EQ(o.measure_cache_dir(), "/mine");
}

TEST(KernelOptions, OnlyZeroTurnsASwitchOff) {
  ScopedEnv d("LATHE_CACHE_DIR", "/mine");
  for (const char* v : {"1", "", "yes", "00", "off"}) {
    ScopedEnv cache("LATHE_CACHE", v);
    ScopedEnv gemv("LATHE_GEMV", v);
    const KernelOptions o = kernel_options_from_env();
    EXPECT_TRUE(o.cache) << "LATHE_CACHE='" << v << "'";
    EXPECT_TRUE(o.gemv) << "LATHE_GEMV='" << v << "'";
  }
  ScopedEnv cache("LATHE_CACHE", "0");
  ScopedEnv gemv("LATHE_GEMV", "0");
  const KernelOptions o = kernel_options_from_env();
  EXPECT_FALSE(o.cache);
  EXPECT_EQ(o.cache_dir, "/mine");
  EXPECT_EQ(o.measure_cache_dir(), "") << "off: no directory";
  EXPECT_FALSE(o.gemv);
}

// The process default is read once: the environment changing later does not change it; code
// replaces it, and the scoped setter restores the one before.
TEST(KernelOptions, SettableFromCodeAndReadOnce) {
  const KernelOptions before = kernel_options();
  {
    ScopedEnv gemv("LATHE_GEMV", before.gemv ? "0" : "1");
    EXPECT_EQ(kernel_options().gemv, before.gemv);
    EXPECT_EQ(kernel_gemv_enabled(), before.gemv);
  }
  KernelOptions o = before;
  o.gemv = !before.gemv;
  o.cache = !before.cache;
  o.cache_dir = "/elsewhere";
  {
    ScopedKernelOptions scoped(o);
    EXPECT_EQ(kernel_options().gemv, !before.gemv);
    EXPECT_EQ(kernel_gemv_enabled(), !before.gemv);
    EXPECT_EQ(kernel_options().cache, !before.cache);
    EXPECT_EQ(kernel_options().cache_dir, "/elsewhere");
  }
  EXPECT_EQ(kernel_options().to_string(), before.to_string());
  EXPECT_EQ(kernel_gemv_enabled(), before.gemv);
}

TEST(KernelOptions, ToStringNamesEveryField) {
  KernelOptions o;
  o.cache = false;
  o.cache_dir = "/d";
  o.gemv = true;
  EXPECT_EQ(o.to_string(), "KernelOptions(cache=false, cache_dir=/d, gemv=true)");
}

}  // namespace
}  // namespace lathe::detail
