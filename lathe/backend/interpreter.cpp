// The interpreter: a flat list of steps over value slots. compile() numbers the graph's values
// into slots and computes liveness once; run() keeps its slots on its own stack, so concurrent
// runs share nothing mutable.
#include "lathe/backend/interpreter.h"

#include <unordered_map>

#include "lathe/backend/symbolic_attrs.h"

namespace lathe::backend {
namespace {

struct Step {
  const OpDef* op;
  Attrs attrs;
  std::vector<SymbolicAttr> symbolic;  // empty for most nodes: attrs are used as they are
  std::vector<int> inputs;             // slot per input, -1 for an undefined optional tensor
  std::vector<int> outputs;            // slot per output
  std::vector<int> release;            // slots whose last use is this step
  std::string name;                    // "%5 (conv2d)" for errors
};

struct InputCheck {
  DType dtype;
  size_t rank;
  std::string source;
};

class InterpreterExecutable final : public Executable {
 public:
  explicit InterpreterExecutable(const ir::Graph& g) {
    std::unordered_map<const ir::Value*, int> slot;
    auto slot_of = [&](const ir::Value* v) {
      auto it = slot.find(v);
      LATHE_CHECK(it != slot.end(), "[interpreter] value %", v->id(),
                  " is used but never defined (run ir::Graph::verify)");
      return it->second;
    };
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const ir::Value* v = g.inputs()[i];
      slot.emplace(v, num_slots_++);
      inputs_.push_back(
          {v->type().dtype, v->type().sizes.size(), g.input_sources()[i].to_string()});
    }
    std::vector<ir::Node*> nodes = g.nodes();
    for (const ir::Node* n : nodes) {
      Step s;
      s.op = &n->op();
      s.attrs = n->attrs();
      attach_parsed_attrs(*s.op, s.attrs);  // shared with the node's when it has them
      s.name = lathe::detail::str(n->name(), " (", n->op().name, ")");
      s.symbolic = find_symbolic_attrs(s.attrs);
      for (const ir::Value* v : n->inputs()) s.inputs.push_back(v ? slot_of(v) : -1);
      for (const ir::Value* v : n->outputs()) {
        slot.emplace(v, num_slots_);
        s.outputs.push_back(num_slots_++);
      }
      steps_.push_back(std::move(s));
    }
    for (const ir::Value* v : g.outputs()) outputs_.push_back(slot_of(v));

    // Liveness: the last step reading each slot releases it; an output nobody reads is released
    // by the step that made it. Graph inputs and outputs are never released.
    std::vector<int> last(num_slots_, -1);
    for (size_t k = 0; k < steps_.size(); ++k) {
      for (int o : steps_[k].outputs) last[o] = static_cast<int>(k);
      for (int i : steps_[k].inputs)
        if (i >= 0) last[i] = static_cast<int>(k);
    }
    std::vector<bool> pinned(num_slots_, false);
    for (size_t i = 0; i < inputs_.size(); ++i) pinned[i] = true;
    for (int o : outputs_) pinned[o] = true;
    for (int s = 0; s < num_slots_; ++s)
      if (!pinned[s] && last[s] >= 0) steps_[last[s]].release.push_back(s);
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues symbols) override {
    LATHE_CHECK(inputs.size() == inputs_.size(), "[interpreter] the graph takes ", inputs_.size(),
                " inputs, got ", inputs.size());
    std::vector<Tensor> slots(num_slots_);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      const InputCheck& c = inputs_[i];
      LATHE_CHECK(t.defined() && t.has_storage(), "[interpreter] input ", i, " (", c.source,
                  ") has no data");
      LATHE_CHECK(t.dtype() == c.dtype && static_cast<size_t>(t.dim()) == c.rank,
                  "[interpreter] input ", i, " (", c.source, ") is ", t.shape_string(),
                  ", the graph expects ", dtype_name(c.dtype), " with ", c.rank, " dims");
      slots[i] = t;
    }
    std::vector<Tensor> args;
    for (const Step& s : steps_) {
      args.clear();
      for (int i : s.inputs) args.push_back(i >= 0 ? slots[i] : Tensor());
      try {
        std::vector<Tensor> outs;
        if (s.symbolic.empty()) {
          outs = execute(s, args, s.attrs);
        } else {
          outs = execute(s, args, substitute_symbols(s.attrs, s.symbolic, symbols));
        }
        LATHE_CHECK(outs.size() == s.outputs.size(), "the kernel returned ", outs.size(),
                    " outputs, the node has ", s.outputs.size());
        for (size_t o = 0; o < outs.size(); ++o) slots[s.outputs[o]] = std::move(outs[o]);
      } catch (const Error& e) {
        throw Error(lathe::detail::str("[interpreter] node ", s.name, ": ", e.what()));
      }
      for (int r : s.release) slots[r] = Tensor();
    }
    std::vector<Tensor> result;
    result.reserve(outputs_.size());
    for (int o : outputs_) result.push_back(slots[o]);
    return result;
  }

 private:
  static std::vector<Tensor> execute(const Step& s, const std::vector<Tensor>& args,
                                     const Attrs& attrs) {
    std::vector<TensorMeta> metas = s.op->shape(args, attrs);
    std::vector<Tensor> outs = run_eager_kernel(*s.op, args, attrs, metas);
    for (int i : s.op->mutated_inputs)
      if (i < static_cast<int>(args.size()) && args[i].defined() && s.op->mutates(attrs, i))
        args[i].bump_version();
    return outs;
  }

  int num_slots_ = 0;
  std::vector<InputCheck> inputs_;
  std::vector<Step> steps_;
  std::vector<int> outputs_;
};

class InterpreterBackend final : public Backend {
 public:
  std::string name() const override { return "interpreter"; }
  std::unique_ptr<Executable> compile(const ir::Graph& graph) override {
    return std::make_unique<InterpreterExecutable>(graph);
  }
};

}  // namespace

std::unique_ptr<Backend> make_interpreter_backend() {
  return std::make_unique<InterpreterBackend>();
}

}  // namespace lathe::backend
