// functionalize: one walk over the nodes, copying them into a new graph while tracking, for each
// storage (a base value), its current value in the new graph and a version bumped by every
// write. A view is re-derived from its parent when its base was written since it was made; a
// write through a view scatters the new value into the base's current value.
#include "lathe/ir/functionalize.h"

#include <algorithm>
#include <optional>

#include "lathe/ir/structural.h"

namespace lathe::ir {
namespace {

bool same_value_type(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && a.device == b.device && same_shape(a.sizes, b.sizes) &&
         same_shape(a.strides, b.strides);
}

bool is_concrete(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const SymInt& v) { return !v.is_symbolic(); });
}

class Functionalizer {
 public:
  Functionalizer(const Graph& g, WriteBack mode) : g_(g), mode_(mode) {}

  FunctionalGraph run() {
    out_.graph = std::make_unique<Graph>();
    for (size_t i = 0; i < g_.inputs().size(); ++i) {
      const Value* v = g_.inputs()[i];
      Value* nv = out_.graph->add_input(v->type(), g_.input_sources()[i]);
      new_inputs_[v] = nv;
      make_base(v, nv);
    }
    for (const Node* n : g_.nodes()) {
      if (n->has_side_effects())
        rewrite_write(*n);
      else
        copy_node(*n);
    }
    std::vector<const Value*> written;
    for (const Value* v : g_.inputs())
      if (state_.at(v).version > 0) written.push_back(v);
    out_.written_inputs = static_cast<int>(written.size());
    if (mode_ == WriteBack::copy_nodes) {
      // The write-backs first, so that outputs aliasing an input are derived from the written
      // input (and still alias it).
      static const OpDef& copy_op = OpRegistry::global().get("copy_");
      for (const Value* b : written) {
        Value* in = new_inputs_.at(b);
        Node* c = add(copy_op, {in, state_.at(b).current}, Attrs{});
        Storage& s = state_.at(b);
        s.current = c->output();
        ++s.version;
      }
    }
    std::vector<Value*> outputs;
    for (const Value* v : g_.outputs()) outputs.push_back(read_output(v));
    if (mode_ == WriteBack::outputs) {
      for (const Value* b : written) {
        int pos = static_cast<int>(std::find(g_.inputs().begin(), g_.inputs().end(), b) -
                                   g_.inputs().begin());
        out_.updates.push_back({pos, static_cast<int>(outputs.size())});
        outputs.push_back(state_.at(b).current);
      }
    }
    out_.graph->set_outputs(std::move(outputs));
    return std::move(out_);
  }

 private:
  // A storage: its current value in the new graph and how many writes it has seen.
  struct Storage {
    Value* current = nullptr;
    int version = 0;
  };
  // A view of a storage: its parent (the value it was taken from) and its value in the new
  // graph as of `version` of its base.
  struct View {
    const Value* base = nullptr;
    const Value* parent = nullptr;
    Value* current = nullptr;
    int version = 0;
    bool written = false;  // `current` is the value written through the view, not a view
  };

  void make_base(const Value* v, Value* nv) {
    state_[v] = Storage{nv, 0};
    base_[v] = v;
  }

  // In-place results are their input: follow them to the value that was written.
  const Value* canonical(const Value* v) const {
    for (auto it = same_.find(v); it != same_.end(); it = same_.find(v)) v = it->second;
    return v;
  }

  // The new graph's value holding old value v's contents at this point of the program.
  Value* read(const Value* v) {
    if (v == nullptr) return nullptr;
    v = canonical(v);
    const Value* b = base_.at(v);
    if (b == v) return state_.at(v).current;
    View& view = views_.at(v);
    const int version = state_.at(b).version;
    if (view.version != version) {
      // Its base was written since: take the view again from the current parent.
      Value* parent = read(view.parent);
      const Node* n = v->producer();
      view.current = add(n->op(), {parent}, n->attrs())->output(v->output_index());
      view.version = version;
      view.written = false;
    }
    return view.current;
  }

  // A graph output: as read(), but a view that was written through is taken again from its
  // parent, so that it is a view of its base's new value with the layout eager gives it (in
  // eager, relu_(x.slice(...)) returns the slice of x, not a fresh tensor).
  Value* read_output(const Value* v) {
    if (v == nullptr) return nullptr;
    v = canonical(v);
    if (base_.at(v) == v || !views_.at(v).written) return read(v);
    View& view = views_.at(v);
    Value* parent = read_output(view.parent);
    const Node* n = v->producer();
    view.current = add(n->op(), {parent}, n->attrs())->output(v->output_index());
    view.written = false;
    return view.current;
  }

