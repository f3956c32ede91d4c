// Pass concat_blocked: a channel concat of values that plan_layouts reorders out of a
// channel-blocked layout (squeezenet's Fire modules: two convolutions, each reordered to
// channels-last, concatenated, reordered back for the next convolution) becomes a concat of the
// blocked values themselves. Blocked [N, C/B, H, W, B] values of one block B concatenate along
// dim 1 into the blocked form of the channel concat, so
//
//   cat(from_blocked(a), from_blocked(b), dim=1) -> to_blocked         (two reorders, a copy, a
//                                                                       reorder)
//   ->  cat(a, b, dim=1)                                               (one copy, which the
//                                                                       planned executor drops
//                                                                       when a and b can be
//                                                                       written into its slices)
//
// A max_pool2d of such a concat pools the blocked value (max_pool2d_blocked), and to_blocked
// readers of the pooling read that, so a pooling between Fire modules costs no reorders.
//
// A user of the concat that is not a to_blocked of the same block (a pooling, a graph output)
// reads one from_blocked of the blocked concat instead. Only when every input is a from_blocked
// of one block and the concat is channels-last (what from_blocked gives back).
#pragma once

#include <memory>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

struct ConcatBlockedStats {
  int concats = 0;           // concats moved onto blocked values
  int reorders_removed = 0;  // from_blocked / to_blocked nodes no longer on the path
  int pools = 0;             // max poolings of a blocked concat run blocked (max_pool2d_blocked)
};

std::unique_ptr<ir::Graph> concat_blocked(const ir::Graph& g, ConcatBlockedStats* stats = nullptr);

}  // namespace lathe::backend::cpu
