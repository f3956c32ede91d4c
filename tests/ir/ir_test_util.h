// Helpers for building graphs by hand in tests.
#pragma once

#include <string>
#include <vector>

#include "lathe/ir/graph.h"

namespace lathe::ir {

// Test-only surgery on graph internals, to build the malformed graphs the verifier must reject.
struct detail::GraphSurgery {
  static std::vector<Value*>& inputs(Graph& g) { return g.inputs_; }
  static std::vector<Value*>& outputs(Graph& g) { return g.outputs_; }
  static std::vector<InputSource>& sources(Graph& g) { return g.sources_; }
  static std::vector<Value*>& node_inputs(Node& n) { return n.inputs_; }
  static std::vector<Value*>& node_outputs(Node& n) { return n.outputs_; }
  static std::vector<Node*>& users(Value& v) { return v.users_; }
  static void set_producer(Value& v, Node* n, int index) {
    v.producer_ = n;
    v.output_index_ = index;
  }
  static Attrs& attrs(Node& n) { return n.attrs_; }
  // Moves the last node to position `pos` (breaking topological order when it has inputs).
  static void move_last_node(Graph& g, size_t pos) {
    auto n = std::move(g.nodes_.back());
    g.nodes_.pop_back();
    g.nodes_.insert(g.nodes_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(n));
  }
};

}  // namespace lathe::ir

namespace lathe::ir::testing {

inline const OpDef& op(const char* name) { return OpRegistry::global().get(name); }

// A two-output test op: the first and second half (along dim 0) of its input, as fresh tensors.
inline const OpDef& split2_op() {
  static const OpDef& def = OpRegistry::global().add(OpDef{
      "test.split2",
      1,
      [](TensorList in, const Attrs&) {
        const Tensor& x = in[0];
        LATHE_CHECK(x.dim() >= 1 && x.size(0).expect_int() % 2 == 0,
                    "[test.split2] needs an even dim 0, got ", x.shape_string());
        TensorMeta m;
        m.sizes = x.sizes();
        m.sizes[0] = floor_div(x.size(0), 2);
        m.dtype = x.dtype();
        m.device = x.device();
        return std::vector<TensorMeta>{m, m};
      },
      [](TensorList in, const Attrs&, const std::vector<TensorMeta>& m) {
        int64_t h = m[0].sizes[0].expect_int();
        return std::vector<Tensor>{in[0].narrow(0, 0, h).clone(), in[0].narrow(0, h, h).clone()};
      },
      {},
      {}});
  return def;
}

inline ValueType T(Shape sizes, DType dtype = DType::f32) {
  ValueType t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  return t;
}

inline InputSource arg(int i, std::string name = {}) {
  return InputSource{InputSource::Kind::argument, i, std::move(name)};
}
inline InputSource cap(int slot, std::string name) {
  return InputSource{InputSource::Kind::captured, slot, std::move(name)};
}

}  // namespace lathe::ir::testing
