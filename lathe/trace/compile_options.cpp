#include "lathe/trace/compile_options.h"

#include <cstdlib>
#include <mutex>
#include <sstream>

#include "lathe/core/error.h"
#include "lathe/core/threads.h"
#include "lathe/trace/compile_logs.h"
#include "lathe/trace/partition.h"

namespace lathe {

namespace {

const char* policy_name(DynamicPolicy p) {
  switch (p) {
    case DynamicPolicy::kStatic:
      return "static";
    case DynamicPolicy::kAuto:
      return "auto";
    case DynamicPolicy::kDynamic:
      return "dynamic";
  }
  return "?";
}

// LATHE_COMPILE_VERIFY: unset, empty or 0: off; 1: CompileOptions' default count; N: N calls.
void parse_verify(const char* env, CompileOptions& o) {
  if (!env || !*env) return;
  char* end = nullptr;
  long v = std::strtol(env, &end, 10);
  LATHE_CHECK(*end == '\0' && v >= 0,
              "[compile] LATHE_COMPILE_VERIFY must be 0, 1 or a number of "
              "calls to verify per cache entry, got '",
              env, "'");
  if (v == 0) return;
  o.verify = true;
  if (v != 1) o.verify_calls = static_cast<int>(v);
}

// LATHE_PRECISION: unset, empty or f32: f32; bf16: bf16.
void parse_precision(const char* env, CompileOptions& o) {
  if (!env || !*env) return;
  const std::string v = env;
  LATHE_CHECK(v == "f32" || v == "bf16", "[compile] LATHE_PRECISION must be f32 or bf16, got '", v,
              "'");
  o.precision = v == "bf16" ? DType::bf16 : DType::f32;
}

std::mutex& default_mutex() {
  static std::mutex mu;
  return mu;
}

// Guarded by default_mutex().
CompileOptions& default_slot() {
  static CompileOptions o = [] {
    CompileOptions d = compile_options_from_env();
    if (!d.logs.empty()) {
      detail::log_options(d.to_string());
      detail::log_options(num_threads_reason());
    }
    return d;
  }();
  return o;
}

}  // namespace

std::string CompileOptions::to_string() const {
  std::ostringstream os;
  os << "CompileOptions(backend=" << backend << ", dynamic=" << policy_name(dynamic)
     << ", recompile_limit=" << recompile_limit
     << ", error_on_recompile_limit=" << (error_on_recompile_limit ? "true" : "false")
     << ", name=" << name << ", freeze=" << (freeze ? "true" : "false")
     << ", precision=" << dtype_name(precision) << ", verify=" << (verify ? "true" : "false")
     << ", verify_calls=" << verify_calls << ", verify_rtol=" << verify_rtol
     << ", verify_atol=" << verify_atol << ", fullgraph=" << (fullgraph ? "true" : "false")
     << ", logs=" << logs << ", partitioner=" << (partitioner ? partitioner->name() : "default")
     << ")";
  return os.str();
}

CompileOptions compile_options_from_env() {
  CompileOptions o;
  if (const char* logs = std::getenv("LATHE_LOGS")) {
    try {
      detail::parse_log_topics(logs);
      o.logs = logs;
    } catch (const Error& e) {
      detail::log_warning(detail::str(e.what(), " in LATHE_LOGS; ignored"));
    }
  }
  parse_verify(std::getenv("LATHE_COMPILE_VERIFY"), o);
  parse_precision(std::getenv("LATHE_PRECISION"), o);
  return o;
}

CompileOptions default_compile_options() {
  std::lock_guard<std::mutex> lock(default_mutex());
  return default_slot();
}

void set_default_compile_options(CompileOptions options) {
  const unsigned topics = detail::parse_log_topics(options.logs);
  {
    std::lock_guard<std::mutex> lock(default_mutex());
    default_slot() = std::move(options);
  }
  detail::set_log_topics(topics);  // outside the lock: its first use reads the default
}

}  // namespace lathe
