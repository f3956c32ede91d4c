// NaN and inf through oneDNN's fused activations. oneDNN computes relu and clip with vector max /
// min, which return the non-NaN operand, and clamps exp's argument the same way: a NaN reaching a
// fused activation comes out as a number, where PyTorch propagates it. The fused kernels check
// their inputs and, when one holds NaN or inf (inf * 0 and inf - inf make NaN inside the
// convolution), run the plain primitive and apply the activations with Lathe's own loops.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/kernels/post_ops.h"

namespace lathe::detail {

// Whether any element of t is NaN or +-inf (f32 and bf16; other dtypes never take oneDNN's fused
// activations and answer false). Reads the tensor once, in parallel when it is large.
bool has_non_finite(const Tensor& t);

// Whether `post` holds an activation oneDNN may compute NaN-dropping.
inline bool post_ops_drop_nan(const PostOps& post) {
  return post.act != PostOps::Act::none || post.act2 != PostOps::Act::none;
}

// True when a kernel with these post-ops must take the NaN-safe path for these operands.
bool needs_nan_safe_post_ops(const PostOps& post, const Tensor& x, const Tensor& w,
                             const Tensor& bias);

// out = act2(act(plain) + (post.sum ? out : 0)) on n contiguous floats.
void apply_post_ops_flat(const float* plain, const PostOps& post, float* out, int64_t n);

}  // namespace lathe::detail
