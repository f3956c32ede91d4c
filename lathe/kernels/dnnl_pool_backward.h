// max_pool2d / avg_pool2d backward on oneDNN (f32, pooling_v2_backward). Each returns false when
// oneDNN cannot express PyTorch's semantics for the configuration; the caller then runs the
// reference loops of backward_loops.h.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/kernels/dnnl_pool.h"

namespace lathe::detail {

// grad_input [N,C,H,W] (preallocated, row-major or channels-last) of max_pool2d from grad_out
// [N,C,OH,OW] and the forward input x (any layouts, f32). The forward is run again in training
// mode to get oneDNN's argmax workspace; ties go to the first maximum in the window, as in
// PyTorch.
bool max_pool2d_backward_dnnl(const Tensor& grad_out, const Tensor& x, const Pool2dParams& p,
                              const Tensor& grad_input);
// grad_input of avg_pool2d (divisor as the forward's).
bool avg_pool2d_backward_dnnl(const Tensor& grad_out, const Pool2dParams& p,
                              const Tensor& grad_input);

}  // namespace lathe::detail
