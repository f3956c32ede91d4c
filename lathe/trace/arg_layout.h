// The layout rule for a tensor argument of a compiled function: one function (arg_layout) that
// both the tracer (the strides the argument's fake and graph input get) and the guards (what a
// later call must match) use, so that what is traced and what is guarded cannot drift apart.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::detail {

// The memory layout a tensor argument is traced with (and guarded on). kDense: non-overlapping
// and dense in some other order of the dims (a transposed or permuted tensor); it is traced with
// strides that are expressions of the sizes in that order, and guarded by the order, not the
// stride numbers. kStrided: anything else (gaps, overlaps such as an expanded dim of stride 0,
// zero sizes), guarded exactly.
enum class Layout : uint8_t { kContiguous, kChannelsLast, kDense, kStrided };

// Dense layouts of tensors of up to this many dims are recognized (the order lives on the stack).
inline constexpr int kMaxDenseRank = 16;

// A tensor's layout under the rule, with its dim order when dense.
struct ArgLayout {
  Layout kind = Layout::kContiguous;
  int rank = 0;
  int8_t order[kMaxDenseRank];  // kDense: t's dims innermost first (rank entries; else unset)

  std::vector<int8_t> order_vector() const { return {order, order + rank}; }
};

// The rule: contiguous (size-1 dims' strides do not matter) first, then channels-last (4 dims),
// then dense in the order of its strides, else strided. Allocates nothing.
ArgLayout arg_layout(const Tensor& t);
inline Layout layout_of(const Tensor& t) { return arg_layout(t).kind; }

// The strides a tensor of layout `layout` and (possibly symbolic) `sizes` is traced with:
// contiguous or channels-last strides of the sizes, the products of the sizes in the dense
// order, or (kStrided) the real tensor's own strides, which the guards then check exactly.
Shape traced_strides(const ArgLayout& layout, const Shape& sizes, const Tensor& real);

// Writes t's dims innermost first (by stride; ties: the later dim inner) into `order` (t.dim()
// entries) and returns true when t is non-overlapping and dense in that order. Allocates nothing.
bool dense_dim_order(const Tensor& t, int8_t* order);
// True when t (real) is dense in `order` (innermost first): each dim's stride is the product of
// the sizes of the dims inside it. Size-1 dims are skipped. Allocates nothing.
bool is_dense_in_order(const Tensor& t, const int8_t* order);

}  // namespace lathe::detail
