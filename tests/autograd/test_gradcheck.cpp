// Every op with a vjp against finite differences in f64 (gradcheck.h).
#include <gtest/gtest.h>

#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "tests/autograd/gradcheck.h"

using namespace lathe;
using lathe::testing::gradcheck;
using lathe::testing::rnd;
using lathe::testing::uni;
using V = std::vector<Tensor>;

TEST(Gradcheck, BinaryWithBroadcasting) {
  gradcheck("add", [](const V& x) { return add(x[0], x[1], 0.5); }, {rnd({2, 3}, 1), rnd({3}, 2)});
  gradcheck("sub", [](const V& x) { return sub(x[0], x[1], 2.0); },
            {rnd({2, 1}, 3), rnd({2, 4}, 4)});
  gradcheck("mul", [](const V& x) { return mul(x[0], x[1]); }, {rnd({2, 3, 1}, 5), rnd({1, 4}, 6)});
  gradcheck("div", [](const V& x) { return div(x[0], x[1]); },
            {rnd({2, 3}, 7), uni({3}, 8, 0.5, 2.0)});
  gradcheck("pow", [](const V& x) { return pow(x[0], x[1]); },
            {uni({2, 3}, 9, 0.5, 2.0), rnd({2, 3}, 10)});
  gradcheck("pow_scalar", [](const V& x) { return pow(x[0], 3.0); }, {rnd({4}, 11)});
  gradcheck("maximum", [](const V& x) { return maximum(x[0], x[1]); },
            {rnd({2, 3}, 12), rnd({3}, 13)});
  gradcheck("minimum", [](const V& x) { return minimum(x[0], x[1]); },
            {rnd({2, 3}, 14), rnd({2, 3}, 15)});
  const Tensor cond = gt(rnd({2, 3}, 18), 0.0);
  gradcheck("where", [&](const V& x) { return where(cond, x[0], x[1]); },
            {rnd({2, 3}, 16), rnd({3}, 17)});
  gradcheck("scalar_ops", [](const V& x) { return div(rsub(mul(add(x[0], 1.5), 2.0), 3.0), 4.0); },
            {rnd({5}, 19)});
}

TEST(Gradcheck, Unary) {
  const Tensor x = rnd({3, 4}, 20);
  const Tensor pos = uni({3, 4}, 21, 0.2, 3.0);
  const Tensor wide = rnd({3, 4}, 22, 4.0);
  gradcheck("neg", [](const V& v) { return neg(v[0]); }, {x});
  gradcheck("abs", [](const V& v) { return abs(v[0]); }, {x});
  gradcheck("exp", [](const V& v) { return exp(v[0]); }, {x});
  gradcheck("log", [](const V& v) { return log(v[0]); }, {pos});
  gradcheck("sqrt", [](const V& v) { return sqrt(v[0]); }, {pos});
  gradcheck("rsqrt", [](const V& v) { return rsqrt(v[0]); }, {pos});
  gradcheck("tanh", [](const V& v) { return tanh(v[0]); }, {x});
  gradcheck("sigmoid", [](const V& v) { return sigmoid(v[0]); }, {x});
  gradcheck("erf", [](const V& v) { return erf(v[0]); }, {x});
  gradcheck("silu", [](const V& v) { return silu(v[0]); }, {x});
  gradcheck("relu", [](const V& v) { return relu(v[0]); }, {x});
  gradcheck("relu6", [](const V& v) { return relu6(v[0]); }, {wide});
  gradcheck("hardtanh", [](const V& v) { return hardtanh(v[0], -0.5, 1.5); }, {x});
  gradcheck("clamp", [](const V& v) { return clamp(v[0], -0.3, 0.8); }, {x});
  gradcheck("clamp_min", [](const V& v) { return clamp(v[0], 0.1, std::nullopt); }, {x});
  gradcheck("hardswish", [](const V& v) { return hardswish(v[0]); }, {wide});
  gradcheck("hardsigmoid", [](const V& v) { return hardsigmoid(v[0]); }, {wide});
  gradcheck("gelu", [](const V& v) { return gelu(v[0]); }, {wide});
  gradcheck("gelu_tanh", [](const V& v) { return gelu(v[0], "tanh"); }, {wide});
}

