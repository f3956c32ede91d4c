#include "lathe/ops/shape_util.h"

#include <algorithm>

namespace lathe {

void check_broadcasts_to(const Tensor& src, const Tensor& dst, const char* op) {
  const int64_t nd = dst.dim(), ns = src.dim();
  bool ok = ns <= nd;
  for (int64_t i = 0; ok && i < ns; ++i) {
    SymInt s = src.sizes()[ns - 1 - i], d = dst.sizes()[nd - 1 - i];
    ok = s == d || s == 1;
  }
  LATHE_CHECK(ok, "[", op, "] source ", src.shape_string(), " does not broadcast to destination ",
              dst.shape_string());
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    SymInt x = i < n - a.size() ? SymInt(1) : a[i - (n - a.size())];
    SymInt y = i < n - b.size() ? SymInt(1) : b[i - (n - b.size())];
    if (x == y || y == 1) {
      out[i] = x;
    } else if (x == 1) {
      out[i] = y;
    } else {
      throw Error(detail::str("[", op, "] shapes ", a, " and ", b, " do not broadcast (dim ", i,
                              ": ", x, " vs ", y, ")"));
    }
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // 0-d tensors accept dim 0 / -1
  int64_t r = dim < 0 ? dim + n : dim;
  LATHE_CHECK(r >= 0 && r < n, "[", op, "] dim ", dim, " is out of range for a tensor of ", ndim,
              " dims");
  return r;
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> r;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) r.push_back(i);
    return r;
  }
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    LATHE_CHECK(std::find(r.begin(), r.end(), w) == r.end(), "[", op, "] dim ", d,
                " appears more than once in ", dims);
    r.push_back(w);
  }
  std::sort(r.begin(), r.end());
  if (ndim == 0) r.clear();
  return r;
}

TensorMeta result_meta(Shape sizes, DType dtype, Device device) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.dtype = dtype;
  m.device = device;
  return m;
}

namespace {

// True when two sizes are the same without asking a ShapeEnv (no guard): equal constants or the
// same expression.
bool same_size(const SymInt& a, const SymInt& b) {
  if (a.is_symbolic() || b.is_symbolic()) return a.expr() == b.expr();
  return a.maybe_int() == b.maybe_int();
}

bool same_sizes(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d)
    if (!same_size(a[d], b[d])) return false;
  return true;
}

}  // namespace

Shape strides_like(const Shape& sizes, const Shape& like_sizes, const Shape& like_strides) {
  const size_t n = like_sizes.size();
  constexpr size_t kInline = 8;
  int64_t sz_inline[kInline], st_inline[kInline];
  int perm_inline[kInline];
  std::vector<int64_t> sz_heap, st_heap;
  std::vector<int> perm_heap;
  int64_t* sz = sz_inline;
  int64_t* st = st_inline;
  int* perm = perm_inline;
  if (n > kInline) {
    sz_heap.resize(n), st_heap.resize(n), perm_heap.resize(n);
    sz = sz_heap.data(), st = st_heap.data(), perm = perm_heap.data();
  }
  auto hint = [](SymInt v) { return v.is_symbolic() ? v.hint() : *v.maybe_int(); };
  for (size_t d = 0; d < n; ++d) sz[d] = hint(like_sizes[d]), st[d] = hint(like_strides[d]);
  // Row-major (size-1 dims may have any stride)?
  bool row_major = true;
  int64_t expected = 1;
  for (size_t i = n; i-- > 0 && row_major;) {
    if (sz[i] == 1) continue;
    row_major = st[i] == expected;
    expected *= sz[i];
  }
  if (row_major) return contiguous_strides(sizes);
  // Dense in the order of increasing strides (ties keep the earlier dim inside)?
  // Insertion sort: stable, and unlike std::stable_sort it allocates no buffer (this rule runs
  // for every op a lazy or traced call records).
  for (size_t k = 0; k < n; ++k) {
    size_t j = k;
    for (; j > 0 && st[perm[j - 1]] > st[k]; --j) perm[j] = perm[j - 1];
    perm[j] = static_cast<int>(k);
  }
  expected = 1;
  for (size_t k = 0; k < n; ++k) {
    const int d = perm[k];
    if (sz[d] == 1) continue;
    if (st[d] != expected) return contiguous_strides(sizes);
    expected *= sz[d];
  }
  Shape strides(n);
  SymInt acc = 1;
  for (size_t k = 0; k < n; ++k) {
    const int d = perm[k];
    strides[d] = acc;
    if (sizes[d].maybe_int() != 0) acc = acc * sizes[d];
  }
  return strides;
}

Shape output_strides(const Shape& sizes, TensorList like) {
  for (const Tensor& t : like)
    if (t.defined() && same_sizes(t.sizes(), sizes))
      return strides_like(sizes, t.sizes(), t.strides());
  return contiguous_strides(sizes);
}

Tensor alloc_output(const Shape& sizes, DType dtype, TensorList like) {
  return empty_strided(sizes, output_strides(sizes, like), dtype);
}

}  // namespace lathe
