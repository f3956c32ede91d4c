#include "lathe/trace/arg_layout.h"

namespace lathe::detail {

ArgLayout arg_layout(const Tensor& t) {
  ArgLayout l;
  l.rank = static_cast<int>(t.dim());
  if (t.is_contiguous()) {
    l.kind = Layout::kContiguous;
  } else if (t.dim() == 4 && t.is_channels_last()) {
    l.kind = Layout::kChannelsLast;
  } else if (dense_dim_order(t, l.order)) {
    l.kind = Layout::kDense;
  } else {
    l.kind = Layout::kStrided;
  }
  return l;
}

Shape traced_strides(const ArgLayout& layout, const Shape& sizes, const Tensor& real) {
  switch (layout.kind) {
    case Layout::kContiguous:
      return contiguous_strides(sizes);
    case Layout::kChannelsLast:
      return channels_last_strides(sizes);
    case Layout::kDense: {
      // Strides as products of the (symbolic) sizes inside each dim: the guard checks the order.
      Shape strides(layout.rank);
      SymInt inner = 1;
      for (int k = 0; k < layout.rank; ++k) {
        strides[layout.order[k]] = inner;
        inner = inner * sizes[layout.order[k]];
      }
      return strides;
    }
    case Layout::kStrided:
      break;
  }
  return real.strides();  // guarded exactly
}

bool dense_dim_order(const Tensor& t, int8_t* order) {
  const int64_t n = t.dim();
  if (n > kMaxDenseRank) return false;
  const Shape& sz = t.sizes();
  const Shape& st = t.strides();
  for (int64_t d = 0; d < n; ++d)
    if (sz[d].is_symbolic() || st[d].is_symbolic() || *sz[d].maybe_int() == 0) return false;
  // Insertion sort by stride, innermost first; equal strides put the later dim inside.
  auto inner = [&](int8_t a, int8_t b) {
    int64_t sa = *st[a].maybe_int(), sb = *st[b].maybe_int();
    return sa < sb || (sa == sb && a > b);
  };
  for (int64_t i = 0; i < n; ++i) {
    int8_t d = static_cast<int8_t>(n - 1 - i);
    int64_t j = i;
    for (; j > 0 && inner(d, order[j - 1]); --j) order[j] = order[j - 1];
    order[j] = d;
  }
  return is_dense_in_order(t, order);
}

bool is_dense_in_order(const Tensor& t, const int8_t* order) {
  const Shape& sz = t.sizes();
  const Shape& st = t.strides();
  int64_t expected = 1;
  for (int64_t k = 0; k < t.dim(); ++k) {
    const int d = order[k];
    const std::optional<int64_t> size = sz[d].maybe_int(), stride = st[d].maybe_int();
    if (!size || !stride) return false;
    if (*size == 1) continue;
    if (*stride != expected) return false;
    expected *= *size;
  }
  return true;
}

}  // namespace lathe::detail
