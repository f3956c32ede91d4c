// The share of the machine's CPUs this process may use, and so Lathe's default thread count:
// the affinity mask, the cgroup CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
// `cpu.cfs_period_us`, the smallest on the way from the process's cgroup to the root) and
// OMP_NUM_THREADS. A pod limited to 1.5 CPUs on a 16-core node gets 1 thread, not 16.
#pragma once

#include <string>

namespace lathe {

// Where the share is read from; tests point the paths at a fake cgroup tree.
struct CpuShareSources {
  int hardware = 1;         // the cores the machine has
  int affinity = 0;         // CPUs in the affinity mask (0: unknown)
  std::string proc_cgroup;  // the text of /proc/self/cgroup ("" when unreadable)
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string omp_num_threads;  // the OMP_NUM_THREADS variable ("" when unset)
};

struct CpuShare {
  int threads = 1;     // the default thread count (at least 1)
  double quota = 0;    // CPUs the cgroup quota allows (0: no quota found)
  std::string reason;  // why: "2 threads: affinity 2 of 2 cores, no cgroup CPU quota"
};

// This process's sources: sched_getaffinity, /proc/self/cgroup, /sys/fs/cgroup, the environment.
CpuShareSources cpu_share_sources();

// The rule: OMP_NUM_THREADS when it is a positive integer (its first entry); else the smaller of
// the affinity count and the quota rounded down (at least 1), and of the cores.
CpuShare cpu_share(const CpuShareSources& sources);

// cpu_share(cpu_share_sources()), computed once per process.
const CpuShare& process_cpu_share();

}  // namespace lathe
