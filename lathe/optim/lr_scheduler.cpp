#include "lathe/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

#include "lathe/core/error.h"

namespace lathe::optim {

void LRScheduler::step() {
  ++epoch_;
  optimizer_.set_lr(lr_at(epoch_));
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  LATHE_CHECK(step_size > 0, "[StepLR] step_size must be positive, got ", step_size);
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  LATHE_CHECK(t_max > 0, "[CosineAnnealingLR] T_max must be positive, got ", t_max);
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return eta_min_ + (base_lr_ - eta_min_) *
                        (1 + std::cos(std::numbers::pi * static_cast<double>(epoch) /
                                      static_cast<double>(t_max_))) /
                        2;
}

}  // namespace lathe::optim
