#include "lathe/kernels/non_finite.h"

#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_common.h"

namespace lathe::detail {

bool has_non_finite(const Tensor& t) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::bf16) return false;
  if (t.numel() == 0) return false;
  // A dense tensor (any dim order) occupies numel consecutive elements from its data pointer.
  Tensor d = t.is_non_overlapping_and_dense() ? t : to_contiguous(t);
  const int64_t n = d.numel();
  const int nt = n >= 65536 ? lathe::num_threads() : 1;
  int found = 0;
  if (d.dtype() == DType::f32) {
    const float* p = static_cast<const float*>(d.raw_data());
#pragma omp parallel for reduction(| : found) num_threads(nt) if (nt > 1)
    for (int64_t i = 0; i < n; ++i) found |= !(std::fabs(p[i]) <= 3.4028235e38f);
  } else {
    // bf16: the exponent bits all set is inf or NaN.
    const uint16_t* p = static_cast<const uint16_t*>(d.raw_data());
#pragma omp parallel for reduction(| : found) num_threads(nt) if (nt > 1)
    for (int64_t i = 0; i < n; ++i) found |= (p[i] & 0x7f80) == 0x7f80;
  }
  return found != 0;
}

namespace {

// has_non_finite of a weight or bias, remembered per storage, offset, size and version: frozen
// and trained weights are read once per version instead of at every call (a linear layer at
// batch 1 reads its weight once per call: a second read would double its time).
struct ScanEntry {
  std::weak_ptr<Storage> storage;
  const Storage* ptr = nullptr;
  int64_t offset = 0, numel = 0;
  uint64_t version = 0;
  bool non_finite = false;
};

bool cached_has_non_finite(const Tensor& t) {
  static std::mutex mu;
  static std::vector<ScanEntry> entries;
  const std::shared_ptr<Storage>& st = t.impl().storage;
  if (!st) return has_non_finite(t);
  const uint64_t version = st->version();
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const ScanEntry& e : entries)
      if (e.ptr == st.get() && e.offset == t.storage_offset() && e.numel == t.numel() &&
          e.version == version && e.storage.lock() == st)
        return e.non_finite;
  }
  const bool found = has_non_finite(t);
  std::lock_guard<std::mutex> lock(mu);
  if (entries.size() >= 4096) entries.clear();
  entries.push_back({st, st.get(), t.storage_offset(), t.numel(), version, found});
  return found;
}

}  // namespace

bool needs_nan_safe_post_ops(const PostOps& post, const Tensor& x, const Tensor& w,
                             const Tensor& bias) {
  return post_ops_drop_nan(post) && (has_non_finite(x) || cached_has_non_finite(w) ||
                                     (bias.defined() && cached_has_non_finite(bias)));
}

void apply_post_ops_flat(const float* plain, const PostOps& post, float* out, int64_t n) {
  const int nt = n >= 65536 ? lathe::num_threads() : 1;
#pragma omp parallel for num_threads(nt) if (nt > 1)
  for (int64_t i = 0; i < n; ++i) {
    float v = apply_post_act(plain[i], post.act, post.act_lo, post.act_hi);
    if (post.sum) v += out[i];
    out[i] = apply_post_act(v, post.act2, post.act2_lo, post.act2_hi);
  }
}

}  // namespace lathe::detail