TEST(Gradcheck, ViewsAndCopies) {
  const Tensor x = rnd({2, 3, 4}, 30);
  gradcheck("view", [](const V& v) { return v[0].view({6, 4}); }, {x});
  gradcheck("reshape", [](const V& v) { return v[0].transpose(0, 2).reshape({-1}); }, {x});
  gradcheck("permute", [](const V& v) { return v[0].permute({2, 0, 1}); }, {x});
  gradcheck("slice", [](const V& v) { return v[0].slice(2, 1, 4, 2); }, {x});
  gradcheck("slice_negative", [](const V& v) { return v[0].slice(1, -2, 3); }, {x});
  gradcheck("narrow", [](const V& v) { return v[0].narrow(2, 1, 2); }, {x});
  gradcheck("select", [](const V& v) { return v[0].select(1, -1); }, {x});
  gradcheck("expand", [](const V& v) { return v[0].expand({2, 2, 3, 4}); }, {rnd({2, 1, 4}, 31)});
  gradcheck("squeeze", [](const V& v) { return v[0].squeeze(1); }, {rnd({3, 1, 2}, 32)});
  gradcheck("unsqueeze", [](const V& v) { return v[0].unsqueeze(0); }, {x});
  gradcheck("flatten", [](const V& v) { return v[0].flatten(1); }, {x});
  gradcheck("contiguous", [](const V& v) { return v[0].transpose(0, 1).contiguous(); }, {x});
  gradcheck("cat",
            [](const V& v) {
              return cat({v[0], v[1], v[0]}, 1);
            },
            {rnd({2, 3}, 33), rnd({2, 2}, 34)});
  gradcheck("stack",
            [](const V& v) {
              return stack({v[0], v[1]}, 1);
            },
            {rnd({2, 3}, 35), rnd({2, 3}, 36)});
  gradcheck("split",
            [](const V& v) {
              auto parts = split(v[0], 2, 1);
              return add(mul(parts[0], 2.0), sum(parts[1], {1}, true));
            },
            {rnd({2, 4}, 37)});
  gradcheck("chunk", [](const V& v) { return mul(chunk(v[0], 3, 0)[2], 3.0); }, {rnd({6, 2}, 38)});
}

TEST(Gradcheck, Reductions) {
  const Tensor x = rnd({3, 4, 2}, 40);
  gradcheck("sum_all", [](const V& v) { return sum(v[0]); }, {x});
  gradcheck("sum_dims", [](const V& v) { return sum(v[0], {0, 2}); }, {x});
  gradcheck("sum_keepdim", [](const V& v) { return sum(v[0], {-1}, true); }, {x});
  gradcheck("mean", [](const V& v) { return mean(v[0], {1}); }, {x});
  gradcheck("mean_all", [](const V& v) { return mean(v[0]); }, {x});
  gradcheck("amax", [](const V& v) { return amax(v[0], {1, 2}); }, {x});
  gradcheck("amin", [](const V& v) { return amin(v[0], {0}, true); }, {x});
  gradcheck("max_dim", [](const V& v) { return max(v[0], 1); }, {x});
  gradcheck("min_dim", [](const V& v) { return min(v[0], -1, true); }, {x});
  gradcheck("var", [](const V& v) { return var(v[0], {1}); }, {x});
  gradcheck("var_biased", [](const V& v) { return var(v[0], {0, 2}, 0, true); }, {x});
  gradcheck("std", [](const V& v) { return std_dev(v[0], {1}); }, {x});
}

