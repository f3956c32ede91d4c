#include "lathe/optim/optimizer.h"

#include <cmath>

#include "lathe/core/grad_mode.h"
#include "lathe/ops/ops.h"

namespace lathe::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    LATHE_CHECK(params_[i].defined(), "[optim] parameter ", i, " is undefined");
    LATHE_CHECK(is_floating(params_[i].dtype()), "[optim] parameter ", i,
                " must be floating point, got ", params_[i].shape_string());
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none)
      p.set_grad({});
    else
      g.fill_(0.0);
  }
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict sd;
  sd.state = state_;
  sd.param_group = hyper_;
  for (size_t i = 0; i < params_.size(); ++i) sd.params.push_back(static_cast<int64_t>(i));
  return sd;
}

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  LATHE_CHECK(sd.params.size() == params_.size(), "[optim] state_dict has ", sd.params.size(),
              " parameters, the optimizer ", params_.size());
  for (const auto& [k, v] : sd.param_group) {
    LATHE_CHECK(hyper_.count(k), "[optim] state_dict has an unknown hyperparameter '", k, "'");
    hyper_[k] = v;
  }
  state_.clear();
  for (const auto& [i, entries] : sd.state)
    for (const auto& [name, t] : entries) state_[i][name] = t.clone();
}

// ---- SGD ----

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)) {
  LATHE_CHECK(o.lr >= 0, "[SGD] invalid learning rate ", o.lr);
  LATHE_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
              "[SGD] nesterov momentum requires a momentum and zero dampening");
  hyper_ = {{"lr", o.lr},
            {"momentum", o.momentum},
            {"dampening", o.dampening},
            {"weight_decay", o.weight_decay},
            {"nesterov", o.nesterov ? 1.0 : 0.0}};
}

void SGD::step() {
  NoGradGuard no_grad;
  const double lr = hyper("lr"), momentum = hyper("momentum"), dampening = hyper("dampening"),
               wd = hyper("weight_decay");
  const bool nesterov = hyper("nesterov") != 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (wd != 0) g = add(g, p, wd);
    if (momentum != 0) {
      auto& st = state_[static_cast<int64_t>(i)];
      auto it = st.find("momentum_buffer");
      Tensor buf;
      if (it == st.end()) {
        buf = g.clone();
        st["momentum_buffer"] = buf;
      } else {
        buf = it->second;
        mul_(buf, momentum);
        add_(buf, g, 1 - dampening);
      }
      g = nesterov ? add(g, buf, momentum) : buf;
    }
    add_(p, g, -lr);
  }
}

// ---- Adam / AdamW ----

Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(std::move(params)) {
  LATHE_CHECK(o.lr >= 0 && o.eps >= 0, "[Adam] invalid learning rate ", o.lr, " or eps ", o.eps);
  LATHE_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
              "[Adam] betas must be in [0, 1), got ", o.beta1, ", ", o.beta2);
  hyper_ = {{"lr", o.lr},
            {"beta1", o.beta1},
            {"beta2", o.beta2},
            {"eps", o.eps},
            {"weight_decay", o.weight_decay},
            {"decoupled_weight_decay", decoupled ? 1.0 : 0.0}};
}

void Adam::step() {
  NoGradGuard no_grad;
  const double lr = hyper("lr"), b1 = hyper("beta1"), b2 = hyper("beta2"), eps = hyper("eps"),
               wd = hyper("weight_decay");
  const bool decoupled = hyper("decoupled_weight_decay") != 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    auto& st = state_[static_cast<int64_t>(i)];
    if (!st.count("step")) {
      // PyTorch keeps the step as an f32 scalar tensor.
      st["step"] = zeros({}, DType::f32);
      st["exp_avg"] = zeros(p.sizes(), p.dtype());
      st["exp_avg_sq"] = zeros(p.sizes(), p.dtype());
    }
    Tensor& step_t = st["step"];
    step_t.fill_(step_t.item() + 1);
    const double step = step_t.item();
    if (wd != 0) {
      if (decoupled)
        mul_(p, 1 - lr * wd);
      else
        g = add(g, p, wd);
    }
    Tensor& m = st["exp_avg"];
    Tensor& v = st["exp_avg_sq"];
    mul_(m, b1);
    add_(m, g, 1 - b1);
    mul_(v, b2);
    add_(v, mul(g, g), 1 - b2);
    const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    Tensor denom = add(div(sqrt(v), std::sqrt(bc2)), eps);
    add_(p, div(m, denom), -lr / bc1);
  }
}

}  // namespace lathe::optim
