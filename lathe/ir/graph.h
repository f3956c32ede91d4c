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

class Graph;
class Node;

namespace detail {
// Test-only access to a graph's internals (to build malformed graphs for the verifier's tests).
// Declared here, defined only in tests.
struct GraphSurgery;
}  // namespace detail

// Whether a value's strides are a promise (fixed) or a suggestion (flexible), as inductor's
// FixedLayout / FlexibleLayout. Fixed: the program can observe the layout, so every backend must
// give the value exactly these strides: graph inputs and outputs, values seen through a view (a
// view's input and output), values written in place. Flexible: only the graph reads the value;
// the strides are what eager would give it (the recorders' layout rule), and a backend may lay it
// out otherwise (oneDNN's blocked layouts) as long as the values it computes are the same. The
// Graph decides it from its structure as values are added (add_input, add_node, set_outputs,
// replace_all_uses): every mode that builds graphs (compile's tracer, the lazy device,
// functionalize, the backends' passes) gets the same rule.
enum class Layout : uint8_t { flexible, fixed };

// Metadata of a value: dtype, device, symbolic sizes; strides when recorded (the recorders give
// every value the one layout rule's strides, which each run derives again from the real ones;
// empty strides leave the layout to the backend).
struct ValueType {
  DType dtype = DType::f32;
  Device device;
  Shape sizes;
  Shape strides;  // empty when the layout is the backend's choice
  bool requires_grad = false;
  Layout layout = Layout::flexible;  // set by the Graph (see Layout); not part of type equality
  bool fixed_layout() const { return layout == Layout::fixed; }
  // "f32[s0,64,112,112]"; strides follow in braces when they are not row-major
  // ("f32[2,3,4,4]{48,1,12,3}"), the device after '@' when it is not the CPU ("f32[2]@lazy"),
  // and " requires_grad" when set.
  std::string to_string() const;
  // The type of a tensor (its dtype, device, sizes, strides and requires_grad).
  static ValueType of(const Tensor& t);
};

// A fake tensor (metadata only, no storage) of a value type, for running shape rules over a
// graph; row-major strides when the type leaves the layout open.
Tensor fake_tensor(const ValueType& t);

// Where a graph input comes from.
struct InputSource {
  enum class Kind : uint8_t { argument, captured };
  Kind kind = Kind::argument;
  int index = 0;     // argument position (argument) or capture slot (captured)
  std::string name;  // "x" or a module path such as "layer1.0.conv1.weight"
  // Arguments print as "arg<index>"; captured tensors as their name ("capture<index>" without).
  std::string to_string() const;
};

class Value {
 public:
  // Unique within its graph, in creation order; printed as %<id>.
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
  friend struct detail::GraphSurgery;
  const Graph* graph_ = nullptr;
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
  Attrs& mutable_attrs() { return attrs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(size_t i = 0) const { return outputs_.at(i); }
  // True when the node writes into one of its (defined) inputs, by OpDef::mutates with its
  // attributes: kept by DCE, never merged by CSE. An inference batch_norm has none.
  bool has_side_effects() const;
  // True when the node writes into its input `input`.
  bool mutates_input(int input) const;
  // "%5" (its first output) for messages.
  std::string name() const;

 private:
  friend class Graph;
  friend struct detail::GraphSurgery;
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
  // Appends a node (nodes stay in topological order: inputs must already exist in this graph;
  // the attributes must fit the op's schema, OpDef::attr_schema; throws "[ir.graph] ..."
  // otherwise). One output value per output type.
  Node* add_node(const OpDef& op, std::vector<Value*> inputs, Attrs attrs,
                 std::vector<ValueType> output_types);
  // Every output must be a value of this graph; a value may appear more than once.
  void set_outputs(std::vector<Value*> outputs);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<InputSource>& input_sources() const { return sources_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Nodes in execution (topological) order.
  std::vector<Node*> nodes() const;
  size_t num_nodes() const { return nodes_.size(); }

  // Removes the nodes for which remove(node) is true, with their output values. Their outputs
  // must be unused by kept nodes and by the graph outputs (throws otherwise, changing nothing).
  void remove_nodes_if(const std::function<bool(const Node&)>& remove);
  // Replaces every use of `from` (inputs of nodes and graph outputs) with `to`.
  void replace_all_uses(Value* from, Value* to);

  // One line per input and node, FX style; every value prints as %<id>:
  //   %0 : f32[s0,3,224,224] = input arg0
  //   %1 : f32[64,3,7,7] = input conv1.weight
  //   %2 = conv2d(%0, %1, None, stride=[2,2], padding=[3,3], dilation=[1,1], groups=1) :
  //        f32[s0,64,112,112]        (on one line)
  //   %3, %4 = some_op(%2) : f32[2], f32[2]
  //   return (%2)
  // Undefined optional inputs print as None; attributes as Attrs::to_string.
  std::string to_string() const;
  // Checks SSA form (each value defined once, before its uses, by this graph), no dangling values
  // (node inputs and graph outputs are defined), users lists, input counts, attributes against
  // the op's schema, and that every
  // node's output types are what its shape rule computes on fake tensors of the input types
  // (dtype and sizes, and strides when both sides have them; symbolic sizes compare structurally,
  // never guarding). Throws lathe::Error("[ir.verify] node %7 (conv2d): ...") naming the node.
  // Shape rules run over the graph's symbolic sizes, so the ShapeEnv that made them must be alive;
  // conditions decided while tracing are provable and add no guard.
  void verify() const;
  // Hash of ops (by name), attributes (symbolic sizes by structure), value types, input sources'
  // kinds and indices, and which value feeds each input and output position (never data, never
  // value ids or source names).
  uint64_t structural_hash() const;
  // Full structural comparison of what the hash summarizes: true when both graphs compute the
  // same thing from inputs of the same types (ops, attributes, types, wiring, outputs).
  bool structurally_equal(const Graph& other) const;

 private:
  friend struct detail::GraphSurgery;
  Value* new_value(ValueType type);
  void fix_aliased_layouts(Node& n);  // the Layout rule for the views and writes of n
  int next_id_ = 0;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<InputSource> sources_;
  std::vector<Value*> outputs_;
};

}  // namespace lathe::ir
