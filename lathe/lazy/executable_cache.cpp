#include "lathe/lazy/executable_cache.h"

#include <algorithm>

namespace lathe::lazy {

ExecutableCache::Lookup ExecutableCache::find(uint64_t bucket, uint64_t key,
                                              std::span<const OpDef* const> ops) const {
  Lookup r;
  auto it = buckets_.find(bucket);
  if (it == buckets_.end()) return r;
  for (const Entry& e : it->second) {
    if (e.key == key && e.ops.size() == ops.size() &&
        std::equal(e.ops.begin(), e.ops.end(), ops.begin())) {
      r.entry = &e;
      return r;
    }
  }
  r.collided = true;
  return r;
}

const ExecutableCache::Entry& ExecutableCache::insert(uint64_t bucket, Entry entry) {
  std::vector<Entry>& b = buckets_[bucket];
  b.push_back(std::move(entry));
  return b.back();
}

size_t ExecutableCache::size() const {
  size_t n = 0;
  for (const auto& [hash, bucket] : buckets_) n += bucket.size();
  return n;
}

}  // namespace lathe::lazy
