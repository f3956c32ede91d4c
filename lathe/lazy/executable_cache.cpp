#include "lathe/lazy/executable_cache.h"

namespace lathe::lazy {

ExecutableCache::Lookup ExecutableCache::find(uint64_t hash, const ir::Graph& graph) const {
  Lookup r;
  auto it = buckets_.find(hash);
  if (it == buckets_.end()) return r;
  for (const Entry& e : it->second) {
    if (e.graph->structurally_equal(graph)) {
      r.executable = e.executable.get();
      return r;
    }
  }
  r.collided = true;
  return r;
}

backend::Executable* ExecutableCache::insert(uint64_t hash, std::unique_ptr<ir::Graph> graph,
                                             std::unique_ptr<backend::Executable> executable) {
  std::vector<Entry>& bucket = buckets_[hash];
  bucket.push_back({std::move(graph), std::move(executable)});
  return bucket.back().executable.get();
}

size_t ExecutableCache::size() const {
  size_t n = 0;
  for (const auto& [hash, bucket] : buckets_) n += bucket.size();
  return n;
}

}  // namespace lathe::lazy
