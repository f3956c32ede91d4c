// The lazy device ("trace every time"): ops on tensors on Device::lazy() record IR nodes and
// return at once; sync() builds a graph of the pending work, finds or compiles its executable
// (cache keyed by structural hash, confirmed by full structural equality) and runs it. See
// docs/lazy.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::ir {
class Graph;
}

namespace lathe {
struct OpDef;
}

namespace lathe {

// Runs every pending lazy op whose result is still alive (or that writes into a tensor) and
// turns the pending tensors into device data. Reading a lazy tensor's data (raw_data, item,
// to_vector) and moving it to the CPU call it implicitly. A no-op when nothing is pending.
void sync();

}  // namespace lathe

namespace lathe::lazy {

// Counters and times since the last reset_metrics(), as torch_xla's metrics report.
struct Metrics {
  int64_t ops_traced = 0;       // ops recorded as IR nodes
  int64_t syncs = 0;            // sync() calls that had pending work
  int64_t graphs_built = 0;     // graphs built from pending work (one per such sync)
  int64_t graph_nodes = 0;      // nodes in those graphs, summed
  int64_t graph_hashes = 0;     // structural hashes computed
  int64_t cache_hits = 0;       // executables found (hash and full structure matched)
  int64_t cache_misses = 0;     // no executable for the graph: compiled
  int64_t hash_collisions = 0;  // hash matched an entry whose structure differs
  int64_t compiles = 0;         // backend compiles
  int64_t executions = 0;       // executable runs
  int64_t transfers_to_device = 0;
  int64_t transfers_from_device = 0;
  int64_t bytes_to_device = 0;    // Tensor::to(Device::lazy()) copies from the CPU
  int64_t bytes_from_device = 0;  // Tensor::to(Device::cpu()) copies of lazy tensors
  double trace_s = 0;             // recording ops (dispatch hook) plus building the graph at sync
  double hash_s = 0;              // structural hashing and cache lookup
  double compile_s = 0;           // backend compiles
  double execute_s = 0;           // executable runs
  // One "name: value" line per counter and time.
  std::string to_string() const;
};

Metrics metrics();
void reset_metrics();

// The backend compiling lazy graphs ("interpreter" unless changed; any registered name).
// Changing it clears the executable cache.
void set_backend(const std::string& name);
std::string backend();
// Drops every cached executable.
void clear_cache();
// Number of cached executables.
size_t cache_size();

namespace testing {
// Replaces the structural hash used as the cache key (nullptr restores it), so tests can force
// different graphs into one hash bucket. Equality is still checked in full.
void set_hash_override(std::function<uint64_t(const ir::Graph&)> hash);
// The graph of the most recent sync, printed (empty before any).
std::string last_graph();
// Called (under the lazy lock) with every recorded op and the pending tensors it returned, so
// tests can compare each result's layout with eager's; nullptr removes it.
void set_record_observer(std::function<void(const OpDef&, const std::vector<Tensor>&)> observer);
}  // namespace testing

}  // namespace lathe::lazy
