#include "lathe/ir/graph.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "lathe/ir/structural.h"

namespace lathe::ir {
namespace {

bool is_row_major(const Shape& sizes, const Shape& strides) {
  return same_shape(strides, contiguous_strides(sizes));
}

// Same memory layout for these sizes: a dim of size 1 is never stepped over, so its stride
// says nothing (channels-last [2,512,1,1] is {512,1,512,512} or {512,1,1,1} depending on who
// computed it).
bool same_layout(const Shape& sizes, const Shape& a, const Shape& b) {
  if (a.size() != b.size() || a.size() != sizes.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (sizes[i].maybe_int() == 1) continue;
    if (!same_sym(a[i], b[i])) return false;
  }
  return true;
}

bool same_type(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && a.device == b.device && same_shape(a.sizes, b.sizes) &&
         same_shape(a.strides, b.strides) && a.requires_grad == b.requires_grad;
}

void hash_type(StructuralHasher& h, const ValueType& t) {
  h.add(static_cast<uint64_t>(t.dtype));
  h.add(static_cast<uint64_t>(t.device.kind()));
  h.add(t.sizes);
  h.add(t.strides);
  h.add(static_cast<uint64_t>(t.requires_grad));
}

std::string value_name(const Value* v) {
  return v ? lathe::detail::str('%', v->id()) : std::string("None");
}

// Values numbered in definition order (inputs, then node outputs): what identifies a value
// structurally, independent of ids.
std::unordered_map<const Value*, uint64_t> canonical_numbers(const Graph& g) {
  std::unordered_map<const Value*, uint64_t> n;
  uint64_t next = 0;
  for (const Value* v : g.inputs()) n.emplace(v, next++);
  for (const Node* node : g.nodes())
    for (const Value* v : node->outputs()) n.emplace(v, next++);
  return n;
}

uint64_t ref_of(const std::unordered_map<const Value*, uint64_t>& n, const Value* v) {
  if (v == nullptr) return ~uint64_t{0};
  auto it = n.find(v);
  return it == n.end() ? ~uint64_t{1} : it->second;
}

}  // namespace

Tensor fake_tensor(const ValueType& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = t.sizes;
  impl->strides = t.strides.empty() ? contiguous_strides(t.sizes) : t.strides;
  impl->dtype = t.dtype;
  impl->device = t.device;
  return Tensor(std::move(impl));
}

// ---- ValueType, InputSource ----

std::string ValueType::to_string() const {
  std::ostringstream os;
  os << dtype_name(dtype) << lathe::detail::str(sizes);
  if (!strides.empty() && !is_row_major(sizes, strides)) {
    os << '{';
    for (size_t i = 0; i < strides.size(); ++i) os << (i ? "," : "") << strides[i];
    os << '}';
  }
  if (!device.is_cpu()) os << '@' << device;
  if (requires_grad) os << " requires_grad";
  return os.str();
}

ValueType ValueType::of(const Tensor& t) {
  return ValueType{t.dtype(), t.device(), t.sizes(), t.strides(), t.requires_grad()};
}

std::string InputSource::to_string() const {
  if (kind == Kind::argument) return lathe::detail::str("arg", index);
  return name.empty() ? lathe::detail::str("capture", index) : name;
}

bool Node::mutates_input(int input) const {
  return input >= 0 && input < static_cast<int>(inputs_.size()) && inputs_[input] != nullptr &&
         op_->mutates(attrs_, input);
}

bool Node::has_side_effects() const {
  if (!op_->mutates_any(attrs_)) return false;
  for (int i : op_->mutated_inputs)
    if (mutates_input(i)) return true;
  return false;
}

std::string Node::name() const {
  return outputs_.empty() ? std::string("<node without outputs>") : value_name(outputs_[0]);
}

// ---- building ----

Value* Graph::new_value(ValueType type) {
  auto v = std::make_unique<Value>();
  v->graph_ = this;
  v->id_ = next_id_++;
  v->type_ = std::move(type);
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::add_input(ValueType type, InputSource source) {
  Value* v = new_value(std::move(type));
  v->type_.layout = Layout::fixed;  // the caller's tensor
  inputs_.push_back(v);
  sources_.push_back(std::move(source));
  return v;
}

Node* Graph::add_node(const OpDef& op, std::vector<Value*> inputs, Attrs attrs,
                      std::vector<ValueType> output_types) {
  LATHE_CHECK(op.num_inputs < 0 || static_cast<int>(inputs.size()) == op.num_inputs,
              "[ir.graph] add_node(", op.name, "): the op takes ", op.num_inputs, " inputs, got ",
              inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    LATHE_CHECK(inputs[i] == nullptr || inputs[i]->graph_ == this, "[ir.graph] add_node(", op.name,
                "): input ", i, " (", value_name(inputs[i]), ") is not a value of this graph");
  }
  if (std::string err = op.attr_error(attrs); !err.empty())
    throw Error(lathe::detail::str("[ir.graph] ", op.name, ": ", err));
  auto node = std::make_unique<Node>();
  node->op_ = &op;
  node->inputs_ = std::move(inputs);
  node->attrs_ = std::move(attrs);
  attach_parsed_attrs(op, node->attrs_);  // node attributes never change: parse them once
  Node* n = node.get();
  for (Value* v : n->inputs_)
    if (v) v->users_.push_back(n);
  for (size_t i = 0; i < output_types.size(); ++i) {
    Value* v = new_value(std::move(output_types[i]));
    v->type_.layout = Layout::flexible;  // decided by the graph's structure, not copied
    v->producer_ = n;
    v->output_index_ = static_cast<int>(i);
    n->outputs_.push_back(v);
  }
  fix_aliased_layouts(*n);
  nodes_.push_back(std::move(node));
  return n;
}

void Graph::set_outputs(std::vector<Value*> outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    LATHE_CHECK(outputs[i] != nullptr && outputs[i]->graph_ == this, "[ir.graph] output ", i, " (",
                value_name(outputs[i]), ") is not a value of this graph");
  }
  outputs_ = std::move(outputs);
  for (Value* v : outputs_) v->type_.layout = Layout::fixed;  // the caller sees them
}

// A view and the value it views share one buffer: both layouts are observable through each
// other. An input written in place keeps the buffer it has.
void Graph::fix_aliased_layouts(Node& n) {
  for (size_t j = 0; j < n.outputs_.size(); ++j) {
    const int a = n.op_->aliased_input(static_cast<int>(j));
    if (a < 0 || a >= static_cast<int>(n.inputs_.size()) || !n.inputs_[a]) continue;
    n.outputs_[j]->type_.layout = Layout::fixed;
    n.inputs_[a]->type_.layout = Layout::fixed;
  }
  for (int i : n.op_->mutated_inputs)
    if (i < static_cast<int>(n.inputs_.size()) && n.inputs_[i] && n.mutates_input(i))
      n.inputs_[i]->type_.layout = Layout::fixed;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> r;
  r.reserve(nodes_.size());
  for (const auto& n : nodes_) r.push_back(n.get());
  return r;
}

// ---- editing ----

void Graph::remove_nodes_if(const std::function<bool(const Node&)>& remove) {
  std::unordered_set<const Node*> gone;
  for (const auto& n : nodes_)
    if (remove(*n)) gone.insert(n.get());
  if (gone.empty()) return;
  std::unordered_set<const Value*> dead_values;
  for (const auto& n : nodes_) {
    if (!gone.count(n.get())) continue;
    for (const Value* v : n->outputs_) {
      for (const Node* u : v->users_) {
        LATHE_CHECK(gone.count(u), "[ir.graph] cannot remove node ", n->name(), " (", n->op().name,
                    "): its output ", value_name(v), " is used by node ", u->name(), " (",
                    u->op().name, ")");
      }
      LATHE_CHECK(std::find(outputs_.begin(), outputs_.end(), v) == outputs_.end(),
                  "[ir.graph] cannot remove node ", n->name(), " (", n->op().name, "): its output ",
                  value_name(v), " is a graph output");
      dead_values.insert(v);
    }
  }
  for (const auto& n : nodes_) {
    if (!gone.count(n.get())) continue;
    for (Value* v : n->inputs_) {
      if (v == nullptr || dead_values.count(v)) continue;
      auto it = std::find(v->users_.begin(), v->users_.end(), n.get());
      if (it != v->users_.end()) v->users_.erase(it);
    }
  }
  std::erase_if(values_, [&](const auto& v) { return dead_values.count(v.get()) != 0; });
  std::erase_if(nodes_, [&](const auto& n) { return gone.count(n.get()) != 0; });
}

void Graph::replace_all_uses(Value* from, Value* to) {
  LATHE_CHECK(from && from->graph_ == this && to && to->graph_ == this,
              "[ir.graph] replace_all_uses: both values must belong to this graph (",
              value_name(from), " -> ", value_name(to), ")");
  if (from == to) return;
  std::vector<Node*> users = std::move(from->users_);
  from->users_.clear();
  std::unordered_set<Node*> done;
  for (Node* u : users) {
    if (!done.insert(u).second) continue;
    for (Value*& in : u->inputs_) {
      if (in == from) {
        in = to;
        to->users_.push_back(u);
      }
    }
  }
  for (Value*& out : outputs_)
    if (out == from) {
      out = to;
      to->type_.layout = Layout::fixed;
    }
  for (Node* u : done) fix_aliased_layouts(*u);  // `to` is viewed or written where `from` was
}

// ---- printing ----

std::string Graph::to_string() const {
  std::ostringstream os;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    os << value_name(inputs_[i]) << " : " << inputs_[i]->type().to_string() << " = input "
       << sources_[i].to_string() << '\n';
  }
  for (const auto& n : nodes_) {
    for (size_t i = 0; i < n->outputs_.size(); ++i)
      os << (i ? ", " : "") << value_name(n->outputs_[i]);
    os << " = " << n->op().name << '(';
    for (size_t i = 0; i < n->inputs_.size(); ++i)
      os << (i ? ", " : "") << value_name(n->inputs_[i]);
    if (!n->attrs_.items().empty()) os << (n->inputs_.empty() ? "" : ", ") << n->attrs_.to_string();
    os << ") : ";
    for (size_t i = 0; i < n->outputs_.size(); ++i)
      os << (i ? ", " : "") << n->outputs_[i]->type().to_string();
    os << '\n';
  }
  os << "return (";
  for (size_t i = 0; i < outputs_.size(); ++i) os << (i ? ", " : "") << value_name(outputs_[i]);
  os << ")\n";
  return os.str();
}

