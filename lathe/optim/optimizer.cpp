#include "lathe/optim/optimizer.h"

#include <cmath>

#include "lathe/core/grad_mode.h"
#include "lathe/kernels/multi_tensor_optim.h"
#include "lathe/ops/ops.h"

namespace lathe::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    LATHE_CHECK(params_[i].defined(), "[optim] parameter ", i, " is undefined");
    LATHE_CHECK(is_floating(params_[i].dtype()), "[optim] parameter ", i,
                " must be floating point, got ", params_[i].shape_string());
    // A tensor listed twice would be stepped twice (and keep two states): a tied weight is one
    // parameter (Module::parameters() lists it once).
    for (size_t j = 0; j < i; ++j)
      LATHE_CHECK(!params_[j].is_same(params_[i]), "[optim] parameter ", i, " is parameter ", j,
                  " again (", params_[i].shape_string(),
                  "): list each tensor once, a tied weight included");
  }
}

namespace {

// The parameters a fused step updates (those with a gradient), or nothing when any of them, its
// gradient or one of `state_keys` already in its state is not a contiguous CPU tensor of the
// first parameter's dtype (f32 or f64), or has other sizes.
bool fused_eligible(const std::vector<Tensor>& params,
                    std::map<int64_t, std::map<std::string, Tensor>>& state,
                    std::initializer_list<const char*> state_keys, std::vector<size_t>* with_grad) {
  DType dt = DType::f32;
  bool first = true;
  auto ok = [&](const Tensor& t, const Tensor& like) {
    return t.device() == Device::cpu() && t.has_storage() && t.is_contiguous() && t.dtype() == dt &&
           t.sizes() == like.sizes();
  };
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (first) {
      dt = p.dtype();
      first = false;
      if (dt != DType::f32 && dt != DType::f64) return false;
    }
    if (!ok(p, p) || !ok(g, p)) return false;
    auto it = state.find(static_cast<int64_t>(i));
    if (it != state.end())
      for (const char* key : state_keys) {
        auto e = it->second.find(key);
        if (e != it->second.end() && !ok(e->second, p)) return false;
      }
    with_grad->push_back(i);
  }
  return true;
}

}  // namespace

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
  fused_ = o.fused;
}

bool SGD::fused_step() {
  std::vector<size_t> idx;
  if (!fused_eligible(params_, state_, {"momentum_buffer"}, &idx)) return false;
  if (idx.empty()) return true;
  detail::SgdHyper h{hyper("lr"), hyper("momentum"), hyper("dampening"), hyper("weight_decay"),
                     hyper("nesterov") != 0};
  std::vector<detail::SgdSlot> slots;
  for (size_t i : idx) {
    const Tensor& p = params_[i];
    detail::SgdSlot s{p.raw_data(), p.grad().raw_data(), nullptr, p.numel(), false};
    if (h.momentum != 0) {
      auto& st = state_[static_cast<int64_t>(i)];
      auto it = st.find("momentum_buffer");
      if (it == st.end()) {
        it = st.emplace("momentum_buffer", empty(p.sizes(), p.dtype())).first;
        s.first = true;
      }
      s.momentum_buffer = it->second.raw_data();
    }
    slots.push_back(s);
  }
  detail::multi_tensor_sgd(params_[idx[0]].dtype(), slots, h);
  for (size_t i : idx) {
    params_[i].bump_version();
    if (h.momentum != 0) state_[static_cast<int64_t>(i)]["momentum_buffer"].bump_version();
  }
  return true;
}

void SGD::step() {
  NoGradGuard no_grad;
  if (fused_ && fused_step()) return;
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
  fused_ = o.fused;
}

bool Adam::fused_step() {
  std::vector<size_t> idx;
  if (!fused_eligible(params_, state_, {"exp_avg", "exp_avg_sq"}, &idx)) return false;
  if (idx.empty()) return true;
  detail::AdamHyper h{hyper("lr"),  hyper("beta1"),        hyper("beta2"),
                      hyper("eps"), hyper("weight_decay"), hyper("decoupled_weight_decay") != 0};
  std::vector<detail::AdamSlot> slots;
  for (size_t i : idx) {
    const Tensor& p = params_[i];
    auto& st = state_[static_cast<int64_t>(i)];
    if (!st.count("step")) {
      st["step"] = zeros({}, DType::f32);
      st["exp_avg"] = zeros(p.sizes(), p.dtype());
      st["exp_avg_sq"] = zeros(p.sizes(), p.dtype());
    }
    Tensor& step_t = st["step"];
    step_t.fill_(step_t.item() + 1);
    slots.push_back({p.raw_data(), p.grad().raw_data(), st["exp_avg"].raw_data(),
                     st["exp_avg_sq"].raw_data(), p.numel(), step_t.item()});
  }
  detail::multi_tensor_adam(params_[idx[0]].dtype(), slots, h);
  for (size_t i : idx) {
    params_[i].bump_version();
    auto& st = state_[static_cast<int64_t>(i)];
    st["exp_avg"].bump_version();
    st["exp_avg_sq"].bump_version();
  }
  return true;
}

void Adam::step() {
  NoGradGuard no_grad;
  if (fused_ && fused_step()) return;
  const double lr = hyper("lr"), b1 = hyper("beta1"), b2 = hyper("beta2"), eps = hyper("eps"),
               wd = hyper("weight_decay");
  const bool decoupled = hyper("decoupled_weight_decay") != 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    auto& st = state_[static_cast<int64_t>(i)];
    if (!st.count("step")) {
      // PyTorch keeps the step as an f32 scalar tensor (on the CPU: the update reads it as a
      // number); the moments live where the parameter does (the lazy device too).
      st["step"] = zeros({}, DType::f32);
      st["exp_avg"] = zeros(p.sizes(), p.dtype()).to(p.device());
      st["exp_avg_sq"] = zeros(p.sizes(), p.dtype()).to(p.device());
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
