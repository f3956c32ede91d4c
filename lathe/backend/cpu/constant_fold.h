// Pass constant_fold (freezing): a node whose tensor inputs are all frozen constants is run now,
// at compile time, and its outputs become constant graph inputs (named "fold(%<id> <op>)"), so
// a call does not redo work on the weights (transposes, reshapes, casts, scalings of frozen
// parameters). Left alone: nodes without tensor inputs (factories), random ops, nodes with side
// effects and nodes with symbolic attributes (their values are known only per call).
#pragma once

#include <memory>

#include "lathe/backend/cpu/rewrite.h"
#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

// `constants` describes g's inputs on entry and the returned graph's inputs on return.
std::unique_ptr<ir::Graph> constant_fold(const ir::Graph& g, GraphConstants& constants,
                                         int* folded = nullptr);

}  // namespace lathe::backend::cpu
