// conv2d backward on oneDNN (f32): the input gradient (convolution_backward_data) and the weight
// gradient (convolution_backward_weights), with groups, dilation, stride and padding. The direct
// loops in backward_loops.h stay the reference (f64, tests).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/kernels/dnnl_conv.h"

namespace lathe::detail {

// grad_input [N,C,H,W] (preallocated, any dense layout; channels-last avoids a copy) of conv2d
// from grad_out [N,O,OH,OW] and weight [O,C/groups,KH,KW] (any layouts, f32).
void conv2d_backward_input_dnnl(const Tensor& grad_out, const Tensor& weight, const Conv2dParams& p,
                                const Tensor& grad_input);
// grad_weight [O,C/groups,KH,KW] (preallocated, row-major) of conv2d from grad_out and the
// input x [N,C,H,W] (any layouts, f32).
void conv2d_backward_weight_dnnl(const Tensor& grad_out, const Tensor& x, const Conv2dParams& p,
                                 const Tensor& grad_weight);

}  // namespace lathe::detail
