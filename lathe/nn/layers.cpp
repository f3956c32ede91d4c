#include "lathe/nn/layers.h"

#include <cmath>
#include <limits>

#include "lathe/nn/init.h"
#include "lathe/ops/ops.h"

namespace lathe::nn {

namespace {

// {v} -> {v, v}; {a, b} stays.
std::vector<int64_t> pair_of(const std::vector<int64_t>& v, const char* what) {
  LATHE_CHECK(v.size() == 1 || v.size() == 2, "[Conv2d] ", what, " needs 1 or 2 values, got ", v);
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

// torch's _ConvNd / Linear reset_parameters: kaiming_uniform_(a=sqrt(5)) on the weight and
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the bias.
void default_init(Module& m, bool bias) {
  Tensor& w = m.param("weight");
  init::kaiming_uniform_(w, std::sqrt(5.0));
  if (bias) {
    int64_t fan_in = init::fans(w).first;
    double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(m.param("bias"), -bound, bound);
  }
}

}  // namespace

// ---------------------------------------------------------------- Conv2d

Conv2d::Conv2d(Conv2dOptions o) : o_(std::move(o)) {
  o_.kernel_size = pair_of(o_.kernel_size, "kernel_size");
  o_.stride = pair_of(o_.stride, "stride");
  o_.padding = pair_of(o_.padding, "padding");
  o_.dilation = pair_of(o_.dilation, "dilation");
  LATHE_CHECK(o_.groups >= 1 && o_.in_channels % o_.groups == 0 && o_.out_channels % o_.groups == 0,
              "[Conv2d] in_channels ", o_.in_channels, " and out_channels ", o_.out_channels,
              " must be divisible by groups ", o_.groups);
  register_parameter("weight", empty({o_.out_channels, o_.in_channels / o_.groups,
                                      o_.kernel_size[0], o_.kernel_size[1]}));
  if (o_.bias) register_parameter("bias", empty({o_.out_channels}));
  default_init(*this, o_.bias);
}

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding, int64_t groups,
               bool bias)
    : Conv2d(Conv2dOptions{in, out, {k}, {stride}, {padding}, {1}, groups, bias}) {}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, param("weight"), o_.bias ? param("bias") : Tensor(), o_.stride, o_.padding,
                o_.dilation, o_.groups);
}

// ---------------------------------------------------------------- Linear

Linear::Linear(int64_t in, int64_t out, bool bias) {
  LATHE_CHECK(in >= 0 && out >= 0, "[Linear] negative size: in ", in, ", out ", out);
  register_parameter("weight", empty({out, in}));
  if (bias) register_parameter("bias", empty({out}));
  default_init(*this, bias);
  has_bias_ = bias;
}

Tensor Linear::forward(const Tensor& x) {
  return linear(x, param("weight"), has_bias_ ? param("bias") : Tensor());
}

// ---------------------------------------------------------------- BatchNorm2d

BatchNorm2d::BatchNorm2d(int64_t features, double eps, double momentum)
    : eps_(eps), momentum_(momentum) {
  register_parameter("weight", ones({features}));
  register_parameter("bias", zeros({features}));
  register_buffer("running_mean", zeros({features}));
  register_buffer("running_var", ones({features}));
  register_buffer("num_batches_tracked", zeros({}, DType::i64));
  one_ = ones({}, DType::i64);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  LATHE_CHECK(x.defined() && x.dim() == 4, "[BatchNorm2d] expects a 4-d input, got ",
              x.defined() ? x.shape_string() : "undefined");
  if (is_training()) add_(buffer("num_batches_tracked"), one_);
  return batch_norm(x, buffer("running_mean"), buffer("running_var"), param("weight"),
                    param("bias"), is_training(), momentum_, eps_);
}

// ---------------------------------------------------------------- LayerNorm

LayerNorm::LayerNorm(std::vector<int64_t> shape, double eps, bool affine)
    : shape_(std::move(shape)), eps_(eps), affine_(affine) {
  if (affine) {
    register_parameter("weight", ones(to_shape(shape_)));
    register_parameter("bias", zeros(to_shape(shape_)));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  if (!affine_) return layer_norm(x, shape_, {}, {}, eps_);
  return layer_norm(x, shape_, param("weight"), param("bias"), eps_);
}

// ---------------------------------------------------------------- Embedding

Embedding::Embedding(int64_t num, int64_t dim) {
  register_parameter("weight", empty({num, dim}));
  init::normal_(param("weight"), 0.0, 1.0);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(param("weight"), indices); }

// ---------------------------------------------------------------- parameterless layers

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  return dropout(x, p_, true);
}

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor ReLU6::forward(const Tensor& x) { return relu6(x); }
Tensor Hardtanh::forward(const Tensor& x) { return hardtanh(x, lo_, hi_); }
Tensor Hardswish::forward(const Tensor& x) { return hardswish(x); }
Tensor Hardsigmoid::forward(const Tensor& x) { return hardsigmoid(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode)
    : k_(kernel), s_(stride < 0 ? kernel : stride), p_(padding), ceil_(ceil_mode) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, {k_, k_}, {s_, s_}, {p_, p_}, {1, 1}, ceil_);
}

