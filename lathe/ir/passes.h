// Graph passes. Each is small, named, and has its own test.
#pragma once

#include "lathe/ir/graph.h"

namespace lathe::ir {

// dce: removes nodes whose outputs are unused (directly or through other removed nodes) and that
// write nothing (Node::has_side_effects: an inference batch_norm writes nothing). Graph outputs
// are kept. Returns nodes removed.
int dead_code_elimination(Graph& g);
// cse: merges nodes with the same op, attributes (compared structurally) and inputs; uses of the
// later node's outputs move to the earlier one. Never merges nodes with side effects or random
// ops (is_random_op), and never across a node that writes in place (it may change what the inputs
// hold). Returns nodes removed.
int common_subexpression_elimination(Graph& g);

// True for ops whose result differs between calls with the same inputs: OpCategory::random
// (dropout).
bool is_random_op(const OpDef& op);

}  // namespace lathe::ir
