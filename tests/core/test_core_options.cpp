// CoreOptions (lathe/core/core_options.h): LATHE_NUM_THREADS parses as the README says (a
// positive integer, else an error naming it), the process default is settable from code and
// sets the thread count in effect, and to_string names every field.
#include <gtest/gtest.h>

#include <string>

#include "lathe/core/core_options.h"
#include "lathe/core/cpu_share.h"
#include "lathe/core/error.h"
#include "lathe/core/threads.h"
#include "tests/test_env.h"

namespace lathe {
namespace {

using lathe::testing::ScopedEnv;

TEST(CoreOptions, UnsetMeansAllCores) {
  ScopedEnv n("LATHE_NUM_THREADS", nullptr);
  EXPECT_EQ(core_options_from_env().num_threads, 0);
}

TEST(CoreOptions, PositiveIntegerIsTheThreadCount) {
  ScopedEnv n("LATHE_NUM_THREADS", "3");
  EXPECT_EQ(core_options_from_env().num_threads, 3);
}

TEST(CoreOptions, AnythingElseIsAnErrorNamingTheVariable) {
  for (const char* v : {"0", "-2", "many", ""}) {
    ScopedEnv n("LATHE_NUM_THREADS", v);
    try {
      core_options_from_env();
      ADD_FAILURE() << "LATHE_NUM_THREADS='" << v << "' accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("LATHE_NUM_THREADS='" + std::string(v) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

// Read once: the environment changing later changes neither the default nor the count; code
// sets both (set_core_options, set_num_threads).
TEST(CoreOptions, SettableFromCodeAndReadOnce) {
  const CoreOptions before = core_options();
  const int threads_before = num_threads();
  {
    ScopedEnv n("LATHE_NUM_THREADS", "5");
    EXPECT_EQ(core_options().num_threads, before.num_threads);
    EXPECT_EQ(num_threads(), threads_before);
  }
  CoreOptions o;
  o.num_threads = 2;
  set_core_options(o);
  EXPECT_EQ(core_options().num_threads, 2);
  EXPECT_EQ(num_threads(), 2);
  set_num_threads(3);
  EXPECT_EQ(core_options().num_threads, 3);
  EXPECT_EQ(num_threads(), 3);
  o.num_threads = 0;
  set_core_options(o);
  EXPECT_EQ(num_threads(), process_cpu_share().threads);
  o.num_threads = -1;
  EXPECT_THROW(set_core_options(o), Error);
  set_core_options(before);
  set_num_threads(threads_before);
  EXPECT_EQ(num_threads(), threads_before);
}

TEST(CoreOptions, ToStringNamesEveryField) {
  CoreOptions o;
  o.num_threads = 4;
  EXPECT_EQ(o.to_string(), "CoreOptions(num_threads=4)");
}

}  // namespace
}  // namespace lathe
