// The lazy device's executable cache: graphs keyed by structural hash. A hash match is only a
// hint; an entry is used only when its graph is structurally equal to the one looked up, so two
// different graphs never share an executable even when their hashes collide.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/ir/graph.h"

namespace lathe::lazy {

class ExecutableCache {
 public:
  struct Lookup {
    backend::Executable* executable = nullptr;  // nullptr on a miss
    bool collided = false;  // the bucket held graphs with the same hash but another structure
  };
  Lookup find(uint64_t hash, const ir::Graph& graph) const;
  // Stores graph and executable under hash (the graph is kept for later equality checks).
  backend::Executable* insert(uint64_t hash, std::unique_ptr<ir::Graph> graph,
                              std::unique_ptr<backend::Executable> executable);
  void clear() { buckets_.clear(); }
  size_t size() const;

 private:
  struct Entry {
    std::unique_ptr<ir::Graph> graph;
    std::unique_ptr<backend::Executable> executable;
  };
  std::unordered_map<uint64_t, std::vector<Entry>> buckets_;
};

}  // namespace lathe::lazy
