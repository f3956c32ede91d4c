// Pass lower_precision: at bf16 precision (CompileOptions::precision, LATHE_PRECISION=bf16; for
// inference graphs only), the graph's convolutions and linear layers compute on oneDNN's bf16
// kernels. Each f32 conv2d / conv2d_fused / conv2d_blocked / linear / linear_fused node gets the
// attribute precision = "bf16": its input is rounded to bf16 by one reorder, its weight rounded
// once (cached with the primitive's layout, so a frozen weight is converted once per compile),
// and it multiplies with f32 accumulation; bias, post-ops (batch norm, activation, residual) and
// the output stay f32, so every other pass and kernel is unchanged. Depthwise convolutions stay
// f32 (memory-bound: rounding their input costs more than the bf16 multiply saves), and so does
// everything where the CPU has no bf16 kernels (dnnl_bf16_native: avx512_bf16 or AMX), with one
// warning per process on stderr. The rounding error is that of PyTorch's CPU autocast for these ops
// (bf16 operands, f32 accumulation), smaller because their outputs are not rounded.
#pragma once

#include <memory>
#include <string>

#include "lathe/core/dtype.h"
#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct LowerPrecisionStats {
  int convs = 0;             // convolutions now at bf16
  int linears = 0;           // linear layers now at bf16
  int depthwise_kept = 0;    // depthwise convolutions left at f32
  bool unsupported = false;  // the CPU has no bf16 kernels: nothing changed
};

// `precision` is f32 (the graph comes back unchanged) or bf16; throws lathe::Error for another.
std::unique_ptr<ir::Graph> lower_precision(const ir::Graph& g, DType precision,
                                           LowerPrecisionStats* stats = nullptr);

}  // namespace lathe::backend::cpu
