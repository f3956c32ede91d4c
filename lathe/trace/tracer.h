// Tracer: records every op dispatched on the current thread into an ir::Graph, running on fake
// tensors (metadata only, symbolic sizes from a ShapeEnv). Internal to lathe::compile.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lathe/core/dispatch_mode.h"
#include "lathe/core/tensor.h"
#include "lathe/ir/graph.h"
#include "lathe/ir/graph_recorder.h"
#include "lathe/ops/op_def.h"
#include "lathe/sym/shape_env.h"
#include "lathe/trace/arg_layout.h"

namespace lathe::detail {

// How one dim of a tensor argument is traced.
struct DimChoice {
  enum class Kind : uint8_t { kStatic, kDynamic, kMarked };
  Kind kind = Kind::kStatic;
  int64_t min = 2, max = INT64_MAX;  // kMarked: the mark_dynamic range
};

// A size symbol and the argument slot that binds it at call time.
struct SymbolBinding {
  int64_t symbol = 0;  // the symbol's id in the ShapeEnv
  int32_t arg = 0;
  int32_t dim = 0;
};

// The tracer is the dispatch mode lathe::compile pushes (see Scope): ops are recorded, not run,
// by the shared ir::GraphRecorder into an ir::Graph; the tracer adds size symbols, the fakes and
// the bookkeeping guards need (graph inputs, captured tensors, written inputs).
class Tracer : public DispatchMode, public ir::GraphRecorder<ir::Value*, ir::Node*> {
 public:
  // `names` maps parameter and buffer tensors to their module paths (may be null).
  Tracer(sym::ShapeEnv& env, ir::Graph& graph,
         const std::unordered_map<const TensorImpl*, std::string>* names);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // The fake tensor standing for argument `arg` (a new graph input), with sizes made symbolic
  // per `dims`. The same real tensor passed twice gets the same fake and graph input.
  Tensor add_argument(const Tensor& real, int arg, const std::vector<DimChoice>& dims);

  // Pushes the tracer on this thread's dispatch-mode stack until the scope ends.
  class Scope {
   public:
    explicit Scope(Tracer& t) : guard_(&t) {}

   private:
    ModeGuard guard_;
  };

  // The graph value of a tensor met while tracing (GraphRecorder::value_of): a fake of this
  // trace, or a concrete tensor lifted as a captured graph input (by reference).
  using GraphRecorder::value_of;

  // Concrete tensors lifted as graph inputs, in capture-slot order (after the arguments).
  const std::vector<Tensor>& captured() const { return captured_; }
  // For each graph input in order: the argument index, or -1 - capture slot.
  const std::vector<int>& input_origin() const { return input_origin_; }
  const std::vector<SymbolBinding>& bindings() const { return bindings_; }
  // The symbol of each binding, in the same order.
  const std::vector<const sym::Expr*>& binding_symbols() const { return binding_symbols_; }
  const std::vector<sym::Source>& sources() const { return sources_; }
  // The graph input a value is or views (through view ops and in-place results), or -1.
  int root_input(const ir::Value* v) const;
  // True when some op wrote graph input `input` (or a view of it) in place.
  bool input_written(size_t input) const { return input < written_.size() && written_[input]; }
  // True when capture slot k is a tensor a factory made while this trace ran (a constant of the
  // function, such as zeros({3}) in its body), not one that existed before.
  bool made_while_tracing(size_t k) const { return made_[k] != 0; }
  // True when `node` was recorded with grad mode off (a NoGradGuard inside the function): AOT
  // autograd gives it no gradient, as eager records no autograd node for it.
  bool recorded_without_grad(const ir::Node* node) const { return no_grad_nodes_.count(node) != 0; }

  // The fake tensors this trace made (their TensorImpls; the tracer holds one reference each).
  const std::vector<std::shared_ptr<TensorImpl>>& fakes() const { return fakes_; }
  // The graph value `t` stands for in this trace, or null when the trace never met it (a fake of
  // this trace, a lifted tensor, or a real tensor an op wrote: then the writing node's output).
  ir::Value* recorded_value(const Tensor& t) const { return find(t); }
  // In-place writes recorded so far (any input).
  int64_t num_writes() const { return num_writes_; }

