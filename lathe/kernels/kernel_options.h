// KernelOptions: the switches of Lathe's kernels (lathe/kernels) in one typed struct. The
// environment switches (LATHE_CACHE, LATHE_CACHE_DIR, LATHE_GEMV) are read once, by
// kernel_options_from_env, into the process default; code replaces it with set_kernel_options
// (tests: ScopedKernelOptions).
#pragma once

#include <string>
#include <utility>

namespace lathe::detail {

struct KernelOptions {
  // The measurement cache (lathe/kernels/measure_cache.h): on unless LATHE_CACHE=0.
  bool cache = true;
  // Its directory: $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe, else $HOME/.cache/lathe; empty
  // when none is set (then there is no cache).
  std::string cache_dir;
  // Batch-1 f32 linear layers with large weights run Lathe's own memory-bound GEMV kernel; off
  // (LATHE_GEMV=0), every f32 linear goes to oneDNN (for comparing the two paths).
  bool gemv = true;

  // The directory the measurement cache uses: cache_dir, or empty when the cache is off.
  std::string measure_cache_dir() const { return cache ? cache_dir : std::string(); }
  // One line: every field as name=value.
  std::string to_string() const;
};

// The options the environment asks for now (reads it on each call; the process default reads
// it once): LATHE_CACHE ("0": off, else on), LATHE_CACHE_DIR (with XDG_CACHE_HOME and HOME as
// fallbacks), LATHE_GEMV ("0": off, else on). The one place in lathe/kernels that reads LATHE_*.
KernelOptions kernel_options_from_env();

// The process default: kernel_options_from_env() at first use, or what set_kernel_options
// stored since. Thread safe.
KernelOptions kernel_options();
// Replaces the process default. Thread safe.
void set_kernel_options(KernelOptions options);
// kernel_options().gemv without copying the options (read on every linear call).
bool kernel_gemv_enabled();

// Sets the process default for a scope, then restores the one before (for tests).
class ScopedKernelOptions {
 public:
  explicit ScopedKernelOptions(KernelOptions options) : old_(kernel_options()) {
    set_kernel_options(std::move(options));
  }
  ~ScopedKernelOptions() { set_kernel_options(std::move(old_)); }
  ScopedKernelOptions(const ScopedKernelOptions&) = delete;
  ScopedKernelOptions& operator=(const ScopedKernelOptions&) = delete;

 private:
  KernelOptions old_;
};

}  // namespace lathe::detail
