// The standard layers, with PyTorch's parameter names and default initialization.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lathe/nn/module.h"

namespace lathe::nn {

struct Conv2dOptions {
  int64_t in_channels, out_channels;
  std::vector<int64_t> kernel_size;  // {k} or {kh, kw}
  std::vector<int64_t> stride = {1};
  std::vector<int64_t> padding = {0};
  std::vector<int64_t> dilation = {1};
  int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public Module {  // weight [out, in/groups, kh, kw], bias [out]
 public:
  explicit Conv2d(Conv2dOptions o);
  Conv2d(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t padding = 0,
         int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  const Conv2dOptions& options() const { return o_; }

 private:
  Conv2dOptions o_;
};

class Linear : public Module {  // weight [out, in], bias [out]
 public:
  Linear(int64_t in, int64_t out, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }

 private:
  bool has_bias_ = true;
};

// weight, bias, running_mean, running_var, num_batches_tracked (i64, 0-d). A training forward
// normalizes with batch statistics, updates the running ones in place with `momentum` and
// increments num_batches_tracked.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t features, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BatchNorm2d"; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }

 private:
  double eps_, momentum_;
  Tensor one_;  // the increment of num_batches_tracked
};

class LayerNorm : public Module {  // weight, bias
 public:
  explicit LayerNorm(std::vector<int64_t> shape, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }

 private:
  std::vector<int64_t> shape_;
  double eps_;
  bool affine_;
};

class Embedding : public Module {  // weight [num, dim], N(0,1) init; forward takes i64 indices
 public:
  Embedding(int64_t num, int64_t dim);
  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override { return "Embedding"; }
};

// Identity in eval mode; in training zeroes elements with probability p, scaling the rest.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : p_(p) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }

 private:
  double p_;
};

// Parameterless activations and reshapes.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};
class ReLU6 : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU6"; }
};
class Hardtanh : public Module {
 public:
  Hardtanh(double lo = -1, double hi = 1) : lo_(lo), hi_(hi) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Hardtanh"; }

 private:
  double lo_, hi_;
};
class Hardswish : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Hardswish"; }
};
class Hardsigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Hardsigmoid"; }
};
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : approximate_(std::move(approximate)) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }

 private:
  std::string approximate_;
};
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SiLU"; }
};
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sigmoid"; }
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Tanh"; }
};
class MaxPool2d : public Module {
 public:
  MaxPool2d(int64_t kernel, int64_t stride = -1, int64_t padding = 0, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }

 private:
  int64_t k_, s_, p_;
  bool ceil_;
};
class AvgPool2d : public Module {
 public:
  AvgPool2d(int64_t kernel, int64_t stride = -1, int64_t padding = 0, bool ceil_mode = false,
            bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }

 private:
  int64_t k_, s_, p_;
  bool ceil_, include_pad_;
};
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::vector<int64_t> out) : out_(std::move(out)) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }

 private:
  std::vector<int64_t> out_;
};
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start = 1, int64_t end = -1) : start_(start), end_(end) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }

 private:
  int64_t start_, end_;
};
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Identity"; }
};

// torch.nn.MultiheadAttention (batch_first option; in_proj_weight [3E, E], in_proj_bias [3E],
// out_proj.weight / out_proj.bias). Returns the attention output (weights are not returned).
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true,
                     bool batch_first = false);
  // key_padding_mask: bool [B, S], true = ignore that key. attn_mask: bool (true = masked out)
  // or float (added), [L, S] or [B*heads, L, S].
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& key_padding_mask = {}, const Tensor& attn_mask = {});
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  std::string type_name() const override { return "MultiheadAttention"; }

 private:
  int64_t embed_dim_, num_heads_;
  bool bias_, batch_first_;
};

}  // namespace lathe::nn