  // A factory allocated this tensor while the trace runs.
  void note_allocation(const TensorImpl* impl) { allocated_.insert(impl); }

  // DispatchMode: every op dispatched under the scope is recorded; factories are noted.
  std::vector<Tensor> dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs,
                               std::vector<TensorMeta>&& metas) override {
    if (op.category == OpCategory::random && !recording_mask_)
      return record_random(op, inputs, attrs, std::move(metas));
    return GraphRecorder::record(op, inputs, attrs, std::move(metas));
  }
  void on_allocation(const TensorImpl* impl) override { note_allocation(impl); }
  bool is_tracing() const override { return true; }
  int64_t recorded_writes() const override { return num_writes_; }
  // A read of a real tensor's data while tracing would fix its value into the graph, and one the
  // trace wrote in place would read the value before the write: both throw DataReadWhileTracing
  // (compile then runs the function as regions). Lathe's own raw_data() reads of tensors the
  // trace did not write (factories filling a constant) go on.
  bool materialize(const Tensor& t, const char* what) override;

 protected:
  // GraphRecorder: the value map is values_; captured tensors are lifted as graph inputs.
  ir::Value* find(const Tensor& t) const override;
  void bind(const Tensor& t, ir::Value* v) override { values_[t.impl_ptr().get()] = v; }
  ir::Value* lift(const Tensor& t) override;
  ir::Node* add_node(const OpDef& op, std::span<ir::Value*> inputs, const Attrs& attrs,
                     const std::vector<TensorMeta>& outputs) override;
  ir::Value* const& input_value(ir::Node* const& node, int input) const override {
    return node->inputs()[input];
  }
  ir::Value* output_value(ir::Node* const& node, int output) override {
    return node->output(output);
  }
  Tensor make_tensor(TensorMeta&& m) override {
    return make_fake(std::move(m.sizes), std::move(m.strides), m.offset, m.dtype, m.device, false);
  }
  void note_view(ir::Node* const& node, int output, ir::Value* const& base) override;
  void rebind_written(const Tensor& t, ir::Node* const& node, int input, ir::Value* const& before,
                      int returned_as) override;

 private:
  Tensor make_fake(Shape sizes, Shape strides, int64_t offset, DType dtype, Device device,
                   bool requires_grad);
  void add_root(const ir::Value* input);  // before input_origin_ grows
  // With grad on, dropout(x) is recorded as mul(x, dropout(ones)): the same draws from the
  // generator, and a mask that AOT autograd can save for the backward (eager's vjp replays the
  // generator instead, which a compiled backward cannot).
  std::vector<Tensor> record_random(const OpDef& op, TensorList inputs, const Attrs& attrs,
                                    std::vector<TensorMeta>&& metas);

  sym::ShapeEnv& env_;
  ir::Graph& graph_;
  const std::unordered_map<const TensorImpl*, std::string>* names_;
  std::unordered_map<const TensorImpl*, ir::Value*> values_;
  std::unordered_map<const TensorImpl*, Tensor> arg_fakes_;  // real argument -> its fake
  std::vector<std::shared_ptr<TensorImpl>> fakes_;           // keeps the keys above alive
  std::vector<Tensor> captured_;
  std::vector<int> input_origin_;
  std::vector<SymbolBinding> bindings_;
  std::vector<const sym::Expr*> binding_symbols_;
  std::vector<sym::Source> sources_;
  std::unordered_map<const ir::Value*, int> roots_;    // value -> the graph input it views
  std::vector<uint8_t> written_;                       // per graph input
  std::vector<uint8_t> made_;                          // per capture slot
  std::unordered_set<const TensorImpl*> allocated_;    // tensors made while tracing
  std::unordered_set<const ir::Node*> no_grad_nodes_;  // recorded under a NoGradGuard
  bool recording_mask_ = false;                        // inside record_random
  int64_t num_writes_ = 0;
};

}  // namespace lathe::detail
