// Optimizers with PyTorch's update rules (torch.optim): SGD, Adam, AdamW. Each updates the
// parameters' data in place from their .grad() under a NoGradGuard, keeps per-parameter state in
// PyTorch's state_dict layout, and can be driven by the learning-rate schedulers of
// lr_scheduler.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::optim {

// torch.optim's state_dict: per-parameter state by parameter index, and the one parameter group
// (hyperparameters by name, bools as 0/1, with the indices of its parameters).
struct OptimizerStateDict {
  std::map<int64_t, std::map<std::string, Tensor>> state;
  std::map<std::string, double> param_group;
  std::vector<int64_t> params;
};

class Optimizer {
 public:
  // Throws when a parameter is undefined, not floating point, or listed twice.
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;

  // One update of every parameter that has a gradient.
  virtual void step() = 0;
  // Clears the gradients: undefined with set_to_none (PyTorch's default), else zero-filled.
  void zero_grad(bool set_to_none = true);

  double lr() const { return hyper_.at("lr"); }
  void set_lr(double lr) { hyper_["lr"] = lr; }
  const std::vector<Tensor>& params() const { return params_; }

  OptimizerStateDict state_dict() const;
  // Restores hyperparameters and state (tensors copied); the parameter count must match.
  void load_state_dict(const OptimizerStateDict& sd);

 protected:
  double hyper(const char* name) const { return hyper_.at(name); }
  std::vector<Tensor> params_;
  std::map<std::string, double> hyper_;
  std::map<int64_t, std::map<std::string, Tensor>> state_;
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  // One fused pass over all parameters (lathe/kernels/multi_tensor_optim.h) instead of several
  // ops per parameter; bit for bit the same results. Parameters, gradients and state must be
  // contiguous CPU tensors of one dtype (f32 or f64); otherwise the step runs per tensor.
  bool fused = false;
};

// torch.optim.SGD: g += wd * p; buf = momentum * buf + (1 - dampening) * g (buf = g at the first
// step); g = nesterov ? g + momentum * buf : buf; p -= lr * g.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;

 private:
  bool fused_step();  // false (nothing done) when the tensors do not qualify
  bool fused_ = false;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool fused = false;  // as SGDOptions::fused
};

// torch.optim.Adam (decoupled = false: weight decay added to the gradient) and AdamW (decoupled
// = true: p *= 1 - lr * wd before the Adam update). No amsgrad.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay = false);
  void step() override;

 private:
  bool fused_step();
  bool fused_ = false;
};

class AdamW : public Adam {
 public:
  // PyTorch's AdamW default weight decay is 1e-2.
  AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, true) {}
};

}  // namespace lathe::optim