TEST(Gradcheck, Contractions) {
  gradcheck("matmul_2d", [](const V& v) { return matmul(v[0], v[1]); },
            {rnd({3, 4}, 50), rnd({4, 2}, 51)});
  gradcheck("matmul_batched_broadcast", [](const V& v) { return matmul(v[0], v[1]); },
            {rnd({2, 1, 3, 4}, 52), rnd({3, 4, 2}, 53)});
  gradcheck("matmul_vec_mat", [](const V& v) { return matmul(v[0], v[1]); },
            {rnd({4}, 54), rnd({2, 4, 3}, 55)});
  gradcheck("matmul_mat_vec", [](const V& v) { return matmul(v[0], v[1]); },
            {rnd({3, 4}, 56), rnd({4}, 57)});
  gradcheck("matmul_dot", [](const V& v) { return matmul(v[0], v[1]); },
            {rnd({4}, 58), rnd({4}, 59)});
  gradcheck("bmm", [](const V& v) { return matmul(v[0], v[1].transpose(1, 2)); },
            {rnd({2, 3, 4}, 60), rnd({2, 5, 4}, 61)});
  gradcheck("linear", [](const V& v) { return linear(v[0], v[1], v[2]); },
            {rnd({2, 3, 4}, 62), rnd({5, 4}, 63), rnd({5}, 64)});
  gradcheck("linear_1d_no_bias", [](const V& v) { return linear(v[0], v[1]); },
            {rnd({4}, 65), rnd({3, 4}, 66)});
  gradcheck("conv2d",
            [](const V& v) {
              return conv2d(v[0], v[1], v[2], {1, 1}, {1, 1});
            },
            {rnd({2, 3, 5, 5}, 70), rnd({4, 3, 3, 3}, 71), rnd({4}, 72)});
  gradcheck("conv2d_stride_dilation",
            [](const V& v) {
              return conv2d(v[0], v[1], {}, {2, 1}, {2, 1}, {2, 1});
            },
            {rnd({1, 2, 7, 6}, 73), rnd({3, 2, 3, 2}, 74)});
  gradcheck("conv2d_groups",
            [](const V& v) {
              return conv2d(v[0], v[1], v[2], {1, 1}, {0, 1}, {1, 1}, 2);
            },
            {rnd({2, 4, 4, 4}, 75), rnd({6, 2, 2, 3}, 76), rnd({6}, 77)});
  gradcheck("conv2d_depthwise_channels_last",
            [](const V& v) {
              return conv2d(v[0].to_channels_last(), v[1], {}, {2, 2}, {1, 1}, {1, 1}, 3);
            },
            {rnd({1, 3, 5, 5}, 78), rnd({3, 1, 3, 3}, 79)});
  gradcheck("conv2d_unbatched", [](const V& v) { return conv2d(v[0], v[1]); },
            {rnd({2, 4, 4}, 80), rnd({3, 2, 2, 2}, 81)});
}

TEST(Gradcheck, Pooling) {
  const Tensor x = rnd({2, 2, 6, 5}, 90);
  gradcheck("max_pool2d", [](const V& v) { return max_pool2d(v[0], {2, 2}); }, {x});
  gradcheck("max_pool2d_pad_stride_ceil",
            [](const V& v) {
              return max_pool2d(v[0], {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
            },
            {x});
  gradcheck("max_pool2d_dilation",
            [](const V& v) {
              return max_pool2d(v[0], {2, 2}, {1, 1}, {0, 0}, {2, 2});
            },
            {x});
  gradcheck("avg_pool2d", [](const V& v) { return avg_pool2d(v[0], {2, 2}); }, {x});
  gradcheck("avg_pool2d_pad_exclude_ceil",
            [](const V& v) {
              return avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1}, true, false);
            },
            {x});
  gradcheck("avg_pool2d_pad_include",
            [](const V& v) {
              return avg_pool2d(v[0], {3, 2}, {2, 2}, {1, 1}, false, true);
            },
            {x});
  gradcheck("adaptive_avg_pool2d",
            [](const V& v) {
              return adaptive_avg_pool2d(v[0], {4, 3});
            },
            {x});
  gradcheck("adaptive_avg_pool2d_global",
            [](const V& v) {
              return adaptive_avg_pool2d(v[0], {1, 1});
            },
            {x});
  gradcheck("max_pool2d_unbatched",
            [](const V& v) {
              return max_pool2d(v[0], {2, 2});
            },
            {rnd({2, 4, 4}, 91)});
}

