#include "lathe/backend/cpu/cpu_options.h"

#include <cstdlib>
#include <mutex>
#include <sstream>

#include "lathe/base/error.h"

namespace lathe::backend::cpu {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The variables, in one place: options_from_environment reads them, options() watches them.
constexpr const char* kVariables[] = {
    "LATHE_LOGS",
    "LATHE_DISABLE_PASSES",
    "LATHE_CPU_BLOCK",
    "LATHE_CPU_EXECUTOR",
    "LATHE_CPU_LAYOUT_TUNING",
    "LATHE_CPU_WINOGRAD",
    "LATHE_CPU_LAYOUT_REGIONS",
    "LATHE_DW_FUSION",
    "LATHE_PROFILE",
    "LATHE_CPU_ADAPTIVE_THREADS",
};

// The raw values, "" for unset, each prefixed with its presence.
std::vector<std::string> raw_environment() {
  std::vector<std::string> raw;
  for (const char* name : kVariables) {
    const char* v = std::getenv(name);
    raw.push_back(v ? std::string("=") + v : std::string());
  }
  return raw;
}

std::optional<std::string> value(const std::vector<std::string>& raw, size_t i) {
  if (raw[i].empty()) return std::nullopt;
  return raw[i].substr(1);
}

bool parse_bool(const std::optional<std::string>& v, const char* who, const char* name,
                bool fallback) {
  if (!v) return fallback;
  LATHE_CHECK(*v == "0" || *v == "1", who, " ", name, " must be 0 or 1, got '", *v, "'");
  return *v == "1";
}

CpuBackendOptions parse(const std::vector<std::string>& raw) {
  CpuBackendOptions o;
  if (auto v = value(raw, 0)) {
    bool graph = false;
    for (const std::string& t : split_list(*v)) {
      if (t == "passes" || t == "all") o.log_passes = true;
      if (t == "graph" || t == "all") graph = true;
      if (t == "threads" || t == "all") o.log_threads = true;
    }
    o.log_graphs = o.log_passes && graph;
  }
  if (auto v = value(raw, 1)) o.disabled_passes = split_list(*v);
  if (auto v = value(raw, 2)) {
    LATHE_CHECK(*v == "0" || *v == "8" || *v == "16",
                "[plan_layouts] LATHE_CPU_BLOCK must be 0, 8 or 16, got '", *v, "'");
    o.block = std::stoi(*v);
  }
  if (auto v = value(raw, 3)) o.interpreter = *v == "interpreter";
  o.layout_tuning = parse_bool(value(raw, 4), "[cpu]", "LATHE_CPU_LAYOUT_TUNING", true);
  if (auto v = value(raw, 5))
    o.winograd = parse_bool(v, "[plan_layouts]", "LATHE_CPU_WINOGRAD", false);
  o.layout_regions = parse_bool(value(raw, 6), "[plan_layouts]", "LATHE_CPU_LAYOUT_REGIONS", true);
  if (auto v = value(raw, 7)) o.dw_fusion = *v != "0";
  if (auto v = value(raw, 8)) {
    if (*v == "steps")
      o.profile = ProfileMode::steps;
    else if (!v->empty() && *v != "0")
      o.profile = ProfileMode::summary;
  }
  o.adaptive_threads = parse_bool(value(raw, 9), "[cpu]", "LATHE_CPU_ADAPTIVE_THREADS", true);
  return o;
}

struct State {
  std::mutex mu;
  std::optional<CpuBackendOptions> from_code;
  std::optional<std::vector<std::string>> raw;  // what `parsed` was parsed from
  CpuBackendOptions parsed;
};

State& state() {
  static State s;
  return s;
}

const char* profile_name(ProfileMode p) {
  switch (p) {
    case ProfileMode::off:
      return "off";
    case ProfileMode::summary:
      return "1";
    case ProfileMode::steps:
      return "steps";
  }
  return "?";
}

}  // namespace

CpuBackendOptions options_from_environment() { return parse(raw_environment()); }

CpuBackendOptions options() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.from_code) return *s.from_code;
  std::vector<std::string> raw = raw_environment();
  if (!s.raw || *s.raw != raw) {
    s.parsed = parse(raw);  // throws on a malformed value, and parses again next time
    s.raw = std::move(raw);
  }
  return s.parsed;
}

void set_options(std::optional<CpuBackendOptions> o) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.from_code = std::move(o);
}

ScopedCpuOptions::ScopedCpuOptions(CpuBackendOptions o) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  previous_ = s.from_code;
  s.from_code = std::move(o);
}

ScopedCpuOptions::~ScopedCpuOptions() { set_options(previous_); }

std::string CpuBackendOptions::result_key() const {
  std::ostringstream s;
  s << "disabled_passes=";
  for (size_t i = 0; i < disabled_passes.size(); ++i) s << (i ? "," : "") << disabled_passes[i];
  s << " block=" << (block ? std::to_string(*block) : "auto") << " layout_tuning=" << layout_tuning
    << " winograd=" << (winograd ? std::to_string(*winograd) : "auto")
    << " layout_regions=" << layout_regions << " dw_fusion=" << dw_fusion
    << " precision=" << dtype_name(precision);
  return s.str();
}

std::string CpuBackendOptions::to_string() const {
  std::ostringstream s;
  s << "log_passes=" << log_passes << " log_graphs=" << log_graphs
    << " log_threads=" << log_threads << " " << result_key()
    << " executor=" << (interpreter ? "interpreter" : "planned")
    << " adaptive_threads=" << adaptive_threads
    << " profile=" << profile_name(profile);
  return s.str();
}

}  // namespace lathe::backend::cpu
