// GraphRecorder: the one recording rule of compile ("trace once", lathe/trace's Tracer) and lazy
// ("trace every time", lathe/lazy's device). What an op call does to its tensors is decided here,
// once, from the op's facts: which value each input stands for (the value map, lifting tensors
// from outside), the output types (strides by eager's layout rule), which outputs alias input 0,
// and which inputs the call writes (they stand for their written value from then on; an in-place
// op returns its input itself). A mode supplies only how values and nodes are stored: the tracer
// builds an ir::Graph and adds size symbols; lazy keeps weakly held nodes and hashes each one as
// it is recorded, so a lazy cache hit builds no graph.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "lathe/ops/op_def.h"
#include "lathe/ops/shape_util.h"

namespace lathe::ir {

// Value: a handle that converts to bool (null: no value), such as ir::Value* or a shared_ptr.
// Node: the handle add_node returns.
template <class Value, class Node>
class GraphRecorder {
 public:
  virtual ~GraphRecorder() = default;

  // Records one op call (metas from its shape rule) and returns the tensors standing for its
  // results: new tensors without data, or for an in-place op its input itself.
  std::vector<Tensor> record(const OpDef& op, TensorList inputs, const Attrs& attrs,
                             std::vector<TensorMeta>&& metas) {
    // The input values, on the stack for the usual few (add_node moves them into its node).
    constexpr size_t kStackInputs = 8;
    Value stack_ins[kStackInputs]{};
    std::vector<Value> heap_ins;
    if (inputs.size() > kStackInputs) heap_ins.resize(inputs.size());
    std::span<Value> ins(inputs.size() > kStackInputs ? heap_ins.data() : stack_ins, inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined()) ins[i] = value_of(inputs[i]);
    // Views and rules that fix the layout (clone, dnnl ops) give strides; the rest get eager's
    // layout rule, so every mode shows the layout eager would make.
    for (TensorMeta& m : metas) {
      if (m.is_view) continue;
      if (m.strides.size() != m.sizes.size()) m.strides = output_strides(m.sizes, inputs);
      m.offset = 0;
    }
    const bool returns_input0 =
        !metas.empty() && metas[0].is_view && !inputs.empty() && op.mutates(attrs, 0);
    Node node = add_node(op, ins, attrs, metas);
    std::vector<Tensor> out;
    out.reserve(metas.size());
    for (size_t i = 0; i < metas.size(); ++i) {
      const int index = static_cast<int>(i);
      if (metas[i].is_view && !inputs.empty() && inputs[0].defined())
        note_view(node, index, input_value(node, 0));
      if (i == 0 && returns_input0) continue;  // the written input 0 itself, rebound below
      Tensor t = make_tensor(std::move(metas[i]));
      bind(t, output_value(node, index));
      out.push_back(std::move(t));
    }
    for (int i : op.mutated_inputs) {
      if (i >= static_cast<int>(inputs.size()) || !inputs[i].defined() || !op.mutates(attrs, i))
        continue;
      rebind_written(inputs[i], node, i, input_value(node, i), i == 0 && returns_input0 ? 0 : -1);
    }
    if (returns_input0) out.insert(out.begin(), inputs[0]);
    return out;
  }

  // The value tensor t stands for: its entry in the value map, else t lifted into the graph.
  Value value_of(const Tensor& t) {
    if (Value v = find(t)) return v;
    return lift(t);
  }

 protected:
  // The value map: the value t stands for, or null.
  virtual Value find(const Tensor& t) const = 0;
  // Makes t stand for v from now on.
  virtual void bind(const Tensor& t, Value v) = 0;
  // A tensor the map does not know (a captured constant, device data): its new graph input.
  virtual Value lift(const Tensor& t) = 0;
  // Adds the node (it may move the values out of `inputs`: one per op input, null for an
  // undefined optional tensor); `outputs` are final (strides set for every output).
  virtual Node add_node(const OpDef& op, std::span<Value> inputs, const Attrs& attrs,
                        const std::vector<TensorMeta>& outputs) = 0;
  virtual const Value& input_value(const Node& node, int input) const = 0;
  virtual Value output_value(const Node& node, int output) = 0;
  // A tensor without data of this type (a fake, a pending lazy tensor), which may take the
  // meta's sizes and strides (add_node has seen them); bound by the caller.
  virtual Tensor make_tensor(TensorMeta&& meta) = 0;
  // Output `output` of `node` is a view of `base` (input 0's value before the call).
  virtual void note_view(const Node&, int /*output*/, const Value& /*base*/) {}
  // `node` wrote into input `input` (t, which stood for `before`): t must stand for the written
  // value from now on. `returned_as`: the output that is t itself (in-place ops), or -1.
  virtual void rebind_written(const Tensor& t, const Node& node, int input, const Value& before,
                              int returned_as) = 0;
};

}  // namespace lathe::ir
