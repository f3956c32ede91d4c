// Ops that compute gradients which no composition of other ops expresses well: conv2d's
// gradients for its input and weight, pooling and embedding gradients. The vjp rules call them;
// they are ops (not hidden kernel calls) so tracing records them like any other op.
#pragma once

#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/attrs.h"

namespace lathe {

// grad_out [N,O,OH,OW]; conv_attrs: stride, padding, dilation, groups of the forward call.
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_size,
                             const Attrs& conv_attrs);
Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& input, const Shape& weight_size,
                              const Attrs& conv_attrs);
// pool_attrs: the attributes of the forward max_pool2d / avg_pool2d call; 4-d tensors.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Attrs& pool_attrs);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size,
                           const Attrs& pool_attrs);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size);
// The training batch_norm's gradients for (input, weight, bias) with the batch statistics of
// input (N, C, ...); weight [C] may be undefined.
std::vector<Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                        const Tensor& weight, double eps);
// Rows of grad_out [..., dim] summed into a [num_weights, dim] gradient by the indices.
Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights);

}  // namespace lathe
