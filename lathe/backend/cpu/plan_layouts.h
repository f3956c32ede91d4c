// Pass plan_layouts: chains of convolutions keep their activations in oneDNN's 8-channel blocked
// layout (nChw8c, the layout oneDNN's AVX2 kernels are written for) instead of channels-last,
// with reorders only where a region starts or ends:
//
//   conv2d_fused (no batch norm left: folded at compile time)  ->  conv2d_blocked8
//   a blocked value read outside the region                      ->  from_blocked8 after it
//   a channels-last value read inside the region                 ->  to_blocked8 before it
//
// A value stays blocked when it is made by a candidate convolution, is no graph output, and every
// user is a candidate convolution (reading it as its input or its residual). Candidates: f32,
// static sizes, no batch-norm inputs, channels and output channels multiples of 8, and either
// dense, depthwise, or with a multiple of 8 channels per group (other grouped convolutions have
// no blocked kernel). A candidate is converted only when it touches a blocked value, so a lone
// convolution pays no reorders. Off with LATHE_DISABLE_PASSES=plan_layouts.
#pragma once

#include <memory>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct PlanLayoutsStats {
  int blocked_convs = 0;  // convolutions converted
  int to_blocked = 0;     // reorders into the blocked layout
  int from_blocked = 0;   // reorders out of it
};

std::unique_ptr<ir::Graph> plan_layouts(const ir::Graph& g, PlanLayoutsStats* stats = nullptr);

}  // namespace lathe::backend::cpu
