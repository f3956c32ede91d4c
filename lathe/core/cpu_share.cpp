#include "lathe/core/cpu_share.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace lathe {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses a positive integer at the start of `s` (after blanks); 0 when there is none.
long long leading_int(const std::string& s) {
  size_t i = s.find_first_not_of(" \t\n");
  if (i == std::string::npos || !std::isdigit(static_cast<unsigned char>(s[i]))) return 0;
  return std::atoll(s.c_str() + i);
}

// The directories from `root + path` up to `root` ("/a/b" -> root/a/b, root/a, root).
std::vector<std::string> up_to_root(const std::string& root, std::string path) {
  std::vector<std::string> dirs;
  while (!path.empty() && path.back() == '/') path.pop_back();
  while (true) {
    dirs.push_back(root + path);
    if (path.empty()) break;
    path = path.substr(0, path.rfind('/'));
  }
  return dirs;
}

// CPUs one cgroup directory's quota allows (0: none there).
double quota_v2(const std::string& dir) {
  std::istringstream in(read_file(dir + "/cpu.max"));
  std::string quota, period;
  if (!(in >> quota >> period) || quota == "max") return 0;
  const long long q = leading_int(quota), p = leading_int(period);
  return q > 0 && p > 0 ? static_cast<double>(q) / static_cast<double>(p) : 0;
}

double quota_v1(const std::string& dir) {
  const std::string q = read_file(dir + "/cpu.cfs_quota_us");
  if (q.empty() || q[0] == '-') return 0;  // -1: no quota
  const long long quota = leading_int(q),
                  period = leading_int(read_file(dir + "/cpu.cfs_period_us"));
  return quota > 0 && period > 0 ? static_cast<double>(quota) / static_cast<double>(period) : 0;
}

// The smallest quota on the way from the process's cgroup to the root of its hierarchy, for v2
// ("0::/path") and v1 ("N:cpu,cpuacct:/path", mounted at root/cpu,cpuacct or root/cpu). Inside a
// container the process's path may not exist under the container's mount, whose root is then
// the process's own cgroup: the root is always looked at.
double cgroup_quota(const CpuShareSources& s) {
  double best = 0;
  auto take = [&](double q) {
    if (q > 0 && (best == 0 || q < best)) best = q;
  };
  std::istringstream lines(s.proc_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      for (const std::string& d : up_to_root(s.cgroup_root, path)) take(quota_v2(d));
    } else {
      std::stringstream cs(controllers);
      std::string c;
      bool cpu = false;
      while (std::getline(cs, c, ',')) cpu = cpu || c == "cpu";
      if (!cpu) continue;
      for (const std::string& mount : {s.cgroup_root + "/" + controllers, s.cgroup_root + "/cpu"})
        for (const std::string& d : up_to_root(mount, path)) take(quota_v1(d));
    }
  }
  take(quota_v2(s.cgroup_root));  // a v2 container's own root, whatever /proc says
  return best;
}

}  // namespace

CpuShareSources cpu_share_sources() {
  CpuShareSources s;
  const unsigned hw = std::thread::hardware_concurrency();
  s.hardware = hw ? static_cast<int>(hw) : 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) s.affinity = CPU_COUNT(&set);
  s.proc_cgroup = read_file("/proc/self/cgroup");
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) s.omp_num_threads = omp;
  return s;
}

CpuShare cpu_share(const CpuShareSources& s) {
  CpuShare out;
  std::ostringstream why;
  const long long omp = leading_int(s.omp_num_threads);
  if (omp > 0) {
    out.threads = static_cast<int>(std::min<long long>(omp, 1 << 16));
    why << out.threads << " threads: OMP_NUM_THREADS=" << s.omp_num_threads;
    out.reason = why.str();
    return out;
  }
  const int hardware = std::max(1, s.hardware);
  int n = s.affinity > 0 ? std::min(s.affinity, hardware) : hardware;
  out.quota = cgroup_quota(s);
  const int by_quota = out.quota > 0 ? std::max(1, static_cast<int>(std::floor(out.quota))) : 0;
  if (by_quota > 0) n = std::min(n, by_quota);
  out.threads = std::max(1, n);
  why << out.threads << " threads: affinity ";
  if (s.affinity > 0)
    why << s.affinity << " of " << hardware << " cores";
  else
    why << "unknown, " << hardware << " cores";
  if (out.quota > 0)
    why << ", cgroup CPU quota " << out.quota << " CPUs";
  else
    why << ", no cgroup CPU quota";
  out.reason = why.str();
  return out;
}

const CpuShare& process_cpu_share() {
  static const CpuShare share = cpu_share(cpu_share_sources());
  return share;
}

}  // namespace lathe
