// Pass fuse_pointwise: groups of f32 pointwise nodes become one pointwise_fused node that runs
// them as one program over tiles of memory (lathe/kernels/pointwise_program.h): one read of each
// input and one write of the result instead of a round trip through memory per op.
//
//   a --mul--> t1 --add(b)--> t2 --gelu--> y      =>      y = pointwise_fused(a, b; program)
//
// A node joins when its op has a fused form for its attributes (CpuKernelInfo::pointwise_instr), its
// inputs and output are f32, and it is not alone: a producer joins its user's group when the
// value between them has that user only, is no graph output, and has the user's output sizes
// (inputs of the group may broadcast; intermediates never do). The group's result keeps the
// layout tracing recorded ("strides"); a group is left alone when that layout is not static and
// dense (symbolic sizes), or when a node that writes lies between its first member and its root
// (the fused node computes everything at the root's place). Runs after the fusions into oneDNN
// post-ops, so an activation a conv or linear can absorb is absorbed there first.
#pragma once

#include <memory>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct FusePointwiseStats {
  int groups = 0;  // pointwise_fused nodes made
  int nodes = 0;   // pointwise nodes they replace
};

std::unique_ptr<ir::Graph> fuse_pointwise(const ir::Graph& g, FusePointwiseStats* stats = nullptr);

}  // namespace lathe::backend::cpu
