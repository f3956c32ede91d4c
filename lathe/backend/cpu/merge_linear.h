// Pass merge_linear (freezing): linear layers that read the same input with frozen weights
// (bert's query, key and value projections) become one wider linear over their weights
// concatenated at compile time, and each original output a slice of its columns:
//
//   q = linear(x, Wq, bq); k = linear(x, Wk, bk); v = linear(x, Wv, bv)
//   ->  qkv = linear(x, cat(Wq, Wk, Wv), cat(bq, bk, bv)); q, k, v = slices of qkv's last dim
//
// One GEMM of N = 3D reads x once and keeps the cores busier than three of N = D. Merged are
// `linear` nodes and `linear_fused` nodes without a residual (grouped by activation), whose
// weights (and biases, when present) are constants of one dtype, whose output is no graph
// output (a slice view would change its strides). A member without a bias gets zeros when
// another member has one. The slices are views: the consumers (bert's head split, a view and
// a transpose) read them with their real strides.
#pragma once

#include <memory>

#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct MergeLinearStats {
  int groups = 0;  // merged linear nodes made
  int merged = 0;  // linear nodes they replace
};

// `constants` describes g's inputs on entry and the returned graph's inputs on return.
std::unique_ptr<ir::Graph> merge_linear(const ir::Graph& g, GraphConstants& constants,
                                        MergeLinearStats* stats = nullptr);

}  // namespace lathe::backend::cpu
