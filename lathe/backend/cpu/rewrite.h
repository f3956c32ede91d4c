// Rebuilding a graph with some nodes replaced: the graph IR is append-only (nodes stay in
// topological order), so a pass that fuses nodes copies the graph, node by node, into a new one.
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>

#include "lathe/ir/graph.h"

namespace lathe::backend::cpu {

// The state of a copy: maps values of the old graph to values of the new one.
struct GraphCopy {
  std::unique_ptr<ir::Graph> graph = std::make_unique<ir::Graph>();
  std::unordered_map<const ir::Value*, ir::Value*> map;
  ir::Value* operator[](const ir::Value* v) const { return v ? map.at(v) : nullptr; }
  // Copies node n unchanged into the new graph.
  void copy_node(const ir::Node& n);
};

// Copies g into a new graph. For each node in order, `emit` may add its own replacement (and map
// the node's outputs) and return true; otherwise the node is copied as it is.
std::unique_ptr<ir::Graph> rewrite_graph(
    const ir::Graph& g, const std::function<bool(const ir::Node&, GraphCopy&)>& emit);

// Constants of a graph being compiled (freezing): per graph input, in Graph::inputs() order, its
// value when the input is a frozen constant, undefined otherwise (shorter than the inputs: the
// rest are not constants). Passes that derive new constants (folding) append graph inputs and
// their values together.
using GraphConstants = std::vector<Tensor>;

// The constant value of each graph input that has one.
std::unordered_map<const ir::Value*, Tensor> constant_values(const ir::Graph& g,
                                                             const GraphConstants& constants);

// Adds `value` to the copy as a new constant graph input of type `type` (printed as `name`), and
// its value to `constants` (which must describe copy.graph's inputs so far).
ir::Value* add_constant(GraphCopy& copy, GraphConstants& constants, const Tensor& value,
                        const ir::ValueType& type, const std::string& name);

}  // namespace lathe::backend::cpu
