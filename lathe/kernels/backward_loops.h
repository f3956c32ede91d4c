// Backward kernels of conv2d, pooling and embedding as direct loops over contiguous f32 / f64
// tensors (correctness first; each parallel loop writes disjoint outputs, so no atomics).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/kernels/dnnl_conv.h"
#include "lathe/kernels/dnnl_pool.h"

namespace lathe::detail {

// All tensors contiguous, 4-d NCHW, one floating dtype; outputs preallocated and overwritten.
// grad_input [N,C,H,W] of conv2d from grad_out [N,O,OH,OW] and weight [O,C/groups,KH,KW].
void conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Conv2dParams& p,
                           const Tensor& grad_input);
// grad_weight [O,C/groups,KH,KW] of conv2d from grad_out and the input x [N,C,H,W].
void conv2d_backward_weight(const Tensor& grad_out, const Tensor& x, const Conv2dParams& p,
                            const Tensor& grad_weight);
// grad_input of max_pool2d: each window's gradient goes to its first maximum (PyTorch's rule).
void max_pool2d_backward(const Tensor& grad_out, const Tensor& x, const Pool2dParams& p,
                         const Tensor& grad_input);
// grad_input of avg_pool2d (divisor as the forward: count_include_pad, ceil_mode clipping).
void avg_pool2d_backward(const Tensor& grad_out, const Pool2dParams& p, const Tensor& grad_input);
// grad_input of adaptive_avg_pool2d (PyTorch's windows).
void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_input);
// grad_weight [num, dim] of embedding: rows of grad_out [n, dim] summed by index (i64 [n]).
void embedding_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_weight);

}  // namespace lathe::detail
