#include "lathe/kernels/loop.h"

#include <numeric>

namespace lathe::kernels {

LoopPlan make_loop_plan(const std::vector<Tensor>& ops) {
  LoopPlan plan;
  LATHE_CHECK(!ops.empty() && ops.size() <= kMaxLoopArgs, "[loop] bad operand count ", ops.size());
  const Tensor& out = ops[0];
  std::vector<int64_t> sz = out.shape();
  int nd0 = static_cast<int>(sz.size());
  LATHE_CHECK(nd0 <= kMaxLoopDims, "[loop] tensors of more than ", kMaxLoopDims,
              " dims are not supported, got ", out.shape_string());
  plan.nargs = static_cast<int>(ops.size());
  plan.numel = out.numel();
  std::vector<std::vector<int64_t>> st(ops.size());
  for (size_t a = 0; a < ops.size(); ++a) {
    LATHE_CHECK(ops[a].shape() == sz, "[loop] operand ", a, " has shape ", ops[a].shape_string(),
                ", expected ", out.shape_string());
    st[a] = ops[a].int_strides();
    int64_t isz = static_cast<int64_t>(itemsize(ops[a].dtype()));
    for (auto& s : st[a]) s *= isz;
    plan.base[a] = static_cast<char*>(ops[a].raw_data());
  }
  // Order dims outermost-first by the output's strides (then by the first input's), dropping
  // size-1 dims.
  std::vector<int> perm;
  for (int d = 0; d < nd0; ++d)
    if (sz[d] != 1) perm.push_back(d);
  std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) {
    for (size_t k = 0; k < st.size(); ++k) {
      int64_t x = std::abs(st[k][a]), y = std::abs(st[k][b]);
      if (x != y) return x > y;
    }
    return false;
  });
  // Merge neighbours that are contiguous for every operand.
  std::vector<int64_t> msz;
  std::vector<std::vector<int64_t>> mst(ops.size());
  for (int d : perm) {
    bool merge = !msz.empty();
    for (size_t a = 0; merge && a < ops.size(); ++a) merge = mst[a].back() == st[a][d] * sz[d];
    if (merge) {
      msz.back() *= sz[d];
      for (size_t a = 0; a < ops.size(); ++a) mst[a].back() = st[a][d];
    } else {
      msz.push_back(sz[d]);
      for (size_t a = 0; a < ops.size(); ++a) mst[a].push_back(st[a][d]);
    }
  }
  if (msz.empty()) {
    msz.push_back(1);
    for (auto& v : mst) v.push_back(0);
  }
  plan.ndim = static_cast<int>(msz.size());
  for (int d = 0; d < plan.ndim; ++d) {
    plan.sizes[d] = msz[d];
    for (size_t a = 0; a < ops.size(); ++a) plan.strides[a][d] = mst[a][d];
  }
  return plan;
}

}  // namespace lathe::kernels
