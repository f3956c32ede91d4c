#pragma once
// LATHE_PROFILE's report of a planned executable: where the time of its calls went, by op and
// by the slowest steps, printed to stderr when the executable goes away.

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::backend::cpu {

// One step of the executable and the wall time its planned calls spent in it.
struct StepProfile {
  std::string op;     // "conv2d_fused"
  std::string name;   // "%5 (conv2d_fused)"
  std::string shape;  // the first output's sizes in the latest plan, or empty
  std::string attrs;  // the step's attributes, for LATHE_PROFILE=steps
  int64_t ns = 0;     // summed over `calls`
};

// Prints the per-op summary and the 12 slowest steps; with `every_step`, also every step in
// order with its time, output sizes and attributes.
void print_step_profile(const std::vector<StepProfile>& steps, int64_t calls, bool every_step);

}  // namespace lathe::backend::cpu
