// Storage: a reference-counted byte buffer that tensors view.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "lathe/core/device.h"

namespace lathe {

class Storage {
 public:
  // Allocates nbytes, 64-byte aligned, uninitialized.
  static std::shared_ptr<Storage> allocate(size_t nbytes);
  // Wraps memory owned elsewhere; `release` runs when the last tensor lets go (may be empty).
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, std::function<void()> release);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Bumped by every in-place write through an op, so caches keyed on data (reordered
  // weights) can tell the contents changed.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::function<void()> release_;
  std::atomic<uint64_t> version_{0};
};

// Returns the large blocks that freed tensors left for reuse to the system allocator.
void release_cached_memory();

}  // namespace lathe