TEST(Gradcheck, Normalization) {
  gradcheck("softmax", [](const V& v) { return softmax(v[0], 1); }, {rnd({3, 5}, 100)});
  gradcheck("log_softmax", [](const V& v) { return log_softmax(v[0], -1); }, {rnd({3, 5}, 101)});
  gradcheck("layer_norm", [](const V& v) { return layer_norm(v[0], {4}, v[1], v[2]); },
            {rnd({2, 3, 4}, 102), rnd({4}, 103), rnd({4}, 104)});
  gradcheck("layer_norm_2d_no_affine",
            [](const V& v) {
              return layer_norm(v[0], {3, 4});
            },
            {rnd({2, 3, 4}, 105)});
  gradcheck("batch_norm_train",
            [](const V& v) {
              Tensor rm = zeros({3}, DType::f64), rv = ones({3}, DType::f64);
              return batch_norm(v[0], rm, rv, v[1], v[2], true, 0.1, 1e-5);
            },
            {rnd({4, 3, 2, 2}, 106), rnd({3}, 107), rnd({3}, 108)});
  gradcheck("batch_norm_train_2d",
            [](const V& v) { return batch_norm(v[0], {}, {}, v[1], v[2], true, 0.1, 1e-5); },
            {rnd({5, 3}, 109), rnd({3}, 110), rnd({3}, 111)});
  const Tensor rm = rnd({3}, 112), rv = uni({3}, 113, 0.5, 2.0);
  gradcheck("batch_norm_eval",
            [&](const V& v) { return batch_norm(v[0], rm, rv, v[1], v[2], false, 0.1, 1e-5); },
            {rnd({2, 3, 2, 2}, 114), rnd({3}, 115), rnd({3}, 116)});
}

TEST(Gradcheck, DropoutEmbeddingLossesAttention) {
  gradcheck("dropout",
            [](const V& v) {
              manual_seed(7);
              return dropout(v[0], 0.4, true);
            },
            {rnd({4, 5}, 120)});
  const Tensor idx = from_vector<int64_t>({1, 3, 1, 0, 4, 3}, {2, 3});
  gradcheck("embedding", [&](const V& v) { return embedding(v[0], idx); }, {rnd({5, 4}, 121)});
  const Tensor target = from_vector<int64_t>({2, 0, 4, 1}, {4});
  const Tensor target_ignore = from_vector<int64_t>({2, -100, 4, 1}, {4});
  for (const char* red : {"mean", "sum", "none"}) {
    gradcheck(std::string("nll_loss_") + red,
              [&](const V& v) { return nll_loss(log_softmax(v[0], 1), target, red); },
              {rnd({4, 5}, 122)});
    gradcheck(std::string("cross_entropy_ignore_") + red,
              [&](const V& v) { return cross_entropy(v[0], target_ignore, red); },
              {rnd({4, 5}, 123)});
  }
  gradcheck("cross_entropy_1d",
            [&](const V& v) { return cross_entropy(v[0], from_vector<int64_t>({3}, {})); },
            {rnd({5}, 124)});
  gradcheck("sdpa", [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); },
            {rnd({2, 3, 4}, 125), rnd({2, 5, 4}, 126), rnd({2, 5, 3}, 127)});
  gradcheck("sdpa_causal_mask",
            [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], {}, true); },
            {rnd({1, 2, 4, 4}, 128), rnd({1, 2, 4, 4}, 129), rnd({1, 2, 4, 4}, 130)});
}
