// The cpu backend's switches, as one typed struct (CpuBackendOptions). They are filled from the
// environment in one place (options_from_environment, the only getenv of a LATHE_ switch in
// lathe/backend) and can be set from code (set_options, ScopedCpuOptions) and from Python
// (lathe.cpu_options()). `LATHE_LOGS=passes` prints them once (to_string).
//
//   LATHE_LOGS              passes/all: the pass manager's log (log_passes); passes_graphs also
//                           prints the graph after each pass (log_graphs); threads/all: the
//                           executables' thread-count changes (log_threads)
//   LATHE_DISABLE_PASSES    comma-separated pass names to skip (disabled_passes)
//   LATHE_CPU_BLOCK         0, 8 or 16: plan_layouts' block instead of its choice (block)
//   LATHE_CPU_EXECUTOR      interpreter: run the optimized graph on the interpreter (executor)
//   LATHE_CPU_LAYOUT_TUNING 0 or 1 (default 1): time the layout plans on the whole graph
//   LATHE_CPU_WINOGRAD      0 or 1 (default: the machine's measurement): Winograd convolutions
//   LATHE_CPU_LAYOUT_REGIONS 0 or 1 (default 1): blocked layouts per region, not whole-graph
//   LATHE_DW_FUSION         0 turns fuse_dw_conv off (default on)
//   LATHE_PROFILE           1: the planned executor times each step; steps: also lists them
//   LATHE_CPU_ADAPTIVE_THREADS 0 or 1 (default 1): an executable that measures its calls slower
//                           on all threads than on one (a busy machine) runs them on one
//                           (adaptive_threads.h)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lathe/core/dtype.h"

namespace lathe::backend::cpu {

enum class ProfileMode { off, summary, steps };

struct CpuBackendOptions {
  bool log_passes = false;
  bool log_graphs = false;
  bool log_threads = false;
  std::vector<std::string> disabled_passes;
  std::optional<int> block;  // nullopt: plan_layouts chooses
  bool interpreter = false;  // LATHE_CPU_EXECUTOR=interpreter
  bool layout_tuning = true;
  std::optional<bool> winograd;  // nullopt: the machine's measured choice
  bool layout_regions = true;
  bool dw_fusion = true;
  ProfileMode profile = ProfileMode::off;
  bool adaptive_threads = true;
  // Not from the environment: set per compile from CompileContext::precision (lathe::compile's
  // CompileOptions::precision); f32 or bf16, read by the lower_precision pass.
  DType precision = DType::f32;

  // One line per field, "name=value" separated by spaces.
  std::string to_string() const;
  // What changes the compiled result (the layout-tuning cache key hashes it): not the logs, the
  // profile, the executor or the
  // adaptive thread count.
  std::string result_key() const;
  bool operator==(const CpuBackendOptions&) const = default;
};

// Parses the environment (throws lathe::Error on a malformed value, naming the variable).
CpuBackendOptions options_from_environment();

// The options in effect: those set from code (set_options / ScopedCpuOptions) when set, else the
// environment's, parsed once and again only when one of the variables changes (tests and Python
// set them at run time). Returned by value: a snapshot.
CpuBackendOptions options();
// Options from code, taking precedence over the environment; nullopt returns to the environment.
void set_options(std::optional<CpuBackendOptions> o);

// Sets the options for a scope (tests), restoring the previous state at its end.
class ScopedCpuOptions {
 public:
  explicit ScopedCpuOptions(CpuBackendOptions o);
  ~ScopedCpuOptions();
  ScopedCpuOptions(const ScopedCpuOptions&) = delete;
  ScopedCpuOptions& operator=(const ScopedCpuOptions&) = delete;

 private:
  std::optional<CpuBackendOptions> previous_;
};

}  // namespace lathe::backend::cpu
