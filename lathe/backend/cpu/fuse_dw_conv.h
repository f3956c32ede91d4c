// Pass fuse_dw_conv: a 1x1 convolution on a channel-blocked value and the 3x3 depthwise
// convolution that is its only reader (mobilenet / mnasnet inverted-residual blocks) become one
// conv2d_1x1_dw_blocked node, which runs them as one oneDNN primitive with the depthwise post-op:
// the expanded tensor between them is never written to memory.
//
//   conv2d_blocked(x, w, b) [1x1, stride 1, act]  ->  conv2d_blocked(., dw_w, dw_b) [3x3
//   depthwise, stride 1 or 2, padding 1, act]     =>  conv2d_1x1_dw_blocked(x, w, b, dw_w, dw_b)
//
// Both without a residual or a second activation, on the Winograd-free direct algorithm, static
// shapes. Only where oneDNN runs the pair as a real fused kernel on this machine at the current
// thread count (asked per shape: on oneDNN 2.6 that is nChw16c with AVX-512, mostly batch 8;
// elsewhere it runs the two convolutions one after the other, which gains nothing). Runs after
// plan_layouts (which decides the layouts) and concat_blocked. LATHE_DW_FUSION=0 turns it off.
#pragma once

#include <memory>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct FuseDwConvStats {
  int fused = 0;   // conv2d_1x1_dw_blocked nodes made
  int no_jit = 0;  // pairs left alone: oneDNN has no real fused kernel for them here
};

// Whether the pass runs: LATHE_DW_FUSION unset or not "0".
bool fuse_dw_conv_enabled();

std::unique_ptr<ir::Graph> fuse_dw_conv(const ir::Graph& g, FuseDwConvStats* stats = nullptr);

}  // namespace lathe::backend::cpu
