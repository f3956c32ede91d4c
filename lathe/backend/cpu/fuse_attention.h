// Pass fuse_attention: scaled-dot-product attention as bert and vit produce it (the composition
// in lathe/ops/attention_ops.cpp, or written out by hand)
//
//   matmul(q, kt) -> [mul | div by a 0-d scale] -> [add mask] -> softmax(dim -1) -> matmul(., v)
//
// becomes one sdpa_fused node (a blocked kernel with an online softmax: the [L, S] scores are
// never stored). f32 only, 4-d q / kt / v; values inside the chain have one user and are no graph
// output; the mask must broadcast into the scores (never widen them); nothing that writes in
// place runs inside the chain. When the result's only reader is permute(0, 2, 1, 3) (the heads
// moved back beside the embedding, as bert and vit do before merging them), the fused node
// writes that layout itself (`transpose_out`) and the permute goes, so the reshape that follows
// is a view instead of a copy.
#pragma once

#include <memory>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct FuseAttentionStats {
  int fused = 0;       // sdpa_fused nodes made
  int masked = 0;      // of which with a mask
  int transposed = 0;  // of which writing [B, L, H, E] (the permute after them absorbed)
};

std::unique_ptr<ir::Graph> fuse_attention(const ir::Graph& g, FuseAttentionStats* stats = nullptr);

}  // namespace lathe::backend::cpu
