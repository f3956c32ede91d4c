// Weak redeclarations of the ops.h free functions, so that the oracle tests link while op
// families are still being implemented: an op whose definition is not linked in has a null
// address, which the tests report as a failure ("not linked") instead of breaking the build of
// the whole test folder. A defined op links normally (its object file is pulled into the link
// by the op registry, which references every register_*_ops function).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lathe/ops/ops.h"

#define LATHE_ORACLE_WEAK __attribute__((weak))

namespace lathe {

// clang-format off
LATHE_ORACLE_WEAK Tensor add(const Tensor& a, const Tensor& b, double alpha);
LATHE_ORACLE_WEAK Tensor sub(const Tensor& a, const Tensor& b, double alpha);
LATHE_ORACLE_WEAK Tensor mul(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor div(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor pow(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor maximum(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor minimum(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor add(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor sub(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor rsub(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor mul(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor div(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor pow(const Tensor& a, double exponent);
LATHE_ORACLE_WEAK Tensor eq(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor ne(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor lt(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor le(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor gt(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor ge(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor eq(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor ne(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor lt(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor le(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor gt(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor ge(const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor logical_not(const Tensor& a);
LATHE_ORACLE_WEAK Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor where(const Tensor& cond, const Tensor& a, double b);
LATHE_ORACLE_WEAK Tensor neg(const Tensor& x);
LATHE_ORACLE_WEAK Tensor abs(const Tensor& x);
LATHE_ORACLE_WEAK Tensor exp(const Tensor& x);
LATHE_ORACLE_WEAK Tensor log(const Tensor& x);
LATHE_ORACLE_WEAK Tensor sqrt(const Tensor& x);
LATHE_ORACLE_WEAK Tensor rsqrt(const Tensor& x);
LATHE_ORACLE_WEAK Tensor tanh(const Tensor& x);
LATHE_ORACLE_WEAK Tensor sigmoid(const Tensor& x);
LATHE_ORACLE_WEAK Tensor erf(const Tensor& x);
LATHE_ORACLE_WEAK Tensor relu(const Tensor& x);
LATHE_ORACLE_WEAK Tensor relu6(const Tensor& x);
LATHE_ORACLE_WEAK Tensor hardtanh(const Tensor& x, double min_val, double max_val);
LATHE_ORACLE_WEAK Tensor hardswish(const Tensor& x);
LATHE_ORACLE_WEAK Tensor hardsigmoid(const Tensor& x);
LATHE_ORACLE_WEAK Tensor gelu(const Tensor& x, const std::string& approximate);
LATHE_ORACLE_WEAK Tensor silu(const Tensor& x);
LATHE_ORACLE_WEAK Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
LATHE_ORACLE_WEAK Tensor& add_(Tensor& self, const Tensor& other, double alpha);
LATHE_ORACLE_WEAK Tensor& mul_(Tensor& self, double v);
LATHE_ORACLE_WEAK Tensor& relu_(Tensor& self);
LATHE_ORACLE_WEAK Tensor matmul(const Tensor& a, const Tensor& b);
LATHE_ORACLE_WEAK Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
LATHE_ORACLE_WEAK Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                std::vector<int64_t> stride, std::vector<int64_t> padding,
                                std::vector<int64_t> dilation, int64_t groups);
LATHE_ORACLE_WEAK Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel,
                                    std::vector<int64_t> stride, std::vector<int64_t> padding,
                                    std::vector<int64_t> dilation, bool ceil_mode);
LATHE_ORACLE_WEAK Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel,
                                    std::vector<int64_t> stride, std::vector<int64_t> padding,
                                    bool ceil_mode, bool count_include_pad);
LATHE_ORACLE_WEAK Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);
LATHE_ORACLE_WEAK Tensor batch_norm(const Tensor& x, const Tensor& running_mean,
                                    const Tensor& running_var, const Tensor& weight,
                                    const Tensor& bias, bool training, double momentum, double eps);
LATHE_ORACLE_WEAK Tensor layer_norm(const Tensor& x, std::vector<int64_t> normalized_shape,
                                    const Tensor& weight, const Tensor& bias, double eps);
LATHE_ORACLE_WEAK Tensor softmax(const Tensor& x, int64_t dim);
LATHE_ORACLE_WEAK Tensor log_softmax(const Tensor& x, int64_t dim);
LATHE_ORACLE_WEAK Tensor dropout(const Tensor& x, double p, bool training);
LATHE_ORACLE_WEAK Tensor embedding(const Tensor& weight, const Tensor& indices);
LATHE_ORACLE_WEAK Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                                  const std::string& reduction, int64_t ignore_index);
LATHE_ORACLE_WEAK Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                                       const std::string& reduction, int64_t ignore_index);
LATHE_ORACLE_WEAK Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k,
                                                      const Tensor& v, const Tensor& mask,
                                                      bool is_causal, std::optional<double> scale);
LATHE_ORACLE_WEAK Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
LATHE_ORACLE_WEAK Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
LATHE_ORACLE_WEAK std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
LATHE_ORACLE_WEAK std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes,
                                            int64_t dim);
LATHE_ORACLE_WEAK std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
LATHE_ORACLE_WEAK Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim);
LATHE_ORACLE_WEAK Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim);
LATHE_ORACLE_WEAK Tensor amax(const Tensor& x, std::vector<int64_t> dims, bool keepdim);
LATHE_ORACLE_WEAK Tensor amin(const Tensor& x, std::vector<int64_t> dims, bool keepdim);
LATHE_ORACLE_WEAK Tensor max(const Tensor& x, int64_t dim, bool keepdim);
LATHE_ORACLE_WEAK Tensor min(const Tensor& x, int64_t dim, bool keepdim);
LATHE_ORACLE_WEAK Tensor argmax(const Tensor& x, int64_t dim, bool keepdim);
LATHE_ORACLE_WEAK Tensor argmin(const Tensor& x, int64_t dim, bool keepdim);
LATHE_ORACLE_WEAK Tensor var(const Tensor& x, std::vector<int64_t> dims, int64_t correction,
                             bool keepdim);
LATHE_ORACLE_WEAK Tensor std(const Tensor& x, std::vector<int64_t> dims, int64_t correction,
                             bool keepdim);
// clang-format on

}  // namespace lathe

namespace lathe::oracle {

// True when the function F (an ops.h overload picked by its pointer type) is linked in:
// linked<Tensor (*)(const Tensor&)>(&lathe::relu).
template <class F>
bool linked(F f) {
  return f != nullptr;
}

}  // namespace lathe::oracle