// ---- verification ----

void Graph::verify() const {
  std::unordered_set<const Value*> owned;
  for (const auto& v : values_) owned.insert(v.get());
  std::unordered_set<const Value*> defined;
  LATHE_CHECK(inputs_.size() == sources_.size(), "[ir.verify] ", inputs_.size(),
              " graph inputs but ", sources_.size(), " input sources");
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Value* v = inputs_[i];
    LATHE_CHECK(v && owned.count(v), "[ir.verify] graph input ", i,
                " is not a value of this graph");
    LATHE_CHECK(v->producer_ == nullptr, "[ir.verify] graph input ", i, " (", value_name(v),
                ") is also produced by node ", v->producer_->name());
    LATHE_CHECK(defined.insert(v).second, "[ir.verify] value ", value_name(v),
                " is defined twice (graph input ", i, ")");
  }
  std::unordered_map<const Value*, std::vector<const Node*>> uses;
  for (const auto& node : nodes_) {
    const Node& n = *node;
    auto where = [&] {
      return lathe::detail::str("[ir.verify] node ", n.name(), " (", n.op().name, "): ");
    };
    LATHE_CHECK(n.op().num_inputs < 0 || static_cast<int>(n.inputs_.size()) == n.op().num_inputs,
                where(), "the op takes ", n.op().num_inputs, " inputs, got ", n.inputs_.size());
    if (std::string err = n.op().attr_error(n.attrs_); !err.empty()) throw Error(where() + err);
    for (size_t i = 0; i < n.inputs_.size(); ++i) {
      const Value* v = n.inputs_[i];
      if (v == nullptr) continue;
      LATHE_CHECK(owned.count(v), where(), "input ", i, " is not a value of this graph");
      LATHE_CHECK(defined.count(v), where(), "input ", i, " (", value_name(v),
                  ") is not defined before the node (dangling or used before its definition)");
      uses[v].push_back(&n);
    }
    for (size_t i = 0; i < n.outputs_.size(); ++i) {
      const Value* v = n.outputs_[i];
      LATHE_CHECK(v && owned.count(v), where(), "output ", i, " is not a value of this graph");
      LATHE_CHECK(v->producer_ == &n && v->output_index_ == static_cast<int>(i), where(), "output ",
                  i, " (", value_name(v), ") names another producer");
      LATHE_CHECK(defined.insert(v).second, where(), "value ", value_name(v), " is defined twice");
    }
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Value* v = outputs_[i];
    LATHE_CHECK(v && owned.count(v), "[ir.verify] graph output ", i,
                " is not a value of this graph");
    LATHE_CHECK(defined.count(v), "[ir.verify] graph output ", i, " (", value_name(v),
                ") is never defined");
  }
  for (const auto& v : values_) {
    const ValueType& t = v->type();
    LATHE_CHECK(t.strides.empty() || t.strides.size() == t.sizes.size(), "[ir.verify] value ",
                value_name(v.get()), " has ", t.sizes.size(), " sizes but ", t.strides.size(),
                " strides");
    std::vector<const Node*> expected = uses[v.get()];
    std::vector<const Node*> actual(v->users_.begin(), v->users_.end());
    std::sort(expected.begin(), expected.end());
    std::sort(actual.begin(), actual.end());
    LATHE_CHECK(expected == actual, "[ir.verify] value ", value_name(v.get()), " lists ",
                actual.size(), " users but has ", expected.size(), " uses");
  }
  // Types: every node's outputs are what its shape rule computes.
  for (const auto& node : nodes_) {
    const Node& n = *node;
    auto where = [&] {
      return lathe::detail::str("[ir.verify] node ", n.name(), " (", n.op().name, "): ");
    };
    std::vector<Tensor> fakes;
    fakes.reserve(n.inputs_.size());
    for (const Value* v : n.inputs_) fakes.push_back(v ? fake_tensor(v->type()) : Tensor());
    std::vector<TensorMeta> metas;
    try {
      metas = n.op().shape(fakes, n.attrs_);
    } catch (const Error& e) {
      throw Error(where() + "the shape rule rejects the inputs: " + e.what());
    }
    LATHE_CHECK(metas.size() == n.outputs_.size(), where(), "the shape rule gives ", metas.size(),
                " outputs, the node has ", n.outputs_.size());
    for (size_t i = 0; i < metas.size(); ++i) {
      const ValueType& t = n.outputs_[i]->type();
      ValueType expected{metas[i].dtype, metas[i].device, metas[i].sizes,
                         t.strides.empty() ? Shape{} : metas[i].strides};
      bool ok = t.dtype == expected.dtype && t.device == expected.device &&
                same_shape(t.sizes, expected.sizes) &&
                (t.strides.empty() || metas[i].strides.empty() ||
                 same_layout(t.sizes, t.strides, metas[i].strides));
      LATHE_CHECK(ok, where(), "output ", i, " (", value_name(n.outputs_[i]), ") has type ",
                  t.to_string(), " but the shape rule gives ", expected.to_string());
    }
  }
}

