#include "lathe/ops/shape_util.h"

#include <algorithm>

namespace lathe {

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

Tensor alloc_output(const Shape& sizes, DType dtype, TensorList like) {
  for (const Tensor& t : like) {
    if (!t.defined() || t.sizes() != sizes) continue;
    if (t.is_contiguous()) return empty(sizes, dtype);
    if (t.is_non_overlapping_and_dense()) return empty_like(t, dtype);
  }
  return empty(sizes, dtype);
}

}  // namespace lathe
