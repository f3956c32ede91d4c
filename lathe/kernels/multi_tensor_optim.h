// Fused multi-tensor optimizer steps: one parallel pass over the contiguous buffers of every
// parameter (instead of several elementwise ops per parameter), computing each element exactly as
// the per-tensor steps of lathe/optim do (same operations, same order, in the parameter's dtype),
// so the results are bit for bit the same.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/core/dtype.h"

namespace lathe::detail {

// One parameter of an SGD step: n elements each of param, grad and momentum_buffer (null without
// momentum), contiguous, all of the step's dtype. first: the buffer is new (set to the gradient,
// as torch.optim.SGD does at the first step).
struct SgdSlot {
  void* param;
  const void* grad;
  void* momentum_buffer;
  int64_t n;
  bool first;
};
struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};
// dtype f32 or f64.
void multi_tensor_sgd(DType dtype, const std::vector<SgdSlot>& slots, const SgdHyper& h);

// One parameter of an Adam step; step is its step count after this update (bias corrections).
struct AdamSlot {
  void* param;
  const void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  int64_t n;
  double step;
};
struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;
};
void multi_tensor_adam(DType dtype, const std::vector<AdamSlot>& slots, const AdamHyper& h);

}  // namespace lathe::detail
