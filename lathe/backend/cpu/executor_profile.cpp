#include "lathe/backend/cpu/executor_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace lathe::backend::cpu {

void print_step_profile(const std::vector<StepProfile>& steps, int64_t calls, bool every_step) {
  if (calls <= 0) return;
  auto ms_of = [&](const StepProfile& s) { return static_cast<double>(s.ns) * 1e-6 / calls; };
  double total = 0;
  std::map<std::string, std::pair<double, int>> by_op;
  for (const StepProfile& s : steps) {
    total += ms_of(s);
    auto& e = by_op[s.op];
    e.first += ms_of(s);
    e.second += 1;
  }
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [name, e] : by_op) ops.emplace_back(e.first, name);
  std::sort(ops.rbegin(), ops.rend());
  std::fprintf(stderr, "[lathe.profile] %zu steps, %lld planned calls, %.3f ms per call\n",
               steps.size(), static_cast<long long>(calls), total);
  for (const auto& [ms, name] : ops)
    std::fprintf(stderr, "[lathe.profile]   %-22s %4d steps %9.3f ms %5.1f%%\n", name.c_str(),
                 by_op.at(name).second, ms, total > 0 ? 100 * ms / total : 0.0);
  if (every_step) {
    for (size_t k = 0; k < steps.size(); ++k)
      std::fprintf(stderr, "[lathe.profile]   step %3zu %-28s %9.3f ms  %s  %s\n", k,
                   steps[k].name.c_str(), ms_of(steps[k]), steps[k].shape.c_str(),
                   steps[k].attrs.c_str());
  }
  std::vector<std::pair<double, size_t>> slow;
  for (size_t k = 0; k < steps.size(); ++k) slow.emplace_back(ms_of(steps[k]), k);
  std::sort(slow.rbegin(), slow.rend());
  for (size_t i = 0; i < std::min<size_t>(slow.size(), 12); ++i) {
    const StepProfile& s = steps[slow[i].second];
    std::fprintf(stderr, "[lathe.profile]   slowest %-28s %9.3f ms  %s\n", s.name.c_str(),
                 slow[i].first, s.shape.c_str());
  }
}

}  // namespace lathe::backend::cpu
