// Pass fold_batch_norm (freezing): an inference batch norm whose input is a convolution, with
// the convolution's weight and bias and the batch norm's statistics and affine parameters all
// frozen constants, becomes one conv2d with a folded weight and bias computed now (in f64):
//
//   w' = w * s[o],  b' = (b - mean) * s + beta,  s = gamma / sqrt(var + eps)
//
// The folded weight and bias are new constant graph inputs (named "bn_fold(<weight>)" and
// "bn_fold(<weight>).bias"); the executable keeps them. The conv's output must have the batch
// norm as its only user and must not be a graph output.
#pragma once

#include <memory>

#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

// `constants` describes g's inputs on entry and the returned graph's inputs on return.
std::unique_ptr<ir::Graph> fold_batch_norm(const ir::Graph& g, GraphConstants& constants,
                                           int* folded = nullptr);

}  // namespace lathe::backend::cpu
