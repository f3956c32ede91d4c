// The on-disk measurement cache (lathe/kernels/measure_cache.h): entries round-trip exactly,
// corrupt, truncated and foreign entries are ignored and rewritten, the directory is created 0700
// and refused when others may write it, the cache turned off writes nothing, and the probes read and
// write it. Every test uses its own temporary directory, never the user's cache.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "lathe/core/threads.h"
#include "lathe/kernels/compile_time.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/kernels/kernel_options.h"
#include "lathe/kernels/measure_cache.h"
#include "tests/test_env.h"

namespace lathe::detail {
namespace {

namespace fs = std::filesystem;
using lathe::testing::count_files;
using lathe::testing::TempDir;

// The kernel options with the measurement cache in `dir`, on or off.
KernelOptions cache_in(const std::string& dir, bool on) {
  KernelOptions o = kernel_options();
  o.cache = on;
  o.cache_dir = dir;
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

unsigned mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(MeasureCache, EntryRoundTripsExactly) {
  TempDir tmp;
  MeasureCache c(tmp.path, "test machine");
  ASSERT_TRUE(c.enabled());
  const std::vector<double> values{1.25e-4, INFINITY, 3.0000000000000004e-6, 0.0};
  EXPECT_FALSE(c.load("conv 1 2 3").has_value());
  c.store("conv 1 2 3", values);
  std::optional<std::vector<double>> got = c.load("conv 1 2 3");
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ((*got)[i], values[i]) << i;
  EXPECT_FALSE(c.load("conv 1 2 4").has_value()) << "another key";
  // One entry, no temporary file left behind, the entry readable by its owner only.
  EXPECT_EQ(count_files(c.entries_dir()), 1u);
  EXPECT_EQ(mode_of(c.entry_path("conv 1 2 3")), 0600u);
  // A new value replaces the old one.
  c.store("conv 1 2 3", {7.0});
  got = c.load("conv 1 2 3");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, std::vector<double>{7.0});
  EXPECT_EQ(count_files(c.entries_dir()), 1u);
}

TEST(MeasureCache, CorruptOrTruncatedEntryIsIgnoredAndRebuilt) {
  TempDir tmp;
  MeasureCache c(tmp.path, "test machine");
  c.store("reorder 1 64 56 56 8", {2.5e-5});
  const std::string path = c.entry_path("reorder 1 64 56 56 8");
  const std::string good = read_file(path);
  ASSERT_FALSE(good.empty());

  // One byte of the numbers changed: the checksum no longer matches.
  std::string flipped = good;
  const size_t at = flipped.find("values:") + 9;
  flipped[at] = flipped[at] == '1' ? '2' : '1';
  write_file(path, flipped);
  const uint64_t rejected = measure_cache_stats().rejected;
  EXPECT_FALSE(c.load("reorder 1 64 56 56 8").has_value());
  EXPECT_EQ(measure_cache_stats().rejected, rejected + 1);

  // Truncated (a writer that died; a full disk), and empty.
  for (size_t keep : {good.size() / 2, good.size() - 1, size_t{0}}) {
    write_file(path, good.substr(0, keep));
    EXPECT_FALSE(c.load("reorder 1 64 56 56 8").has_value()) << keep;
  }
  // The caller measures again and stores: the entry is whole again.
  c.store("reorder 1 64 56 56 8", {2.5e-5});
  std::optional<std::vector<double>> got = c.load("reorder 1 64 56 56 8");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, std::vector<double>{2.5e-5});
  EXPECT_EQ(read_file(path), good);
}

TEST(MeasureCache, AnotherFingerprintOrThreadCountMisses) {
  TempDir tmp;
  const int threads = lathe::num_threads();
  MeasureCache a(tmp.path, "machine A"), b(tmp.path, "machine B");
  a.store("winograd", {1.0, 2.0});
  EXPECT_TRUE(a.load("winograd").has_value());
  EXPECT_FALSE(b.load("winograd").has_value()) << "another machine's entry";

  // A foreign entry under our file name (a copied cache, a hash collision): well formed, its
  // checksum right, but the fingerprint is not ours.
  write_file(b.entry_path("winograd"), read_file(a.entry_path("winograd")));
  const uint64_t rejected = measure_cache_stats().rejected;
  EXPECT_FALSE(b.load("winograd").has_value());
  EXPECT_EQ(measure_cache_stats().rejected, rejected + 1);

  // Measurements depend on the thread count.
  lathe::set_num_threads(threads + 1);
  EXPECT_FALSE(a.load("winograd").has_value());
  a.store("winograd", {3.0, 4.0});
  EXPECT_EQ(*a.load("winograd"), (std::vector<double>{3.0, 4.0}));
  lathe::set_num_threads(threads);
  EXPECT_EQ(*a.load("winograd"), (std::vector<double>{1.0, 2.0}));
}

TEST(MeasureCache, DirectoryIsCreatedPrivate) {
  TempDir tmp;
  const std::string dir = tmp.path + "/not/yet/lathe";
  MeasureCache c(dir, "test machine");
  ASSERT_TRUE(c.enabled());
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(c.entries_dir()), 0700u);
  EXPECT_EQ(mode_of(tmp.path + "/not"), 0700u);
}

