// Graph passes. Each is small, named, and has its own test.
#pragma once

#include "lathe/ir/graph.h"

namespace lathe::ir {

// dce: removes nodes whose outputs are unused and that write nothing. Returns nodes removed.
int dead_code_elimination(Graph& g);
// cse: merges nodes with the same op, attributes and inputs (no side effects, deterministic ops
// only: never dropout). Returns nodes removed.
int common_subexpression_elimination(Graph& g);

}  // namespace lathe::ir
