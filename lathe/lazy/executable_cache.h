// The lazy device's executable cache, keyed by the structural hash that recording computes
// incrementally (see docs/lazy.md). A key match is confirmed cheaply (the same key, the same
// number of recorded ops and the same op at every position), so a hit builds no ir::Graph; a
// bucket may hold several entries when a test forces keys into one bucket.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/lazy/freezing.h"
#include "lathe/ops/op_def.h"

namespace lathe::lazy {

class ExecutableCache {
 public:
  struct Entry {
    uint64_t key = 0;               // structural hash of the recorded window and its outputs
    std::vector<const OpDef*> ops;  // the op recorded at each position of the window
    std::vector<int> arg_slots;     // graph input i is the window's device data slot i
    std::unique_ptr<backend::Executable> executable;
    // Freezing the module state the graph reads (null: the backend uses no constants); mutable:
    // each run of a found entry steps it.
    mutable std::unique_ptr<FreezeState> freeze;
  };
  struct Lookup {
    const Entry* entry = nullptr;  // nullptr on a miss
    bool collided = false;         // a miss in a bucket holding entries for other keys or ops
  };
  Lookup find(uint64_t bucket, uint64_t key, std::span<const OpDef* const> ops) const;
  const Entry& insert(uint64_t bucket, Entry entry);
  void clear() { buckets_.clear(); }
  size_t size() const;

 private:
  std::unordered_map<uint64_t, std::vector<Entry>> buckets_;
};

}  // namespace lathe::lazy
