#include "lathe/core/core_options.h"

#include <cstdlib>
#include <mutex>
#include <sstream>

#include "lathe/core/cpu_share.h"
#include "lathe/core/error.h"
#include "lathe/core/threads.h"

namespace lathe {
namespace {

std::mutex& default_mutex() {
  static std::mutex mu;
  return mu;
}

// Guarded by default_mutex().
CoreOptions& default_slot() {
  static CoreOptions o = core_options_from_env();
  return o;
}

}  // namespace

std::string CoreOptions::to_string() const {
  std::ostringstream os;
  os << "CoreOptions(num_threads=" << num_threads << ")";
  return os.str();
}

CoreOptions core_options_from_env() {
  CoreOptions o;
  if (const char* env = std::getenv("LATHE_NUM_THREADS")) {
    try {
      int n = std::stoi(env);
      if (n > 0) {
        o.num_threads = n;
        return o;
      }
    } catch (const std::exception&) {
    }
    throw Error(detail::str("[threads] LATHE_NUM_THREADS='", env, "' is not a positive integer"));
  }
  return o;
}

CoreOptions core_options() {
  std::lock_guard<std::mutex> lock(default_mutex());
  return default_slot();
}

void set_core_options(CoreOptions options) {
  LATHE_CHECK(options.num_threads >= 0,
              "[threads] thread count must be positive (or 0: all "
              "cores), got ",
              options.num_threads);
  {
    std::lock_guard<std::mutex> lock(default_mutex());
    default_slot() = options;
  }
  detail::apply_num_threads(options.num_threads > 0 ? options.num_threads
                                                    : process_cpu_share().threads);
}

}  // namespace lathe
