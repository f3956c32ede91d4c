#include "lathe/core/storage.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "lathe/core/error.h"

namespace lathe {
namespace {

// Large blocks are kept after release and handed out again for the same rounded size: fresh
// pages from the OS cost a page fault each (the kernel zeroes them), which made a 64 MiB
// elementwise op several times slower than memcpy, and every eager forward reallocates its
// activations. Small blocks are cached too (aligned_alloc/free of a 64-byte block costs more
// than the rest of a tiny op), up to a count.
class BlockCache {
 public:
  static constexpr size_t kMinCached = size_t{1} << 16;       // rounding changes here
  static constexpr size_t kMaxCachedTotal = size_t{1} << 30;  // 1 GiB kept at most
  static constexpr size_t kMaxCachedBlocks = 4096;

  static BlockCache& get() {
    static BlockCache* c = new BlockCache();  // never destroyed: storages may outlive statics
    return *c;
  }

  static size_t round(size_t n) {
    if (n < kMinCached) return (n + 63) / 64 * 64;
    // Round up to a multiple of 1/8 of the next power of two: at most 12.5% waste.
    size_t p = 1;
    while (p < n) p <<= 1;
    size_t step = p / 8;
    return (n + step - 1) / step * step;
  }

  void* allocate(size_t rounded) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(rounded);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_ -= rounded;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, rounded);
    if (!p) {  // give the cache back to the OS and retry
      release_all();
      p = std::aligned_alloc(64, rounded);
    }
    return p;
  }

  void release(void* p, size_t rounded) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + rounded <= kMaxCachedTotal && free_.size() < kMaxCachedBlocks) {
        free_.emplace(rounded, p);
        cached_ += rounded;
        return;
      }
    }
    std::free(p);
  }

  void release_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
};

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  std::shared_ptr<Storage> s(new Storage());
  size_t rounded = BlockCache::round(nbytes == 0 ? 64 : nbytes);
  s->data_ = BlockCache::get().allocate(rounded);
  if (!s->data_) throw Error(detail::str("[storage] out of memory allocating ", nbytes, " bytes"));
  s->nbytes_ = nbytes;
  void* p = s->data_;
  s->release_ = [p, rounded] { BlockCache::get().release(p, rounded); };
  return s;
}

void release_cached_memory() { BlockCache::get().release_all(); }

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, std::function<void()> release) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->release_ = std::move(release);
  return s;
}

Storage::~Storage() {
  if (release_) release_();
}

}  // namespace lathe