  // Appends op(inputs, attrs) to the new graph, its output types from the shape rule.
  Node* add(const OpDef& op, std::vector<Value*> inputs, const Attrs& attrs) {
    std::vector<Tensor> fakes;
    for (const Value* v : inputs) fakes.push_back(v ? fake_tensor(v->type()) : Tensor());
    std::vector<ValueType> types;
    for (const TensorMeta& m : op.shape(fakes, attrs)) {
      const bool strided = m.is_view || m.strides.size() == m.sizes.size();
      types.push_back({m.dtype, m.device, m.sizes, strided ? m.strides : Shape{}});
    }
    return out_.graph->add_node(op, std::move(inputs), attrs, std::move(types));
  }

  // Copies a node that writes nothing; views are recorded against their base.
  void copy_node(const Node& n) {
    std::vector<Value*> inputs;
    bool same_types = true;
    for (const Value* v : n.inputs()) {
      Value* nv = read(v);
      inputs.push_back(nv);
      if (v && !same_value_type(v->type(), nv->type())) same_types = false;
    }
    Node* copy;
    if (same_types) {
      std::vector<ValueType> types;
      for (const Value* v : n.outputs()) types.push_back(v->type());
      copy = out_.graph->add_node(n.op(), std::move(inputs), n.attrs(), std::move(types));
    } else {
      copy = add(n.op(), std::move(inputs), n.attrs());
    }
    std::vector<TensorMeta> metas;  // the old node's output metas, when some output may alias
    for (size_t j = 0; j < n.outputs().size(); ++j) {
      const Value* o = n.output(j);
      const int aliased = n.op().aliased_input(static_cast<int>(j));
      const Value* parent = aliased >= 0 ? n.inputs()[aliased] : nullptr;
      if (parent != nullptr && !is_view_output(n, j, metas)) parent = nullptr;
      if (parent == nullptr) {
        make_base(o, copy->output(j));
        continue;
      }
      parent = canonical(parent);
      const Value* b = base_.at(parent);
      base_[o] = b;
      views_[o] = View{b, parent, copy->output(j), state_.at(b).version};
    }
  }

  // Whether output j of old node n, declared as aliasing an input, is a view when the program
  // runs as traced: reshape copies when its input's strides allow no view, and then writing
  // into its result leaves the input alone (and writing the input leaves the result alone), as
  // in eager. Decided by the op's shape rule over the old graph's types (the trace-time
  // layouts, which the guards pin for arguments).
  static bool is_view_output(const Node& n, size_t j, std::vector<TensorMeta>& metas) {
    if (metas.empty()) {
      std::vector<Tensor> fakes;
      for (const Value* v : n.inputs()) fakes.push_back(v ? fake_tensor(v->type()) : Tensor());
      metas = n.op().shape(fakes, n.attrs());
    }
    return j < metas.size() && metas[j].is_view;
  }

  // A node that writes: its functional variant, then the writes.
  void rewrite_write(const Node& n) {
    const OpDef& op = n.op();
    LATHE_CHECK(op.functional_variant != nullptr, "[functionalize] node ", n.name(), " (", op.name,
                ") writes into an input and its op has no functional variant");
    const OpDef& fop = OpRegistry::global().get(op.functional_variant);
    std::vector<Value*> inputs;
    for (const Value* v : n.inputs()) inputs.push_back(read(v));
    Node* f = add(fop, std::move(inputs), n.attrs());
    size_t k = 0;
    for (size_t j = 0; j < n.outputs().size(); ++j) {
      const Value* o = n.output(j);
      const int aliased = op.aliased_input(static_cast<int>(j));
      if (aliased >= 0) {
        same_[o] = canonical(n.inputs()[aliased]);  // the written input itself
        continue;
      }
      LATHE_CHECK(k < f->outputs().size(), "[functionalize] ", fop.name, " gives too few outputs");
      make_base(o, f->output(k++));
    }
    for (int i : op.mutated_inputs) {
      if (!n.mutates_input(i)) continue;
      LATHE_CHECK(k < f->outputs().size(), "[functionalize] ", fop.name, " gives too few outputs");
      write(n, n.inputs()[i], f->output(k++));
    }
    ++out_.rewritten;
  }

