#include "lathe/kernels/measure_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <set>
#include <sstream>

#include "lathe/core/threads.h"
#include "lathe/kernels/kernel_options.h"

namespace lathe::detail {
namespace {

std::atomic<uint64_t> g_hits{0}, g_misses{0}, g_rejected{0}, g_writes{0};

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// One warning per directory and reason: a refused cache must not flood a long run's output.
void warn_once(const std::string& text) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (!said.insert(text).second) return;
  std::cerr << "[lathe] warning: measurement cache: " << text << "; running without it\n";
}

// Creates `path` (and its missing parents) 0700; true when it exists as a directory afterwards.
bool make_dirs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !make_dirs(path.substr(0, slash))) return false;
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) {
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  return false;
}

// Empty when the directory may hold the cache, else why not.
std::string refusal(const std::string& path) {
  if (!make_dirs(path)) return "cannot create '" + path + "': " + std::strerror(errno);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "cannot read '" + path + "'";
  if (st.st_uid != ::geteuid())
    return "'" + path + "' belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "'" + path + "' is writable by group or others (mode " + [&] {
      char b[8];
      std::snprintf(b, sizeof b, "%03o", static_cast<unsigned>(st.st_mode & 0777));
      return std::string(b);
    }() + ")";
  if (::access(path.c_str(), W_OK | X_OK) != 0) return "'" + path + "' is not writable";
  return "";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    return name;
  }
  return "unknown cpu";
}

std::string format_values(const std::vector<double>& values) {
  std::string out;
  char buf[64];
  for (double v : values) {
    std::snprintf(buf, sizeof buf, " %a", v);  // hex floats: read back exactly
    out += buf;
  }
  return out;
}

}  // namespace

std::string hex_hash64(const std::string& s) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a64(s)));
  return buf;
}

const std::string& machine_fingerprint() {
  static const std::string fp = [] {
    const dnnl_version_t* v = dnnl_version();
    std::ostringstream s;
    s << cpu_model_name() << " | isa " << static_cast<int>(dnnl::get_effective_cpu_isa())
      << " | onednn " << v->major << "." << v->minor << "." << v->patch << " " << v->hash
      << " | lathe measure format " << kMeasureCacheFormat;
    std::string out = s.str();
    for (char& c : out)
      if (c == '\n' || c == '\r') c = ' ';
    return out;
  }();
  return fp;
}

MeasureCache& MeasureCache::current() {
  static std::mutex mu;
  // Every cache made stays alive: a reference handed out must not dangle when the environment
  // changes (tests switch directories); there are as many as directories used.
  static std::map<std::string, std::unique_ptr<MeasureCache>> caches;
  const std::string dir = kernel_options().measure_cache_dir();
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<MeasureCache>& c = caches[dir];
  if (!c) c = std::make_unique<MeasureCache>(dir, machine_fingerprint());
  return *c;
}

MeasureCache::MeasureCache(std::string dir, std::string fingerprint)
    : fingerprint_(std::move(fingerprint)) {
  if (dir.empty()) return;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (std::string why = refusal(dir); !why.empty()) {
    warn_once(why);
    return;
  }
  const std::string entries = dir + "/measure-v" + std::to_string(kMeasureCacheFormat);
  if (std::string why = refusal(entries); !why.empty()) {
    warn_once(why);
    return;
  }
  entries_dir_ = entries;
}

std::string MeasureCache::header(const std::string& key) const {
  return "lathe-measure-cache " + std::to_string(kMeasureCacheFormat) +
         "\nfingerprint: " + fingerprint_ + "\nthreads: " + std::to_string(lathe::num_threads()) +
         "\nkey: " + key + "\n";
}

std::string MeasureCache::entry_path(const std::string& key) const {
  return entries_dir_ + "/" +
         hex_hash64(fingerprint_ + "\n" + std::to_string(lathe::num_threads()) + "\n" + key);
}

std::optional<std::vector<double>> MeasureCache::load(const std::string& key) {
  if (!enabled()) {
    g_misses.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  std::ifstream in(entry_path(key), std::ios::binary);
  if (!in) {
    g_misses.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  auto reject = [] {
    g_rejected.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  };
  // header, "values:..." line, "checksum: <hex>\n"
  const std::string head = header(key);
  if (text.size() > (1 << 20) || text.compare(0, head.size(), head) != 0) return reject();
  const size_t sum_at = text.rfind("checksum: ");
  if (sum_at == std::string::npos || sum_at < head.size()) return reject();
  const std::string body = text.substr(0, sum_at);
  if (text.substr(sum_at) != "checksum: " + hex_hash64(body) + "\n") return reject();
  const std::string values_line = body.substr(head.size());
  if (values_line.rfind("values:", 0) != 0 || values_line.back() != '\n') return reject();
  std::istringstream vs(values_line.substr(7));
  std::vector<double> values;
  std::string tok;
  while (vs >> tok) {
    char* end = nullptr;
    const double v = std::strtod(tok.c_str(), &end);
    if (end == tok.c_str() || *end != '\0') return reject();
    values.push_back(v);
  }
  g_hits.fetch_add(1, std::memory_order_relaxed);
  return values;
}

void MeasureCache::store(const std::string& key, const std::vector<double>& values) {
  if (!enabled() || key.find('\n') != std::string::npos) return;
  const std::string body = header(key) + "values:" + format_values(values) + "\n";
  const std::string text = body + "checksum: " + hex_hash64(body) + "\n";
  const std::string path = entry_path(key);
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = ::close(fd) == 0 && done == text.size();
  // rename replaces the entry atomically: a concurrent reader sees the old file or the new one.
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  g_writes.fetch_add(1, std::memory_order_relaxed);
}

MeasureCacheStats measure_cache_stats() {
  MeasureCacheStats s;
  s.hits = g_hits.load(std::memory_order_relaxed);
  s.misses = g_misses.load(std::memory_order_relaxed);
  s.rejected = g_rejected.load(std::memory_order_relaxed);
  s.writes = g_writes.load(std::memory_order_relaxed);
  return s;
}

}  // namespace lathe::detail