// ---- structural hash and equality ----

uint64_t Graph::structural_hash() const {
  auto num = canonical_numbers(*this);
  StructuralHasher h;
  h.add(static_cast<uint64_t>(inputs_.size()));
  for (size_t i = 0; i < inputs_.size(); ++i) {
    hash_type(h, inputs_[i]->type());
    h.add(static_cast<uint64_t>(sources_[i].kind));
    h.add(static_cast<uint64_t>(sources_[i].index));
  }
  h.add(static_cast<uint64_t>(nodes_.size()));
  for (const auto& n : nodes_) {
    h.add(std::string_view(n->op().name));
    h.add(static_cast<uint64_t>(n->inputs_.size()));
    for (const Value* v : n->inputs_) h.add(ref_of(num, v));
    h.add(n->attrs_);
    h.add(static_cast<uint64_t>(n->outputs_.size()));
    for (const Value* v : n->outputs_) hash_type(h, v->type());
  }
  h.add(static_cast<uint64_t>(outputs_.size()));
  for (const Value* v : outputs_) h.add(ref_of(num, v));
  return h.get();
}

bool Graph::structurally_equal(const Graph& other) const {
  if (this == &other) return true;
  if (inputs_.size() != other.inputs_.size() || nodes_.size() != other.nodes_.size() ||
      outputs_.size() != other.outputs_.size())
    return false;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!same_type(inputs_[i]->type(), other.inputs_[i]->type()) ||
        sources_[i].kind != other.sources_[i].kind || sources_[i].index != other.sources_[i].index)
      return false;
  }
  auto na = canonical_numbers(*this);
  auto nb = canonical_numbers(other);
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const Node& a = *nodes_[k];
    const Node& b = *other.nodes_[k];
    if (&a.op() != &b.op() && a.op().name != b.op().name) return false;
    if (a.inputs_.size() != b.inputs_.size() || a.outputs_.size() != b.outputs_.size())
      return false;
    for (size_t i = 0; i < a.inputs_.size(); ++i)
      if (ref_of(na, a.inputs_[i]) != ref_of(nb, b.inputs_[i])) return false;
    if (!same_attrs(a.attrs_, b.attrs_)) return false;
    for (size_t i = 0; i < a.outputs_.size(); ++i)
      if (!same_type(a.outputs_[i]->type(), b.outputs_[i]->type())) return false;
  }
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (ref_of(na, outputs_[i]) != ref_of(nb, other.outputs_[i])) return false;
  return true;
}

}  // namespace lathe::ir
