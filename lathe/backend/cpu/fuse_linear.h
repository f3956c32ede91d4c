// Pass fuse_linear: a linear layer and the elementwise work that follows it become one
// linear_fused node (lathe/ops/fused_ops.cpp), run as one oneDNN matmul with post-ops:
//
//   linear -> [relu | gelu] -> [add residual]
//
// The same rules as fuse_conv: values inside the chain have one user and are no graph output;
// the residual has the output's shape and dtype (no broadcasting), alpha 1; nothing that writes in
// place runs inside the chain; the fused node takes the chain's last place.
#pragma once

#include <memory>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct FuseLinearStats {
  int fused = 0;     // linear_fused nodes made
  int act = 0;       // of which with an activation
  int residual = 0;  // of which with a residual add
};

std::unique_ptr<ir::Graph> fuse_linear(const ir::Graph& g, FuseLinearStats* stats = nullptr);

}  // namespace lathe::backend::cpu
