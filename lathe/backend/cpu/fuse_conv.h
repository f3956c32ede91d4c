// Pass fuse_conv: a convolution and the elementwise work that follows it become one
// conv2d_fused node (lathe/ops/fused_ops.cpp):
//
//   conv2d -> [batch_norm (inference)] -> [relu | hardtanh] -> [add residual] -> [relu | hardtanh]
//
// Every value inside the chain must have exactly one user and must not be a graph output (the
// chain's last value may have any number of users). The residual of the add must have the
// output's shape and dtype (no broadcasting) and alpha 1. Nothing that writes in place may run
// between the chain's first and last node. The fused node takes the chain's last place in the
// graph, so every input it reads is already defined there.
#pragma once

#include <memory>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct FuseConvStats {
  int fused = 0;      // conv2d_fused nodes made
  int bn_folded = 0;  // of which with a batch norm
  int residual = 0;   // of which with a residual add
};

std::unique_ptr<ir::Graph> fuse_conv(const ir::Graph& g, FuseConvStats* stats = nullptr);

}  // namespace lathe::backend::cpu
