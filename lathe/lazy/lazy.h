// The lazy device ("trace every time"): ops on tensors on Device::lazy() are recorded and
// return at once, each hashed into a structural hash as it is recorded; sync() finds the
// executable of the pending work by that hash (confirmed by the op at every position), builds
// and compiles a graph only on a miss, and runs it. See docs/lazy.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe {
struct OpDef;
}

namespace lathe::lazy {
// Registers the lazy device with core (lazy_api.cpp; idempotent). Every translation unit that
// includes this header calls it at static initialization, which makes the linker keep the device
// in any link of the libraries: Tensor::to(Device::lazy()) works in every program that includes
// lathe/lathe.h or this header.
bool link_lazy_device();
inline const bool lazy_device_linked = link_lazy_device();
}  // namespace lathe::lazy

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
  int64_t graphs_built = 0;     // graphs built from pending work (cache misses only)
  int64_t graph_nodes = 0;      // nodes in those graphs, summed
  int64_t graph_hashes = 0;     // cache keys computed (one per sync with work)
  int64_t cache_hits = 0;       // executables found (hash and ops matched)
  int64_t cache_misses = 0;     // no executable for the graph: compiled
  int64_t hash_collisions = 0;  // a miss in a bucket holding other entries
  int64_t compiles = 0;         // backend compiles
  int64_t executions = 0;       // executable runs
  int64_t freezes = 0;          // frozen variants compiled (module state as constants)
  int64_t freezes_dropped = 0;  // frozen variants dropped: the state they froze changed
  int64_t transfers_to_device = 0;
  int64_t transfers_from_device = 0;
  int64_t bytes_to_device = 0;    // Tensor::to(Device::lazy()) copies from the CPU
  int64_t bytes_from_device = 0;  // Tensor::to(Device::cpu()) copies of lazy tensors
  double trace_s = 0;    // recording and hashing ops, finding the needed ones, building graphs
  double hash_s = 0;     // finishing the cache key and the cache lookup
  double compile_s = 0;  // backend compiles
  double execute_s = 0;  // executable runs
  // One "name: value" line per counter and time.
  std::string to_string() const;
};

Metrics metrics();
void reset_metrics();

// The backend compiling lazy graphs ("cpu" unless changed; any registered name, such as the
// reference "interpreter").
// Changing it clears the executable cache.
void set_backend(const std::string& name);
std::string backend();
// Drops every cached executable.
void clear_cache();
// Number of cached executables.
size_t cache_size();

namespace testing {
// Maps the structural hash that recording computes to the cache bucket (nullptr: the hash
// itself), so tests can force different graphs into one bucket. An entry is still used only for
// the same hash and the same op at every recorded position.
void set_hash_override(std::function<uint64_t(uint64_t)> hash);
// The graph of the most recent sync, printed (empty before any).
std::string last_graph();
// Called (under the lazy lock) with every recorded op and the pending tensors it returned, so
// tests can compare each result's layout with eager's; nullptr removes it.
void set_record_observer(std::function<void(const OpDef&, const std::vector<Tensor>&)> observer);
}  // namespace testing

}  // namespace lathe::lazy
