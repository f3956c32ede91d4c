// The default thread count (lathe/core/cpu_share.h) from a fake machine: the affinity mask, the
// cgroup v2 and v1 CPU quotas read from a fake cgroup tree (the process's cgroup and every one
// above it), and OMP_NUM_THREADS.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "lathe/core/cpu_share.h"
#include "lathe/core/threads.h"
#include "tests/test_env.h"

namespace lathe {
namespace {

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

CpuShareSources machine(int hardware, int affinity, const std::string& root) {
  CpuShareSources s;
  s.hardware = hardware;
  s.affinity = affinity;
  s.cgroup_root = root;
  return s;
}

TEST(CpuShare, AffinityMaskLimitsTheCores) {
  testing::TempDir dir;
  CpuShare c = cpu_share(machine(16, 4, dir.path));
  EXPECT_EQ(c.threads, 4);
  EXPECT_EQ(c.quota, 0);
  EXPECT_EQ(c.reason, "4 threads: affinity 4 of 16 cores, no cgroup CPU quota");
  EXPECT_EQ(cpu_share(machine(2, 0, dir.path)).threads, 2) << "unknown affinity: the cores";
}

TEST(CpuShare, CgroupV2QuotaOfTheProcessCgroupAndItsParents) {
  testing::TempDir dir;
  CpuShareSources s = machine(16, 16, dir.path);
  s.proc_cgroup = "0::/kubepods/pod1/app\n";
  write(dir.path + "/kubepods/pod1/app/cpu.max", "max 100000\n");
  write(dir.path + "/kubepods/pod1/cpu.max", "150000 100000\n");  // 1.5 CPUs
  write(dir.path + "/kubepods/cpu.max", "800000 100000\n");
  CpuShare c = cpu_share(s);
  EXPECT_DOUBLE_EQ(c.quota, 1.5);
  EXPECT_EQ(c.threads, 1) << "1.5 CPUs round down";
  EXPECT_NE(c.reason.find("cgroup CPU quota 1.5 CPUs"), std::string::npos) << c.reason;
  write(dir.path + "/kubepods/pod1/cpu.max", "max 100000\n");
  EXPECT_EQ(cpu_share(s).threads, 8);
  write(dir.path + "/kubepods/cpu.max", "max 100000\n");
  EXPECT_EQ(cpu_share(s).threads, 16);
}

TEST(CpuShare, QuotaOfOneCpuIsOneThread) {
  testing::TempDir dir;
  CpuShareSources s = machine(2, 2, dir.path);
  s.proc_cgroup = "0::/\n";
  write(dir.path + "/cpu.max", "100000 100000\n");
  EXPECT_EQ(cpu_share(s).threads, 1);
  write(dir.path + "/cpu.max", "50000 100000\n");  // half a CPU: still one thread
  EXPECT_EQ(cpu_share(s).threads, 1);
}

TEST(CpuShare, ContainerRootIsReadWhateverProcSays) {
  testing::TempDir dir;
  CpuShareSources s = machine(8, 8, dir.path);
  s.proc_cgroup = "0::/system.slice/docker-abc.scope\n";  // not under the container's mount
  write(dir.path + "/cpu.max", "300000 100000\n");
  EXPECT_EQ(cpu_share(s).threads, 3);
}

TEST(CpuShare, CgroupV1Quota) {
  testing::TempDir dir;
  CpuShareSources s = machine(16, 16, dir.path);
  s.proc_cgroup = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n";
  write(dir.path + "/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000\n");
  write(dir.path + "/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cpu_share(s).threads, 2);
  write(dir.path + "/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cpu_share(s).threads, 16) << "-1: no quota";
}

TEST(CpuShare, AffinityAndQuotaTogetherTakeTheSmaller) {
  testing::TempDir dir;
  CpuShareSources s = machine(16, 2, dir.path);
  s.proc_cgroup = "0::/a\n";
  write(dir.path + "/a/cpu.max", "400000 100000\n");
  EXPECT_EQ(cpu_share(s).threads, 2);
}

TEST(CpuShare, OmpNumThreadsWins) {
  testing::TempDir dir;
  CpuShareSources s = machine(16, 2, dir.path);
  s.omp_num_threads = "6,2";
  CpuShare c = cpu_share(s);
  EXPECT_EQ(c.threads, 6);
  EXPECT_EQ(c.reason, "6 threads: OMP_NUM_THREADS=6,2");
  s.omp_num_threads = "zero";
  EXPECT_EQ(cpu_share(s).threads, 2) << "not a positive integer: ignored, as OpenMP does";
}

TEST(CpuShare, MalformedFilesAreNoQuota) {
  testing::TempDir dir;
  CpuShareSources s = machine(4, 4, dir.path);
  s.proc_cgroup = "garbage\n0::/x\n";
  write(dir.path + "/x/cpu.max", "lots\n");
  EXPECT_EQ(cpu_share(s).threads, 4);
}

TEST(CpuShare, ThisProcessHasAReason) {
  const CpuShare& c = process_cpu_share();
  EXPECT_GE(c.threads, 1);
  EXPECT_FALSE(num_threads_reason().empty());
  EXPECT_NE(num_threads_reason().find("threads"), std::string::npos);
}

}  // namespace
}  // namespace lathe
