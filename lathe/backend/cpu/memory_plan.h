// Static memory planning: place buffers with known sizes and lifetimes into one arena so that
// buffers whose lifetimes overlap never overlap in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::backend::cpu {

// A buffer live from step `first` to step `last` (inclusive).
struct BufferLifetime {
  size_t bytes = 0;
  int first = 0;
  int last = 0;
};

struct ArenaLayout {
  std::vector<size_t> offsets;  // per buffer, multiples of kArenaAlignment
  size_t bytes = 0;             // arena size
};

constexpr size_t kArenaAlignment = 64;

// Greedy by size (largest first), each buffer at the lowest aligned offset that fits between the
// already placed buffers whose lifetimes overlap its own. Deterministic.
ArenaLayout plan_arena(const std::vector<BufferLifetime>& buffers);

// The bytes from a tensor's first element to one past its last (its strides' extent).
size_t extent_bytes(const Tensor& t);

// Union-find with path halving: the root of slot s.
inline int find_root(std::vector<int>& parent, int s) {
  while (parent[s] != s) s = parent[s] = parent[parent[s]];
  return s;
}

}  // namespace lathe::backend::cpu
