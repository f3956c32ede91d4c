// Parameter initializers following torch.nn.init (in place).
#pragma once

#include "lathe/core/tensor.h"

namespace lathe::nn::init {

// fan_in / fan_out as torch computes them (dim 1 * receptive field / dim 0 * receptive field).
std::pair<int64_t, int64_t> fans(const Tensor& w);
void uniform_(const Tensor& t, double lo, double hi);
void normal_(const Tensor& t, double mean = 0.0, double stddev = 1.0);
void constant_(const Tensor& t, double v);
// torch's default for Conv/Linear weights: kaiming_uniform_(a=sqrt(5)).
void kaiming_uniform_(const Tensor& w, double a = 0.0, bool fan_in_mode = true);
void kaiming_normal_(const Tensor& w, double a = 0.0, bool fan_in_mode = false);
void xavier_uniform_(const Tensor& w, double gain = 1.0);
void trunc_normal_(const Tensor& t, double mean = 0.0, double stddev = 1.0, double lo = -2.0,
                   double hi = 2.0);

}  // namespace lathe::nn::init
