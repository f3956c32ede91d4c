// Batch norm folded into a convolution's weight and bias (conv2d_fused's eager kernel), cached.
#include "lathe/ops/bn_fold_cache.h"

#include <cmath>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lathe/core/storage.h"
#include "lathe/ops/ops.h"

namespace lathe::detail {
namespace {

// ---- batch norm folded into the convolution, cached ----
// The cache key is the weight's identity (storage, offset, version) and the exact bytes of the
// five small per-channel vectors (bias, mean, var, gamma, beta): comparing a few KB per call is
// cheaper than trusting version counters that eager's inference batch norm bumps too.

struct FoldKey {
  std::weak_ptr<Storage> weight_storage;
  const Storage* weight_ptr = nullptr;
  int64_t weight_offset = 0;
  uint64_t weight_version = 0;
  std::vector<Shape> weight_shape_strides;
  std::string vectors;  // bytes of bias, mean, var, gamma, beta (with a defined/undefined tag)
  std::optional<double> eps;  // absent without batch norm
};

std::string vector_bytes(const Tensor* ts) {
  std::string bytes;
  for (int i = 1; i < 6; ++i) {
    const Tensor& t = ts[i];
    bytes.push_back(t.defined() ? 1 : 0);
    if (!t.defined()) continue;
    Tensor c = t.is_contiguous() ? t : t.contiguous();
    bytes.append(static_cast<const char*>(c.raw_data()), c.numel() * itemsize(c.dtype()));
  }
  return bytes;
}

FoldKey make_key(const Tensor* ts, double eps) {
  const Tensor& w = ts[0];
  FoldKey k;
  k.weight_storage = w.impl().storage;
  k.weight_ptr = w.impl().storage.get();
  k.weight_offset = w.storage_offset();
  k.weight_version = w.impl().storage->version();
  k.weight_shape_strides = {w.sizes(), w.strides()};
  k.vectors = vector_bytes(ts);
  k.eps = eps;
  return k;
}

bool same_key(const FoldKey& a, const FoldKey& b) {
  return a.weight_ptr == b.weight_ptr && a.weight_offset == b.weight_offset &&
         a.weight_version == b.weight_version && a.eps == b.eps && a.vectors == b.vectors &&
         a.weight_shape_strides.size() == b.weight_shape_strides.size() &&
         a.weight_shape_strides[0].size() == b.weight_shape_strides[0].size() &&
         std::equal(
             a.weight_shape_strides[0].begin(), a.weight_shape_strides[0].end(),
             b.weight_shape_strides[0].begin(),
             [](const SymInt& x, const SymInt& y) { return x.maybe_int() == y.maybe_int(); }) &&
         std::equal(
             a.weight_shape_strides[1].begin(), a.weight_shape_strides[1].end(),
             b.weight_shape_strides[1].begin(),
             [](const SymInt& x, const SymInt& y) { return x.maybe_int() == y.maybe_int(); }) &&
         a.weight_storage.lock().get() == b.weight_ptr;  // the same storage, not a new one there
}

struct Folded {
  FoldKey key;
  Tensor weight, bias;
};

// ts: weight, bias, mean, var, gamma, beta. w' = w * s[o], b' = (b - mean) * s + beta with
// s = gamma / sqrt(var + eps), in f64.
Folded fold(const Tensor* ts, double eps, FoldKey key) {
  const Tensor& w = ts[0];
  const int64_t O = w.size(0).expect_int();
  auto vec = [&](const Tensor& t, double dflt) {
    if (!t.defined()) return std::vector<double>(O, dflt);
    return t.to(DType::f64).contiguous().to_vector<double>();
  };
  std::vector<double> b = vec(ts[1], 0), mean = vec(ts[2], 0), var = vec(ts[3], 1),
                      gamma = vec(ts[4], 1), beta = vec(ts[5], 0);
  std::vector<double> scale(O), shift(O);
  for (int64_t o = 0; o < O; ++o) {
    scale[o] = gamma[o] / std::sqrt(var[o] + eps);
    shift[o] = (b[o] - mean[o]) * scale[o] + beta[o];
  }
  // A buffer of our own: to(f64).contiguous() is the caller's weight itself when it is a
  // contiguous f64 tensor, and the loop below scales it in place.
  Tensor wd = w.to_owned(DType::f64);
  const int64_t per = w.numel() / std::max<int64_t>(O, 1);
  double* wp = wd.data<double>();
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < per; ++k) wp[o * per + k] *= scale[o];
  Folded f;
  f.weight = wd.to(w.dtype());
  f.bias = from_vector(shift, {O}).to(w.dtype());
  f.key = std::move(key);
  return f;
}

}  // namespace

// A small most-recently-used list: a model has one entry per fused conv.
std::pair<Tensor, Tensor> folded_weight_bias(const Tensor* ts, double eps) {
  static std::mutex mu;
  static std::list<Folded> cache;
  constexpr size_t kMaxEntries = 1024;
  FoldKey key = make_key(ts, eps);
  {
    std::lock_guard lock(mu);
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (!same_key(it->key, key)) continue;
      if (it != cache.begin()) cache.splice(cache.begin(), cache, it);
      return {cache.front().weight, cache.front().bias};
    }
  }
  Folded f = fold(ts, eps, std::move(key));
  std::lock_guard lock(mu);
  cache.push_front(f);
  if (cache.size() > kMaxEntries) cache.pop_back();
  return {f.weight, f.bias};
}

}  // namespace lathe::detail
