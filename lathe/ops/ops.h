// The functional op API: every op of Lathe as a free function. Each goes through dispatch()
// with its OpDef; registered op names are given in brackets.
#pragma once

#include <optional>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/link.h"

namespace lathe {

// ---- elementwise binary (broadcasting, PyTorch type promotion) ----
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);  // [add] a + alpha*b
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);  // [sub]
Tensor mul(const Tensor& a, const Tensor& b);                      // [mul]
Tensor div(const Tensor& a, const Tensor& b);                      // [div] true division
Tensor pow(const Tensor& a, const Tensor& b);                      // [pow]
Tensor maximum(const Tensor& a, const Tensor& b);                  // [maximum]
Tensor minimum(const Tensor& a, const Tensor& b);                  // [minimum]
// With a scalar operand: the scalar becomes a 0-d tensor of the dtype it promotes to with `a`
// (PyTorch's rules for Python scalars) and the binary op above runs [add, sub, mul, div, pow].
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor rsub(const Tensor& a, double b);  // b - a
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);

// ---- comparisons (bool results) ----
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_not(const Tensor& a);
// cond ? a : b with broadcasting [where].
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);

// ---- elementwise unary ----
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor hardswish(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);
// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

// ---- in-place (write into `self`, which must not broadcast) ----
Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);  // [add_]
Tensor& mul_(Tensor& self, double v);                                 // [mul_scalar_]
Tensor& relu_(Tensor& self);                                          // [relu_]
// A row-major copy of base whose base.as_strided(size, stride, offset) window holds src (the
// window counted in elements of base's row-major layout) [as_strided_scatter]: what a write
// through a view becomes in a functional graph (ir::functionalize).
Tensor as_strided_scatter(const Tensor& base, const Tensor& src, const Shape& size,
                          const Shape& stride, int64_t offset);

// ---- linear algebra ----
// Matrix product with numpy broadcasting of batch dims; 1-d operands as in torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight^T + bias; weight [out, in], bias [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// ---- convolution and pooling (NCHW logical layout; any memory layout) ----
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);

// ---- normalization ----
// Inference (training=false) uses running stats; training computes batch stats and, when
// running_mean/var are defined, updates them in place with `momentum`.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps);
Tensor layer_norm(const Tensor& x, std::vector<int64_t> normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// ---- softmax, dropout, embedding, losses, attention ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// In training mode zeroes elements with probability p and scales the rest by 1/(1-p).
Tensor dropout(const Tensor& x, double p, bool training);
// Rows of weight [num, dim] picked by integer indices of any shape.
Tensor embedding(const Tensor& weight, const Tensor& indices);
// reduction: "mean", "sum" or "none"; targets are class indices (i64).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const std::string& reduction = "mean", int64_t ignore_index = -100);
// softmax(q k^T * scale + mask) v; q [..., L, E], k [..., S, E], v [..., S, Ev]. mask is bool
// (true = keep) or float (added), broadcastable to [..., L, S]. scale defaults to 1/sqrt(E).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = {}, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

// ---- shape ops ----
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
// Pieces of `split_size` along dim (the last may be smaller) [views].
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// ---- reductions (dims empty = all dims) ----
Tensor sum(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
// Max / min along one dim (values only, as torch.max(x, dim).values).
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// correction 1 = unbiased (torch default).
Tensor var(const Tensor& x, std::vector<int64_t> dims = {}, int64_t correction = 1,
           bool keepdim = false);
// Named std_dev since `std` would clash with namespace std under `using namespace lathe`.
Tensor std_dev(const Tensor& x, std::vector<int64_t> dims = {}, int64_t correction = 1,
               bool keepdim = false);

// ---- operators ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace lathe
