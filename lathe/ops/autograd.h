// Eager autograd to PyTorch's semantics. While grad mode is on, every op dispatched with an input
// that requires grad records a node (the op, its attributes, the values its vjp reads and where
// each input's gradient goes); backward() walks those nodes from the root in reverse order of
// recording, calls each op's vjp (OpDef::vjp, written with ops) and accumulates into the leaves'
// grad. The engine lives in lathe/ops because the one dispatch point (op_def.cpp) records nodes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "lathe/core/random.h"
#include "lathe/ops/op_def.h"

namespace lathe {

struct AutogradNode;

// Per-tensor autograd state, kept in the tensor's TensorSlot::autograd extension slot. A leaf
// has no grad_fn.
struct AutogradMeta : TensorExtension {
  Tensor grad;                            // accumulated gradient (leaves)
  std::shared_ptr<AutogradNode> grad_fn;  // the node that produced this tensor (non-leaves)
  int output_nr = 0;                      // which output of grad_fn this tensor is
  bool is_view = false;                   // produced by a view op (in-place writes refused)
  // Called by backward() once the leaf's gradient for that backward is complete (every node
  // that contributes to it has run), as PyTorch's register_post_accumulate_grad_hook; by id.
  std::vector<std::pair<int64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks;
};

// The tensor's autograd state, or null when autograd never touched it.
inline AutogradMeta* autograd_meta(const TensorImpl& impl) {
  return static_cast<AutogradMeta*>(impl.extension(TensorSlot::autograd).get());
}

// A value the vjp reads, with the version of its storage when it was saved.
struct SavedTensor {
  Tensor value;  // the data (a detached alias for outputs), or a shape-only stand-in
  uint64_t version = 0;
  bool has_data = false;
};

// One recorded op call.
struct AutogradNode {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<SavedTensor> inputs;
  std::vector<SavedTensor> outputs;
  // Where the gradient of input i goes: a node's output, or a leaf's grad (neither: nowhere).
  struct Edge {
    std::shared_ptr<AutogradNode> node;
    int output_nr = 0;
    std::shared_ptr<TensorImpl> leaf;
    bool defined() const { return node != nullptr || leaf != nullptr; }
  };
  std::vector<Edge> next;
  uint64_t sequence_nr = 0;  // recording order; backward runs later nodes first
  bool released = false;     // saved values freed by a backward without retain_graph
};

namespace autograd {

// Backpropagates from `roots` with the matching `grads` (undefined: ones, only for one-element
// roots). Without retain_graph the saved values of every node reached are freed.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {},
              bool retain_graph = false);

// Registers `hook` on a leaf tensor (one that requires grad): backward() calls it with the leaf
// once the leaf's .grad holds every contribution of that backward, while the rest of the
// backward may still have to run (DistributedDataParallel starts a bucket's all-reduce from it),
// as PyTorch's register_post_accumulate_grad_hook. Returns an id for the remove function.
int64_t register_post_accumulate_grad_hook(const Tensor& leaf,
                                           std::function<void(const Tensor&)> hook);
void remove_post_accumulate_grad_hook(const Tensor& leaf, int64_t id);

// Queues `fn` to run when the backward() running on this thread has processed every node
// (before backward() returns), as PyTorch's Variable._execution_engine.queue_callback. Only
// callable from within a backward (a hook or a vjp); callbacks queued by callbacks run too.
void queue_callback(std::function<void()> fn);
// True on a thread that is running backward().
bool in_backward();
// The nodes the backward running on this thread has started so far (0 outside a backward): a
// hook that reads it can tell whether any of the backward was left when it fired.
int64_t nodes_run_in_backward();

}  // namespace autograd

namespace detail {

// True when dispatching `op` on these inputs must record a node (grad mode on and an input
// requires grad). Throws PyTorch's error for an in-place write into a leaf that requires grad.
bool autograd_should_record(const OpDef& op, TensorList inputs, const Attrs& attrs);
// State taken before the kernel runs (random ops: the generator position, so the vjp can
// replay the same draws).
struct AutogradPreState {
  std::optional<Generator::State> rng;
};
AutogradPreState autograd_before(const OpDef& op);
// Records the node for an op call whose outputs were just computed.
void autograd_record(const OpDef& op, TensorList inputs, const Attrs& attrs,
                     std::vector<Tensor>& outputs, const AutogradPreState& pre);

// A tensor handle sharing t's data and layout, without autograd state.
Tensor alias_without_autograd(const Tensor& t);

}  // namespace detail
}  // namespace lathe
