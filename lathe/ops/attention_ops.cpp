// scaled_dot_product_attention, composed from matmul, softmax and masking ops.
#include <cmath>
#include <limits>

#include "lathe/ops/ops.h"
#include "lathe/ops/shape_util.h"

namespace lathe {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, bool is_causal,
                                    std::optional<double> scale) {
  LATHE_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
              "[scaled_dot_product_attention] q, k, v need at least 2 dims, got ", q.shape_string(),
              ", ", k.shape_string(), ", ", v.shape_string());
  LATHE_CHECK(q.size(-1) == k.size(-1), "[scaled_dot_product_attention] q ", q.shape_string(),
              " and k ", k.shape_string(), " differ in the embedding dim");
  LATHE_CHECK(k.size(-2) == v.size(-2), "[scaled_dot_product_attention] k ", k.shape_string(),
              " and v ", v.shape_string(), " differ in the sequence dim");
  LATHE_CHECK(!(is_causal && mask.defined()),
              "[scaled_dot_product_attention] pass either a mask or is_causal, not both");
  if (mask.defined()) {
    Shape scores_shape = q.sizes();
    scores_shape.back() = k.size(-2);
    Shape b = broadcast_shapes(mask.sizes(), scores_shape, "scaled_dot_product_attention");
    LATHE_CHECK(b.size() >= scores_shape.size(), "[scaled_dot_product_attention] mask ",
                mask.shape_string(), " has more dims than the scores ", scores_shape);
  }
  Tensor scores = matmul(q, k.transpose(-2, -1));
  if (scale || !q.size(-1).is_symbolic()) {
    scores =
        mul(scores, scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1).expect_int())));
  } else {
    // A symbolic head size (traced): 1/sqrt(E) is computed by the graph from the size, so one
    // trace serves every head size. An f64 one expanded to [E] and summed is exactly E.
    Tensor e = sum(full({}, 1.0, DType::f64).expand({q.size(-1)}));
    scores = mul(scores, rsqrt(e).to(scores.dtype()));
  }
  if (is_causal) {
    int64_t L = q.size(-2).expect_int(), S = k.size(-2).expect_int();
    Tensor i = arange(L).view({L, 1});
    Tensor j = arange(S).view({1, S});
    Tensor causal = ge(i, j);  // made on the CPU: moved to the device of q (lazy)
    if (causal.device() != q.device()) causal = causal.to(q.device());
    scores = where(causal, scores, -std::numeric_limits<double>::infinity());
  } else if (mask.defined()) {
    if (mask.dtype() == DType::b8)
      scores = where(mask, scores, -std::numeric_limits<double>::infinity());
    else
      scores = add(scores, mask);
  }
  return matmul(softmax(scores, -1), v);
}

}  // namespace lathe
