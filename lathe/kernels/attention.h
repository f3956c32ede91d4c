// Fused scaled-dot-product attention over f32 tensors: blocked over queries and keys with an
// online softmax, so no [L, S] score matrix is ever stored (memory O(block * S) per thread).
#pragma once

#include "lathe/core/tensor.h"

namespace lathe::kernels {

// out[b,h,i,:] = sum_j softmax_j(scale * q[b,h,i,:].k[b,h,j,:] + mask[b,h,i,j]) v[b,h,j,:]
// q [B,H,L,E], k [B,H,S,E], v [B,H,S,Ev], out [B,H,L,Ev]: f32, any strides. mask: undefined, or
// an f32 tensor of sizes [B,H,L,S] (a broadcast view: stride 0 where it repeats).
// A row whose scores are all -inf gives NaN, as softmax does.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                       float scale, const Tensor& out);

}  // namespace lathe::kernels
