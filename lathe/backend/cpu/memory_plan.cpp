#include "lathe/backend/cpu/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace lathe::backend::cpu {
namespace {
size_t align_up(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }
}  // namespace

size_t extent_bytes(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d)
    last += (t.sizes()[d].expect_int() - 1) * t.strides()[d].expect_int();
  return static_cast<size_t>(last + 1) * itemsize(t.dtype());
}

ArenaLayout plan_arena(const std::vector<BufferLifetime>& buffers) {
  const size_t n = buffers.size();
  ArenaLayout layout;
  layout.offsets.assign(n, 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;  // buffer indices, kept sorted by offset
  struct Range {
    size_t begin, end;
  };
  std::vector<Range> busy;
  for (size_t b : order) {
    const BufferLifetime& buf = buffers[b];
    const size_t need = align_up(std::max<size_t>(buf.bytes, 1));
    busy.clear();
    for (size_t p : placed) {
      const BufferLifetime& o = buffers[p];
      if (o.last < buf.first || buf.last < o.first) continue;  // lifetimes do not overlap
      busy.push_back(
          {layout.offsets[p], layout.offsets[p] + align_up(std::max<size_t>(o.bytes, 1))});
    }
    // busy is sorted by begin because `placed` is.
    size_t offset = 0;
    for (const Range& r : busy) {
      if (r.begin >= offset + need) break;  // fits in the gap before r
      offset = std::max(offset, r.end);
    }
    layout.offsets[b] = offset;
    layout.bytes = std::max(layout.bytes, offset + need);
    placed.insert(
        std::upper_bound(placed.begin(), placed.end(), b,
                         [&](size_t x, size_t y) { return layout.offsets[x] < layout.offsets[y]; }),
        b);
  }
  return layout;
}

}  // namespace lathe::backend::cpu