  // Old value m (or the storage under it) now holds new value nv.
  void write(const Node& n, const Value* m, Value* nv) {
    m = canonical(m);
    const Value* b = base_.at(m);
    Storage& s = state_.at(b);
    if (b == m) {
      s.current = nv;
      ++s.version;
      return;
    }
    // The view's window in the base's row-major layout: its view ops replayed on a fake
    // row-major base.
    std::vector<const Value*> chain;
    for (const Value* v = m; v != b; v = views_.at(v).parent) chain.push_back(v);
    std::reverse(chain.begin(), chain.end());
    const ValueType& bt = b->type();
    LATHE_CHECK(is_concrete(bt.sizes), "[functionalize] node ", n.name(), " (", n.op().name,
                ") writes through a view of a value with symbolic sizes ", bt.to_string(),
                ", which has no fixed scatter window");
    ValueType row_major{bt.dtype, bt.device, bt.sizes, contiguous_strides(bt.sizes)};
    Tensor x = fake_tensor(row_major);
    for (const Value* v : chain) {
      const Node* p = v->producer();
      std::vector<TensorMeta> metas;
      try {
        metas = p->op().shape({&x, 1}, p->attrs());
      } catch (const Error& e) {
        throw Error(lathe::detail::str("[functionalize] node ", n.name(), " (", n.op().name,
                                       ") writes through view ", p->name(), " (", p->op().name,
                                       "), which does not apply to a row-major base: ", e.what()));
      }
      const TensorMeta& m = metas.at(v->output_index());
      x = make_fake_view(m);
    }
    LATHE_CHECK(is_concrete(x.sizes()) && is_concrete(x.strides()), "[functionalize] node ",
                n.name(), " (", n.op().name, ") writes through a view with symbolic window ",
                x.sizes(), " strides ", x.strides());
    static const OpDef& scatter = OpRegistry::global().get("as_strided_scatter");
    Attrs attrs{{"size", x.sizes()}, {"stride", x.strides()}, {"offset", x.storage_offset()}};
    s.current = add(scatter, {s.current, nv}, attrs)->output();
    ++s.version;
    View& view = views_.at(m);
    view.current = nv;
    view.version = s.version;
    view.written = true;
    ++out_.scatters;
  }

  static Tensor make_fake_view(const TensorMeta& m) {
    auto impl = std::make_shared<TensorImpl>();
    impl->sizes = m.sizes;
    impl->strides = m.strides;
    impl->offset = m.offset;
    impl->dtype = m.dtype;
    impl->device = m.device;
    return Tensor(std::move(impl));
  }

  const Graph& g_;
  WriteBack mode_;
  FunctionalGraph out_;
  std::unordered_map<const Value*, Value*> new_inputs_;
  std::unordered_map<const Value*, const Value*> base_;  // every old value -> its base
  std::unordered_map<const Value*, const Value*> same_;  // in-place result -> written input
  std::unordered_map<const Value*, Storage> state_;      // base -> storage state
  std::unordered_map<const Value*, View> views_;         // view -> view state
};

}  // namespace

// ---- AliasAnalysis ----

AliasAnalysis::AliasAnalysis(const Graph& g) {
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    base_[g.inputs()[i]] = g.inputs()[i];
    input_position_[g.inputs()[i]] = static_cast<int>(i);
  }
  std::vector<bool> written(g.inputs().size(), false);
  for (const Node* n : g.nodes()) {
    for (size_t j = 0; j < n->outputs().size(); ++j) {
      const int a = n->op().aliased_input(static_cast<int>(j));
      const Value* in =
          a >= 0 && a < static_cast<int>(n->inputs().size()) ? n->inputs()[a] : nullptr;
      base_[n->output(j)] = in ? base_of(in) : n->output(j);
    }
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      if (!n->mutates_input(static_cast<int>(i))) continue;
      if (int p = aliased_input(n->inputs()[i]); p >= 0) written[p] = true;
    }
  }
  for (size_t i = 0; i < written.size(); ++i)
    if (written[i]) mutated_inputs_.push_back(static_cast<int>(i));
}

const Value* AliasAnalysis::base_of(const Value* v) const {
  auto it = base_.find(v);
  LATHE_CHECK(it != base_.end(), "[functionalize] value %", v ? v->id() : -1,
              " is not a value of the analyzed graph");
  return it->second;
}

int AliasAnalysis::aliased_input(const Value* v) const {
  auto it = input_position_.find(base_of(v));
  return it == input_position_.end() ? -1 : it->second;
}

bool AliasAnalysis::may_alias(const Value* a, const Value* b) const {
  return base_of(a) == base_of(b);
}

// ---- functionalize ----

std::string FunctionalGraph::summary() const {
  return lathe::detail::str(rewritten, " writes made functional (", scatters, " through a view), ",
                            written_inputs, " inputs written back");
}

FunctionalGraph functionalize(const Graph& g, WriteBack mode) {
  return Functionalizer(g, mode).run();
}

}  // namespace lathe::ir