AvgPool2d::AvgPool2d(int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode,
                     bool count_include_pad)
    : k_(kernel),
      s_(stride < 0 ? kernel : stride),
      p_(padding),
      ceil_(ceil_mode),
      include_pad_(count_include_pad) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, {k_, k_}, {s_, s_}, {p_, p_}, ceil_, include_pad_);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  std::vector<int64_t> out = out_.size() == 1 ? std::vector<int64_t>{out_[0], out_[0]} : out_;
  return adaptive_avg_pool2d(x, out);
}

Tensor Flatten::forward(const Tensor& x) { return x.flatten(start_, end_); }

// ---------------------------------------------------------------- MultiheadAttention

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias,
                                       bool batch_first)
    : embed_dim_(embed_dim), num_heads_(num_heads), bias_(bias), batch_first_(batch_first) {
  LATHE_CHECK(num_heads > 0 && embed_dim % num_heads == 0, "[MultiheadAttention] embed_dim ",
              embed_dim, " must be divisible by num_heads ", num_heads);
  // Registration order as torch: in_proj_weight, in_proj_bias, out_proj.
  Tensor& w = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}));
  init::xavier_uniform_(w);
  if (bias) register_parameter("in_proj_bias", zeros({3 * embed_dim}));
  auto out = register_module("out_proj", make<Linear>(embed_dim, embed_dim, bias));
  if (bias) init::constant_(out->param("bias"), 0.0);
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& key_padding_mask, const Tensor& attn_mask) {
  LATHE_CHECK(query.defined() && key.defined() && value.defined() && query.dim() == 3 &&
                  key.dim() == 3 && value.dim() == 3,
              "[MultiheadAttention] query, key and value must be 3-d");
  // Work in [B, L, E].
  Tensor q_in = batch_first_ ? query : query.transpose(0, 1);
  Tensor k_in = batch_first_ ? key : key.transpose(0, 1);
  Tensor v_in = batch_first_ ? value : value.transpose(0, 1);
  LATHE_CHECK(q_in.shape()[2] == embed_dim_ && k_in.shape()[2] == embed_dim_ &&
                  v_in.shape()[2] == embed_dim_,
              "[MultiheadAttention] expects embed dim ", embed_dim_, ", got query ",
              query.shape_string(), ", key ", key.shape_string(), ", value ", value.shape_string());
  const int64_t b = q_in.shape()[0], l = q_in.shape()[1], s = k_in.shape()[1];
  const int64_t e = embed_dim_, h = num_heads_, d = e / h;
  LATHE_CHECK(k_in.shape()[0] == b && v_in.shape()[0] == b && v_in.shape()[1] == s,
              "[MultiheadAttention] batch / length mismatch: query ", query.shape_string(),
              ", key ", key.shape_string(), ", value ", value.shape_string());

  const Tensor& w = param("in_proj_weight");
  Tensor bq, bk, bv;
  if (bias_) {
    const Tensor& bi = param("in_proj_bias");
    bq = bi.slice(0, 0, e);
    bk = bi.slice(0, e, 2 * e);
    bv = bi.slice(0, 2 * e, 3 * e);
  }
  auto heads = [&](const Tensor& t, int64_t len) {
    return t.reshape({b, len, h, d}).transpose(1, 2);  // [B, H, len, D]
  };
  Tensor q = heads(linear(q_in, w.slice(0, 0, e), bq), l);
  Tensor k = heads(linear(k_in, w.slice(0, e, 2 * e), bk), s);
  Tensor v = heads(linear(v_in, w.slice(0, 2 * e, 3 * e), bv), s);

  // Both masks become one additive float mask broadcastable to [B, H, L, S].
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Tensor mask;
  auto additive = [&](const Tensor& m) {
    if (m.dtype() == DType::b8) return where(m, full({}, neg_inf, q.dtype()), 0.0);
    return m.to(q.dtype());
  };
  if (attn_mask.defined()) {
    Tensor am = additive(attn_mask);
    if (am.dim() == 2) {
      LATHE_CHECK(am.shape() == (std::vector<int64_t>{l, s}), "[MultiheadAttention] attn_mask ",
                  attn_mask.shape_string(), " should be [", l, ",", s, "]");
    } else {
      LATHE_CHECK(am.dim() == 3 && am.shape() == (std::vector<int64_t>{b * h, l, s}),
                  "[MultiheadAttention] attn_mask ", attn_mask.shape_string(), " should be [", l,
                  ",", s, "] or [", b * h, ",", l, ",", s, "]");
      am = am.reshape({b, h, l, s});
    }
    mask = am;
  }
  if (key_padding_mask.defined()) {
    LATHE_CHECK(key_padding_mask.shape() == (std::vector<int64_t>{b, s}),
                "[MultiheadAttention] key_padding_mask ", key_padding_mask.shape_string(),
                " should be [", b, ",", s, "]");
    Tensor kp = additive(key_padding_mask).reshape({b, 1, 1, s});
    mask = mask.defined() ? add(mask, kp) : kp;
  }
  Tensor ctx = scaled_dot_product_attention(q, k, v, mask);  // [B, H, L, D]
  Tensor out = child("out_proj")->forward(ctx.transpose(1, 2).reshape({b, l, e}));
  return batch_first_ ? out : out.transpose(0, 1);
}

}  // namespace lathe::nn
