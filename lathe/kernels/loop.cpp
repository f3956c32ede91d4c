#include "lathe/kernels/loop.h"

#include <cstdlib>

namespace lathe::kernels {

LoopPlan make_loop_plan(const std::vector<Tensor>& ops) {
  LoopPlan plan;
  const int na = static_cast<int>(ops.size());
  LATHE_CHECK(na >= 1 && na <= kMaxLoopArgs, "[loop] bad operand count ", na);
  const Tensor& out = ops[0];
  const int nd0 = static_cast<int>(out.dim());
  LATHE_CHECK(nd0 <= kMaxLoopDims, "[loop] tensors of more than ", kMaxLoopDims,
              " dims are not supported, got ", out.shape_string());
  // Fixed-size arrays: this runs for every eager elementwise op, so no heap allocation.
  int64_t sz[kMaxLoopDims];
  int64_t st[kMaxLoopArgs][kMaxLoopDims];
  plan.nargs = na;
  plan.numel = 1;
  for (int d = 0; d < nd0; ++d) {
    sz[d] = out.sizes()[d].expect_int();
    plan.numel *= sz[d];
  }
  for (int a = 0; a < na; ++a) {
    LATHE_CHECK(ops[a].dim() == nd0, "[loop] operand ", a, " has shape ", ops[a].shape_string(),
                ", expected ", out.shape_string());
    const int64_t isz = static_cast<int64_t>(itemsize(ops[a].dtype()));
    for (int d = 0; d < nd0; ++d) {
      LATHE_CHECK(ops[a].sizes()[d].expect_int() == sz[d], "[loop] operand ", a, " has shape ",
                  ops[a].shape_string(), ", expected ", out.shape_string());
      st[a][d] = ops[a].strides()[d].expect_int() * isz;
    }
    plan.base[a] = static_cast<char*>(ops[a].raw_data());
  }
  // Order dims outermost-first by the output's strides (then the inputs'), dropping size-1
  // dims; insertion sort keeps it stable and allocation-free.
  int perm[kMaxLoopDims];
  int np = 0;
  for (int d = 0; d < nd0; ++d)
    if (sz[d] != 1) perm[np++] = d;
  auto outer_first = [&](int x, int y) {
    for (int a = 0; a < na; ++a) {
      int64_t u = std::abs(st[a][x]), v = std::abs(st[a][y]);
      if (u != v) return u > v;
    }
    return false;
  };
  for (int i = 1; i < np; ++i) {
    int key = perm[i], j = i - 1;
    while (j >= 0 && outer_first(key, perm[j])) {
      perm[j + 1] = perm[j];
      --j;
    }
    perm[j + 1] = key;
  }
  // Merge neighbours that are contiguous for every operand.
  int nd = 0;
  for (int i = 0; i < np; ++i) {
    const int d = perm[i];
    bool merge = nd > 0;
    for (int a = 0; merge && a < na; ++a) merge = plan.strides[a][nd - 1] == st[a][d] * sz[d];
    if (merge) {
      plan.sizes[nd - 1] *= sz[d];
      for (int a = 0; a < na; ++a) plan.strides[a][nd - 1] = st[a][d];
    } else {
      plan.sizes[nd] = sz[d];
      for (int a = 0; a < na; ++a) plan.strides[a][nd] = st[a][d];
      ++nd;
    }
  }
  if (nd == 0) {
    plan.sizes[0] = 1;
    for (int a = 0; a < na; ++a) plan.strides[a][0] = 0;
    nd = 1;
  }
  plan.ndim = nd;
  return plan;
}

}  // namespace lathe::kernels
