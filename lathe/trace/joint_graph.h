// The joint graph of a training entry (AOTAutograd's joint forward + backward): the traced forward
// graph and the backward that the ops' vjp rules (OpDef::vjp, written with ops) record over it,
// run under a tracer over fake tensors of the forward values, in reverse order, with the output
// gradients as extra inputs. build_joint_graph records that backward once (JointGraph::backward,
// its inputs mapped to the forward values they read: `needed`); a Partitioner (partition.h) then
// chooses which of them the forward saves and which the backward recomputes, and
// JointGraph::split records the backward graph for that choice. Internal to the compile cache.
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lathe/ir/graph.h"
#include "lathe/sym/shape_env.h"
#include "lathe/trace/aot_autograd.h"
#include "lathe/trace/tracer.h"

namespace lathe::detail {

// Records the backward graph. Fakes standing for forward values are resolved by `resolve_`
// (a new graph input, or a value prepared before the vjps run); other concrete tensors (a
// vjp's zeros or scalar constants) are lifted as the tracer lifts captures.
class BackwardTracer : public Tracer {
 public:
  using Resolve = std::function<ir::Value*(const Tensor&)>;
  BackwardTracer(sym::ShapeEnv& env, ir::Graph& graph, Resolve resolve)
      : Tracer(env, graph, nullptr), resolve_(std::move(resolve)) {}
  void bind_to(const Tensor& t, ir::Value* v) { bind(t, v); }

 protected:
  ir::Value* lift(const Tensor& t) override {
    if (ir::Value* v = resolve_(t)) {
      bind(t, v);
      return v;
    }
    return Tracer::lift(t);
  }

 private:
  Resolve resolve_;
};

// One fake tensor per forward value, shared by both recording passes (kept alive: the tracers
// map tensors by their TensorImpl address).
class ForwardFakes {
 public:
  const Tensor& of(const ir::Value* v);
  // The forward value a fake stands for, or null.
  const ir::Value* value(const Tensor& t) const {
    auto it = value_.find(t.impl_ptr().get());
    return it == value_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<const ir::Value*, Tensor> fake_;
  std::unordered_map<const TensorImpl*, const ir::Value*> value_;
};

// What a partitioner returns: the forward graph (the joint's, its outputs now the user outputs
// followed by `saved`), the backward graph, and the forward values saved for it.
struct Partition {
  ir::Graph* forward = nullptr;
  std::unique_ptr<ir::Graph> backward;
  std::vector<ir::Value*> saved;
  size_t num_recomputed = 0;  // forward values the backward recomputes instead of reading them
};

using BackwardSources = std::unordered_map<const ir::Value*, AotPlan::BackwardInput>;

struct JointGraph {
  ir::Graph& forward;
  const Tracer& tracer;
  sym::ShapeEnv& env;
  AotPlan& plan;
  std::vector<ir::Node*> grad_nodes;  // nodes that record a gradient, in forward order
  std::unordered_set<const ir::Value*> requires_grad;
  ForwardFakes fakes;
  std::vector<ir::Value*> user_outputs;  // the forward's outputs before partitioning
  // Forward values (graph inputs and node outputs) the backward reads, by value id.
  std::vector<const ir::Value*> needed;
  // The backward half of the joint: the vjps' nodes as recorded over the forward (outputs not
  // set); each of its inputs is an output gradient, a constant of the vjps, or a forward value
  // (forward_value_of).
  std::unique_ptr<ir::Graph> backward;
  std::unordered_map<const ir::Value*, const ir::Value*> forward_value_of;

  [[noreturn]] void fail(const std::string& what) const;

  // Which values require grad, as eager's recording would decide, and what cannot be compiled.
  void mark_requires_grad();
  // Fills plan.grad_outputs_reaching: which user outputs requiring grad reach each input.
  void find_reaching_outputs();
  // Runs the vjps of grad_nodes in reverse under `bt` (already the current dispatch mode),
  // seeding each user output that requires grad with a new graph input of `bg`. Returns the
  // gradient of each forward input (undefined where none flows).
  std::vector<Tensor> run_vjps(BackwardTracer& bt, ir::Graph& bg, BackwardSources& sources);

  // The partition for a choice: `saved` (node outputs among `needed`, returned by the forward)
  // and `recomputed` (the other needed node outputs, recorded again in the backward from what
  // it has). Records the backward graph, fills the plan's backward inputs, constants and
  // gradient slots, and appends `saved` to the forward's outputs. Throws (fail) when the
  // backward would read a value an in-place op overwrites, or writes in place itself.
  Partition split(std::vector<ir::Value*> saved,
                  const std::unordered_set<const ir::Value*>& recomputed);

 private:
  std::unique_ptr<ir::Graph> record_backward(const std::vector<const ir::Value*>& reads,
                                             const std::vector<ir::Value*>& saved,
                                             const std::unordered_set<const ir::Value*>& recomputed,
                                             BackwardSources& sources,
                                             std::vector<Tensor>& constants);
};

// The joint graph of `forward` (the plan's input flags set), with `needed` found by a probe
// recording of the backward; null when no user output requires grad (an inference entry).
std::unique_ptr<JointGraph> build_joint_graph(ir::Graph& forward, sym::ShapeEnv& env,
                                              const Tracer& tracer, AotPlan& plan);

// "graph input %3" or "%7 (the result of mul)", for errors.
std::string value_label(const ir::Value* v);

}  // namespace lathe::detail
