// The ops the cpu backend's passes match and build, resolved once (no name lookups or string
// compares in the passes).
#pragma once

#include "lathe/ops/op_def.h"

namespace lathe::backend::cpu {

struct CpuOps {
  // Built-in ops the passes match.
  const OpDef *add, *mul, *div, *softmax, *matmul, *permute, *slice, *cat, *batch_norm, *conv2d,
      *linear, *max_pool2d;
  // The backend's own fused and layout ops (what the passes create).
  const OpDef *conv2d_fused, *linear_fused, *conv2d_blocked, *conv2d_1x1_dw_blocked, *to_blocked,
      *from_blocked, *max_pool2d_blocked, *pointwise_fused, *sdpa_fused;
};

// Resolved on first use.
const CpuOps& cpu_ops();

}  // namespace lathe::backend::cpu
