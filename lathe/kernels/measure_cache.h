// The measurement cache: what the backend measured on this machine at compile time (layout
// probes of convolutions and reorders, the layout-tuning winner of a graph), kept on disk so that
// a later process skips the measurement. Lathe generates no code, so measurement is the only
// compile-time work worth keeping across processes.
//
// Where: KernelOptions::cache_dir (lathe/kernels/kernel_options.h: $LATHE_CACHE_DIR, else
// $XDG_CACHE_HOME/lathe, else $HOME/.cache/lathe, read once); entries live in
// its subfolder measure-v<format>/, one small text file per entry. The folder is created 0700; a
// folder owned by another user or writable by group or others is refused (one warning, no
// cache), as is one that cannot be created (an unwritable HOME). KernelOptions::cache = false
// (LATHE_CACHE=0) turns it off.
//
// An entry holds the machine fingerprint (CPU model, the ISA oneDNN uses, oneDNN's version,
// Lathe's format version), the thread count, its key, its numbers and a checksum over all of
// it; it is written to a temporary file and renamed into place, so concurrent writers and
// readers see a whole entry or none. An entry that fails the checksum, is truncated, or belongs
// to another fingerprint, thread count or key (a file name collision) is ignored, and the
// caller's fresh measurement replaces it.
//
// What is stored must be something a fresh measurement could have produced: every cached
// decision is one of the valid choices, so a stale or foreign entry costs speed, never results.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe::detail {

// Bumped when the meaning of a stored measurement changes (a probe measures something else).
inline constexpr int kMeasureCacheFormat = 1;

// Counters of the measurement cache in this process (for tests and LATHE_LOGS=passes).
struct MeasureCacheStats {
  uint64_t hits = 0;      // entries read and verified
  uint64_t misses = 0;    // no entry (or the cache is off)
  uint64_t rejected = 0;  // entries present but corrupt, truncated or foreign
  uint64_t writes = 0;    // entries written
};

class MeasureCache {
 public:
  // The cache the process's KernelOptions describe now (cache, cache_dir); re-resolved when
  // set_kernel_options changes them. Thread safe.
  static MeasureCache& current();

  // A cache in `dir` (created 0700 if missing) with the given fingerprint; disabled (with one
  // warning per directory) when the directory is refused. For tests and current().
  MeasureCache(std::string dir, std::string fingerprint);

  bool enabled() const { return !entries_dir_.empty(); }
  // The folder holding the entries (empty when disabled).
  const std::string& entries_dir() const { return entries_dir_; }

  // The numbers stored under `key` for the current thread count, or nullopt.
  std::optional<std::vector<double>> load(const std::string& key);
  // Stores `values` under `key` (atomically replacing an older entry). Errors are ignored: a
  // cache that cannot be written is a cache that misses.
  void store(const std::string& key, const std::vector<double>& values);

  // The path of the file holding `key` (it may not exist).
  std::string entry_path(const std::string& key) const;

 private:
  std::string header(const std::string& key) const;

  std::string entries_dir_;
  std::string fingerprint_;
};

// This process's counters, summed over every MeasureCache.
MeasureCacheStats measure_cache_stats();

// The machine fingerprint: CPU model name (/proc/cpuinfo), the ISA oneDNN dispatches to,
// oneDNN's version, the cache format. Computed once.
const std::string& machine_fingerprint();

// A 64-bit FNV-1a hash of `s` as 16 hex digits (entry names, graph keys).
std::string hex_hash64(const std::string& s);

}  // namespace lathe::detail
