// Graph IR: SSA values produced by nodes that each apply one OpDef. Values carry symbolic tensor
// metadata; graph inputs carry their source (a call argument or a captured tensor).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/op_def.h"

namespace lathe::ir {

class Node;

// Metadata of a value: dtype, device, symbolic sizes; strides when known (graph inputs and views
// keep theirs; other results are unconstrained, the backend picks a layout).
struct ValueType {
  DType dtype = DType::f32;
  Device device;
  Shape sizes;
  Shape strides;  // empty when the layout is the backend's choice
  // "f32[s0,64,112,112]"
  std::string to_string() const;
};

// Where a graph input comes from.
struct InputSource {
  enum class Kind : uint8_t { argument, captured };
  Kind kind = Kind::argument;
  int index = 0;     // argument position (argument) or capture slot (captured)
  std::string name;  // "x" or a module path such as "layer1.0.conv1.weight"
  // "arg0" / "layer1.0.conv1.weight"
  std::string to_string() const;
};

class Value {
 public:
  int id() const { return id_; }
  const ValueType& type() const { return type_; }
  ValueType& mutable_type() { return type_; }
  Node* producer() const { return producer_; }  // nullptr for graph inputs
  int output_index() const { return output_index_; }
  bool is_input() const { return producer_ == nullptr; }
  // Nodes reading this value (each once per use).
  const std::vector<Node*>& users() const { return users_; }

 private:
  friend class Graph;
  int id_ = 0;
  ValueType type_;
  Node* producer_ = nullptr;
  int output_index_ = 0;
  std::vector<Node*> users_;
};

class Node {
 public:
  const OpDef& op() const { return *op_; }
  // Inputs in the OpDef's order; nullptr stands for an undefined optional tensor.
  const std::vector<Value*>& inputs() const { return inputs_; }
  const Attrs& attrs() const { return attrs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(size_t i = 0) const { return outputs_.at(i); }
  // True when the op writes into one of its inputs (kept by DCE, never merged by CSE).
  bool has_side_effects() const { return !op_->mutated_inputs.empty(); }

 private:
  friend class Graph;
  const OpDef* op_ = nullptr;
  std::vector<Value*> inputs_;
  Attrs attrs_;
  std::vector<Value*> outputs_;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Value* add_input(ValueType type, InputSource source);
  // Appends a node (nodes stay in topological order: inputs must already exist).
  Node* add_node(const OpDef& op, std::vector<Value*> inputs, Attrs attrs,
                 std::vector<ValueType> output_types);
  void set_outputs(std::vector<Value*> outputs);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<InputSource>& input_sources() const { return sources_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Nodes in execution (topological) order.
  std::vector<Node*> nodes() const;
  size_t num_nodes() const { return nodes_.size(); }

  // Removes nodes for which keep(node) is false; their outputs must be unused.
  void remove_nodes_if(const std::function<bool(const Node&)>& remove);
  // Replaces every use of `from` (inputs of nodes and graph outputs) with `to`.
  void replace_all_uses(Value* from, Value* to);

  // One line per input and node, FX style:
  //   %x : f32[s0,3,224,224] = input arg0
  //   %5 = conv2d(%x, %p3, stride=[2,2]) : f32[s0,64,112,112]
  //   return (%9)
  std::string to_string() const;
  // Checks SSA form, topological order, no dangling values, input counts, and that every node's
  // output types are what its shape rule computes (on fake tensors of the input types). Throws
  // lathe::Error("[ir.verify] ...") naming the node.
  void verify() const;
  // Hash of ops, attributes, value types and input positions (never data).
  uint64_t structural_hash() const;
  // Full structural comparison (what the hash summarizes).
  bool structurally_equal(const Graph& other) const;

 private:
  Value* new_value(ValueType type);
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<InputSource> sources_;
  std::vector<Value*> outputs_;
};

}  // namespace lathe::ir
