// scaled_dot_product_attention, composed from matmul, softmax and masking ops; and sdpa_fused,
// the one-kernel form the cpu backend's fuse_attention pass rewrites that composition into.
#include <cmath>
#include <limits>

#include "lathe/kernels/attention.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

// ---- sdpa_fused(q, kt, v, scale, mask) ----
// out = softmax(matmul(q, kt) * s + mask, -1) @ v with q [B,H,L,E], kt [B,H,E,S] (k transposed,
// as the matmul reads it), v [B,H,S,Ev], f32. s is the attribute "scale", times the 0-d tensor
// `scale` when given (divided by it when "divide" is true), so a scale the graph computes at run
// time needs no constant. mask (optional) is added to the scores and broadcasts to [B,H,L,S].
// With "transpose_out" the result is [B,L,H,Ev] (contiguous): out.permute(0, 2, 1, 3) of the above.
enum SdpaInput { kQ, kKt, kV, kScale, kMask, kSdpaInputs };

std::vector<TensorMeta> sdpa_fused_rule(TensorList in, const Attrs& a) {
  const char* op = "[sdpa_fused] ";
  const Tensor &q = in[kQ], &kt = in[kKt], &v = in[kV];
  LATHE_CHECK(q.defined() && kt.defined() && v.defined(), op, "q, kt and v must be defined");
  LATHE_CHECK(q.dim() == 4 && kt.dim() == 4 && v.dim() == 4, op, "q, kt, v must be 4-d, got ",
              q.shape_string(), ", ", kt.shape_string(), ", ", v.shape_string());
  for (const Tensor* t : {&q, &kt, &v})
    LATHE_CHECK(t->dtype() == DType::f32, op, "needs f32 inputs, got ", t->shape_string());
  for (int d = 0; d < 2; ++d)
    LATHE_CHECK(q.sizes()[d] == kt.sizes()[d] && q.sizes()[d] == v.sizes()[d], op,
                "batch dims differ: q ", q.shape_string(), ", kt ", kt.shape_string(), ", v ",
                v.shape_string());
  LATHE_CHECK(q.sizes()[3] == kt.sizes()[2], op, "q ", q.shape_string(), " and kt ",
              kt.shape_string(), " differ in the embedding dim");
  LATHE_CHECK(kt.sizes()[3] == v.sizes()[2], op, "kt ", kt.shape_string(), " and v ",
              v.shape_string(), " differ in the sequence dim");
  const Tensor& scale = in[kScale];
  if (scale.defined())
    LATHE_CHECK(scale.dim() == 0 && scale.dtype() == DType::f32, op,
                "scale must be a 0-d f32 tensor, got ", scale.shape_string());
  const Tensor& mask = in[kMask];
  if (mask.defined()) {
    Shape scores{q.sizes()[0], q.sizes()[1], q.sizes()[2], kt.sizes()[3]};
    LATHE_CHECK(mask.dtype() == DType::f32 && mask.dim() <= 4, op,
                "mask must be f32 with at most 4 dims, got ", mask.shape_string());
    Shape b = broadcast_shapes(mask.sizes(), scores, "sdpa_fused");
    LATHE_CHECK(b == scores, op, "mask ", mask.shape_string(), " does not broadcast to the scores ",
                scores);
  }
  a.get_double("scale");
  a.get_bool("divide");
  const bool transposed = a.has("transpose_out") && a.get_bool("transpose_out");
  Shape out = transposed ? Shape{q.sizes()[0], q.sizes()[2], q.sizes()[1], v.sizes()[3]}
                         : Shape{q.sizes()[0], q.sizes()[1], q.sizes()[2], v.sizes()[3]};
  TensorMeta m = result_meta(out, DType::f32, q.device());
  m.strides = contiguous_strides(out);
  return {m};
}

void sdpa_fused_out_kernel(TensorList in, const Attrs& a, const std::vector<TensorMeta>& m,
                           TensorList outs) {
  double s = a.get_double("scale");
  if (in[kScale].defined()) {
    const double t = in[kScale].item();
    s = a.get_bool("divide") ? s / t : s * t;
  }
  const Tensor& kt = in[kKt];
  const Tensor k = kt.transpose(-2, -1);
  const Tensor& q = in[kQ];
  Tensor mask;
  if (in[kMask].defined()) {
    Shape scores{q.sizes()[0], q.sizes()[1], q.sizes()[2], kt.sizes()[3]};
    mask = kernels::broadcast_to(in[kMask], scores);
  }
  // transpose_out: the output is [B, L, H, Ev]; the kernel writes it through a [B, H, L, Ev] view.
  const bool transposed = a.has("transpose_out") && a.get_bool("transpose_out");
  const Tensor out = transposed ? outs[0].transpose(1, 2) : outs[0];
  kernels::attention_forward(q, k, in[kV], mask, static_cast<float>(s), out);
}

}  // namespace

namespace detail {
void register_attention_ops(OpRegistry& r) {
  OpDef op =
      define_op("sdpa_fused", kSdpaInputs, sdpa_fused_rule,
                [](TensorList in, const Attrs& a, const std::vector<TensorMeta>& m) {
                  std::vector<Tensor> outs{empty_strided(m[0].sizes, m[0].strides, m[0].dtype)};
                  sdpa_fused_out_kernel(in, a, m, outs);
                  return outs;
                },
                OpCategory::fused,
                {required("scale", AttrType::real), required("divide", AttrType::boolean),
                 optional("transpose_out", AttrType::boolean)});
  r.add(std::move(op), sdpa_fused_out_kernel);
}
}  // namespace detail

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
