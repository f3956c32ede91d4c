// Strided loops over several operands: the engine behind elementwise ops and copies.
// A LoopPlan orders dims by the output's memory order, merges dims that are contiguous for every
// operand, and runs rows of the innermost dim in parallel (chunks claimed dynamically).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/parallel_chunks.h"

namespace lathe::kernels {

constexpr int kMaxLoopArgs = 4;
constexpr int kMaxLoopDims = 16;

struct LoopPlan {
  int nargs = 0;
  int ndim = 0;  // after merging; dim ndim-1 is innermost
  int64_t sizes[kMaxLoopDims];
  int64_t strides[kMaxLoopArgs][kMaxLoopDims];  // bytes
  char* base[kMaxLoopArgs];
  int64_t numel = 0;
};

// Operand 0 is the output. Every operand must already have `out`'s sizes (broadcast inputs
// with expand()).
LoopPlan make_loop_plan(const std::vector<Tensor>& operands);

// Calls row(ptrs, strides_bytes, n) for every innermost row; rows run in parallel when the
// plan is large. `row` must be safe to call concurrently on disjoint rows.
template <class Row>
void run_loop(const LoopPlan& plan, Row&& row) {
  if (plan.numel == 0) return;
  const int na = plan.nargs;
  const int nd = plan.ndim;
  const int64_t inner = plan.sizes[nd - 1];
  int64_t inner_st[kMaxLoopArgs];
  for (int a = 0; a < na; ++a) inner_st[a] = plan.strides[a][nd - 1];
  int64_t rows = plan.numel / std::max<int64_t>(inner, 1);

  int threads = plan.numel >= kParallelGrain ? num_threads() : 1;
  if (threads == 1 && nd == 1) {  // small and flat: no OpenMP region at all
    char* p[kMaxLoopArgs];
    for (int a = 0; a < na; ++a) p[a] = plan.base[a];
    row(p, inner_st, inner);
    return;
  }
  // A single long row is split into chunks (multiples of 16 elements) so both cores work on it.
  if (rows == 1) {
    parallel_chunks(inner, chunk_size(inner, threads, 16, 16), threads,
                    [&](int64_t start, int64_t end) {
                      char* p[kMaxLoopArgs];
                      for (int a = 0; a < na; ++a) p[a] = plan.base[a] + start * inner_st[a];
                      row(p, inner_st, end - start);
                    });
    return;
  }

  // Rows in chunks claimed dynamically (lathe/kernels/parallel_chunks.h).
  parallel_chunks(rows, chunk_size(rows, threads), threads, [&](int64_t r0, int64_t r1) {
    // Decompose r0 into an index over the outer dims.
    int64_t idx[kMaxLoopDims];
    int64_t rem = r0;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = rem % plan.sizes[d];
      rem /= plan.sizes[d];
    }
    char* p[kMaxLoopArgs];
    for (int a = 0; a < na; ++a) {
      p[a] = plan.base[a];
      for (int d = 0; d < nd - 1; ++d) p[a] += idx[d] * plan.strides[a][d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(p, inner_st, inner);
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < plan.sizes[d]) {
          for (int a = 0; a < na; ++a) p[a] += plan.strides[a][d];
          break;
        }
        for (int a = 0; a < na; ++a) p[a] -= plan.strides[a][d] * (plan.sizes[d] - 1);
        idx[d] = 0;
      }
    }
  });
}

}  // namespace lathe::kernels
