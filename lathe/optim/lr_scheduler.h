// Learning-rate schedulers (torch.optim.lr_scheduler): call step() once per epoch after the
// optimizer's steps; the optimizer's lr follows the schedule from the lr it had at construction.
#pragma once

#include <cstdint>

#include "lathe/optim/optimizer.h"

namespace lathe::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}
  virtual ~LRScheduler() = default;
  // Advances one epoch and sets the optimizer's lr.
  void step();
  int64_t last_epoch() const { return epoch_; }
  double get_last_lr() const { return optimizer_.lr(); }

 protected:
  virtual double lr_at(int64_t epoch) const = 0;
  Optimizer& optimizer_;
  double base_lr_;
  int64_t epoch_ = 0;
};

// lr = base_lr * gamma^(epoch / step_size) (integer division), as torch's StepLR.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, torch's
// CosineAnnealingLR (its closed form; the recursive form torch evaluates agrees to rounding).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace lathe::optim