TEST(MeasureCache, DirectoryOthersCanWriteIsRefused) {
  TempDir tmp;
  for (unsigned mode : {0770u, 0702u}) {
    const std::string dir = tmp.path + "/shared" + std::to_string(mode);
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    MeasureCache c(dir, "test machine");
    EXPECT_FALSE(c.enabled()) << std::oct << mode;
    c.store("winograd", {1.0, 2.0});
    EXPECT_FALSE(c.load("winograd").has_value());
    EXPECT_EQ(count_files(dir), 0u) << "a refused directory is never written";
  }
}

// Root hands a fresh directory to another user; anyone else uses "/", which root owns. Either
// way the test runs (never skipped).
TEST(MeasureCache, DirectoryOfAnotherUserIsRefused) {
  TempDir tmp;
  std::string dir = "/";
  if (::geteuid() == 0) {
    dir = tmp.path + "/theirs";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  }
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  ASSERT_NE(st.st_uid, ::geteuid()) << dir;
  MeasureCache c(dir, "test machine");
  EXPECT_FALSE(c.enabled());
  c.store("winograd", {1.0, 2.0});
  EXPECT_FALSE(fs::exists(fs::path(dir) / ("measure-v" + std::to_string(kMeasureCacheFormat))))
      << "a refused directory is never written";
}

TEST(MeasureCache, UncreatableDirectoryRunsWithoutCache) {
  TempDir tmp;
  write_file(tmp.path + "/a-file", "not a directory");
  MeasureCache c(tmp.path + "/a-file/lathe", "test machine");
  EXPECT_FALSE(c.enabled());
  c.store("winograd", {1.0, 2.0});
  EXPECT_FALSE(c.load("winograd").has_value());
}

// The directory the options name is the one current() uses; turned off, there is none (the
// parsing of the environment is tested in test_kernel_options.cpp).
TEST(MeasureCache, OptionsPickTheDirectory) {
  TempDir tmp;
  {
    ScopedKernelOptions o(cache_in(tmp.path + "/mine", true));
    EXPECT_EQ(MeasureCache::current().entries_dir().rfind(tmp.path + "/mine/measure-v", 0), 0u);
  }
  ScopedKernelOptions off(cache_in(tmp.path + "/mine", false));
  EXPECT_FALSE(MeasureCache::current().enabled());
}

TEST(MeasureCache, TurnedOffWritesNothing) {
  TempDir tmp;
  ScopedKernelOptions off(cache_in(tmp.path, false));
  dnnl_forget_probes();
  ConvProbeShape s;
  s.c = s.o = 24;
  s.h = s.w = 13;
  s.kh = s.kw = 3;
  s.p.groups = 24;
  s.p.padding[0] = s.p.padding[1] = 1;
  const double t = dnnl_measured_conv_s(s, 8);
  EXPECT_GT(t, 0);
  EXPECT_EQ(count_files(tmp.path), 0u);
}

// The probes go through the cache: a fresh measurement is stored, and a stored one is used
// without measuring (the stored numbers here are made up, and must come back as they are).
TEST(MeasureCache, ConvolutionProbesReadAndWriteIt) {
  TempDir tmp;
  ScopedKernelOptions on(cache_in(tmp.path, true));
  ConvProbeShape s;
  s.c = s.o = 40;
  s.h = s.w = 11;
  s.kh = s.kw = 3;
  s.p.groups = 40;
  s.p.padding[0] = s.p.padding[1] = 1;
  dnnl_forget_probes();
  const CompileTimeCounters before = compile_time_counters();
  const double measured = dnnl_measured_conv_s(s, 8);
  EXPECT_GT(measured, 0);
  EXPECT_EQ((compile_time_counters() - before).probes, 1u);
  MeasureCache& cache = MeasureCache::current();
  std::optional<std::vector<double>> stored = cache.load(dnnl_conv_probe_key(s));
  ASSERT_TRUE(stored.has_value());
  ASSERT_EQ(stored->size(), 3u);
  EXPECT_EQ((*stored)[1], measured) << "{channels-last, nChw8c, nChw16c}";
  EXPECT_TRUE(std::isinf((*stored)[2])) << "40 channels do not divide into blocks of 16";

  // A later process: nothing in memory, the entry on disk.
  cache.store(dnnl_conv_probe_key(s), {3e-3, 2e-3, INFINITY});
  dnnl_forget_probes();
  const CompileTimeCounters again = compile_time_counters();
  EXPECT_EQ(dnnl_measured_conv_s(s, 8), 2e-3);
  EXPECT_EQ(dnnl_measured_conv_s(s, 0), 3e-3);
  EXPECT_EQ((compile_time_counters() - again).probes, 0u) << "nothing measured";

  // The entry corrupted: measured again and rewritten.
  write_file(cache.entry_path(dnnl_conv_probe_key(s)), "lathe-measure-cache 1\ngarbage");
  dnnl_forget_probes();
  const double remeasured = dnnl_measured_conv_s(s, 8);
  EXPECT_NE(remeasured, 2e-3);
  stored = cache.load(dnnl_conv_probe_key(s));
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ((*stored)[1], remeasured);
}

}  // namespace
}  // namespace lathe::detail
