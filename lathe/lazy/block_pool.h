// The block pool: per-thread free lists of fixed-size memory blocks, for the objects the lazy
// device makes for every recorded op (a LazyNode, a pending TensorImpl) and frees at the next
// sync or when the model drops its results. A model call makes and frees a few hundred of each
// at once; malloc's per-thread cache holds only 7 blocks of a size, so the rest went through its
// bins (malloc and free were about a quarter of LazyMobilenetRecord's samples, with the model's
// own allocations). Here a freed block waits on its thread's list and the next op takes it back:
// two pointer moves each way.
#pragma once

#include <cstddef>
#include <new>

namespace lathe::lazy {
namespace detail {

// One thread's free blocks of one size. Trivially destructible, so that a block freed while the
// thread's thread-locals are being destroyed (a tensor in a static) still finds it; `closed` then
// sends the block back to operator delete.
struct FreeBlocks {
  struct Block {
    Block* next;
  };
  Block* head = nullptr;
  size_t count = 0;
  bool closed = false;
};

// Blocks kept per thread and size beyond which freed blocks go back to operator delete: a few
// calls' worth of a large model, so one huge window does not pin its memory for good.
constexpr size_t kMaxFreeBlocks = 4096;

template <size_t Size>
FreeBlocks& free_blocks() {
  static thread_local FreeBlocks blocks;
  // Returns the thread's blocks to operator delete when the thread ends.
  struct Drain {
    ~Drain() {
      while (FreeBlocks::Block* b = blocks.head) {
        blocks.head = b->next;
        ::operator delete(b);
      }
      blocks.count = 0;
      blocks.closed = true;
    }
  };
  static thread_local Drain drain;
  (void)drain;
  return blocks;
}

template <size_t Size>
void* take_block() {
  FreeBlocks& f = free_blocks<Size>();
  if (FreeBlocks::Block* b = f.head) {
    f.head = b->next;
    f.count--;
    // The block the next op takes: its lines start coming into cache now, while this op
    // records (a list's blocks go cold while the previous call's executable runs).
    if (f.head)
      for (size_t at = 0; at < Size; at += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(f.head) + at, 1);
    return b;
  }
  return ::operator new(Size);
}

template <size_t Size>
void give_block(void* p) {
  FreeBlocks& f = free_blocks<Size>();
  if (f.closed || f.count >= kMaxFreeBlocks) {
    ::operator delete(p);
    return;
  }
  auto* b = static_cast<FreeBlocks::Block*>(p);
  b->next = f.head;
  f.head = b;
  f.count++;
}

}  // namespace detail

// An allocator for std::allocate_shared of single objects (the object and its control block in
// one pooled block). Blocks are rounded up to 16 bytes, so types of about the same size share a
// list; a block freed on another thread joins that thread's list.
template <class T>
struct PoolAllocator {
  using value_type = T;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  static constexpr size_t kBlock = (sizeof(T) + 15) / 16 * 16;

  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding, as allocators do

  T* allocate(size_t n) {
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(detail::take_block<kBlock>());
  }
  void deallocate(T* p, size_t n) {
    if (n != 1) {
      ::operator delete(p);
      return;
    }
    detail::give_block<kBlock>(p);
  }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
};

}  // namespace lathe::lazy
