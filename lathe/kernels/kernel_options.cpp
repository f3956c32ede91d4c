#include "lathe/kernels/kernel_options.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>

namespace lathe::detail {
namespace {

bool is_zero(const char* v) { return v && std::string(v) == "0"; }

std::string cache_dir_from_env() {
  if (const char* d = std::getenv("LATHE_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/lathe";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/lathe";
  return "";
}

std::mutex& default_mutex() {
  static std::mutex mu;
  return mu;
}

// kernel_options().gemv, mirrored for the hot path: -1 until the default is first read.
std::atomic<int> g_gemv{-1};

// Guarded by default_mutex().
KernelOptions& default_slot() {
  static KernelOptions o = [] {
    KernelOptions d = kernel_options_from_env();
    g_gemv.store(d.gemv ? 1 : 0, std::memory_order_relaxed);
    return d;
  }();
  return o;
}

}  // namespace

std::string KernelOptions::to_string() const {
  std::ostringstream os;
  os << "KernelOptions(cache=" << (cache ? "true" : "false") << ", cache_dir=" << cache_dir
     << ", gemv=" << (gemv ? "true" : "false") << ")";
  return os.str();
}

KernelOptions kernel_options_from_env() {
  KernelOptions o;
  o.cache = !is_zero(std::getenv("LATHE_CACHE"));
  o.cache_dir = cache_dir_from_env();
  o.gemv = !is_zero(std::getenv("LATHE_GEMV"));
  return o;
}

KernelOptions kernel_options() {
  std::lock_guard<std::mutex> lock(default_mutex());
  return default_slot();
}

void set_kernel_options(KernelOptions options) {
  std::lock_guard<std::mutex> lock(default_mutex());
  KernelOptions& slot = default_slot();
  slot = std::move(options);
  g_gemv.store(slot.gemv ? 1 : 0, std::memory_order_relaxed);
}

bool kernel_gemv_enabled() {
  const int v = g_gemv.load(std::memory_order_relaxed);
  if (v >= 0) return v != 0;
  return kernel_options().gemv;
}

}  // namespace lathe::detail
