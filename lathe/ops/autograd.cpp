#include "lathe/ops/autograd.h"

#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "lathe/core/device_registry.h"
#include "lathe/core/grad_mode.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/vjp_util.h"

namespace lathe {
namespace {

// The version counter of t's data: its storage's, or the device's for a device tensor (the
// lazy device counts the writes it has recorded but not run yet).
uint64_t storage_version(const Tensor& t) {
  if (t.device().kind() != DeviceKind::cpu)
    if (const detail::DeviceFunctions* d = detail::find_device(t.device().kind()); d && d->version)
      return d->version(t);
  return t.has_storage() ? t.impl().storage->version() : 0;
}

// Sizes, strides and dtype of t without its data: what a vjp sees of a value it does not read.
Tensor shape_only(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->offset = t.storage_offset();
  impl->dtype = t.dtype();
  impl->device = t.device();
  return Tensor(std::move(impl));
}

SavedTensor save(const Tensor& t, bool reads_value) {
  SavedTensor s;
  if (!t.defined()) return s;
  if (!reads_value) {
    s.value = shape_only(t);
    return s;
  }
  s.value = t;
  s.version = storage_version(t);
  s.has_data = true;
  return s;
}

bool is_leaf_impl(const TensorImpl& impl) {
  const AutogradMeta* meta = autograd_meta(impl);
  return !meta || !meta->grad_fn;
}

// Recording order, for running later nodes first (a thread's graph is recorded on that thread).
thread_local uint64_t next_sequence_nr = 0;

std::string op_label(const AutogradNode& node) { return node.op ? node.op->name : "?"; }

}  // namespace

namespace detail {

Tensor alias_without_autograd(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(t.impl());
  impl->requires_grad = false;
  impl->extension(TensorSlot::autograd) = nullptr;
  return Tensor(std::move(impl));
}

bool autograd_should_record(const OpDef& op, TensorList inputs, const Attrs& attrs) {
  if (!GradMode::is_enabled()) return false;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.impl().requires_grad);
  if (!any) return false;
  for (int i : op.mutated_inputs) {
    if (i >= static_cast<int>(inputs.size()) || !inputs[i].defined() || !op.mutates(attrs, i))
      continue;
    const Tensor& t = inputs[i];
    const bool result_aliases =
        std::find(op.output_aliases.begin(), op.output_aliases.end(), i) != op.output_aliases.end();
    if (t.requires_grad() && is_leaf_impl(t.impl()))
      throw Error(str("[", op.name,
                      "] a leaf tensor that requires grad is being used in an in-place operation "
                      "(",
                      t.shape_string(),
                      "); wrap the update in a NoGradGuard or use the "
                      "out-of-place op"));
    if (t.requires_grad() || result_aliases)
      throw Error(str("[", op.name,
                      "] in-place operations on tensors that autograd records are "
                      "not supported (",
                      t.shape_string(),
                      "); use the out-of-place op, or a NoGradGuard when no gradient should flow"));
  }
  return true;
}

AutogradPreState autograd_before(const OpDef& op) {
  AutogradPreState pre;
  if (op.category == OpCategory::random) pre.rng = default_generator().state();
  return pre;
}

void autograd_record(const OpDef& op, TensorList inputs, const Attrs& attrs,
                     std::vector<Tensor>& outputs, const AutogradPreState& pre) {
  auto node = std::make_shared<AutogradNode>();
  node->op = &op;
  node->attrs = attrs;
  if (pre.rng) {
    node->attrs.set("rng_seed", static_cast<int64_t>(pre.rng->seed));
    node->attrs.set("rng_offset", static_cast<int64_t>(pre.rng->offset));
  }
  node->sequence_nr = next_sequence_nr++;
  node->inputs.reserve(inputs.size());
  node->next.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const bool reads = !op.vjp_reads_input || op.vjp_reads_input(static_cast<int>(i), attrs);
    node->inputs.push_back(save(t, reads));
    if (!t.defined() || !t.impl().requires_grad) continue;
    const AutogradMeta* meta = autograd_meta(t.impl());
    if (meta && meta->grad_fn)
      node->next[i] = {meta->grad_fn, meta->output_nr, nullptr};
    else
      node->next[i] = {nullptr, 0, t.impl_ptr()};
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& o = outputs[k];
    if (!o.defined()) {
      node->outputs.emplace_back();
      continue;
    }
    // A kernel handing back an input's own handle must not overwrite that input's history.
    for (const Tensor& t : inputs)
      if (t.defined() && t.is_same(o)) o = alias_without_autograd(o);
    if (is_floating(o.dtype())) {
      auto meta = std::make_shared<AutogradMeta>();
      meta->grad_fn = node;
      meta->output_nr = static_cast<int>(k);
      meta->is_view = op.category == OpCategory::view;
      o.impl().requires_grad = true;
      o.impl().extension(TensorSlot::autograd) = std::move(meta);
    }
    // The saved output is a handle without autograd state: one holding grad_fn would keep the
    // node alive from inside itself.
    node->outputs.push_back(save(alias_without_autograd(o), op.vjp_reads_outputs));
  }
}

}  // namespace detail

namespace autograd {
namespace {

[[noreturn]] void throw_freed(const AutogradNode& node) {
  throw Error(detail::str(
      "[autograd] trying to backward through the graph a second time (or to read saved tensors "
      "after they were freed): the saved values of '",
      op_label(node),
      "' were freed by an earlier backward(). Pass retain_graph=true to the first backward() if "
      "you need to backward through the graph again"));
}

void check_versions(const AutogradNode& node) {
  auto check = [&](const std::vector<SavedTensor>& saved, const char* what) {
    for (size_t i = 0; i < saved.size(); ++i) {
      const SavedTensor& s = saved[i];
      if (!s.has_data) continue;
      const uint64_t now = storage_version(s.value);
      if (now != s.version)
        throw Error(detail::str(
            "[autograd] one of the variables needed for gradient computation has been modified "
            "by an inplace operation: [",
            s.value.shape_string(), "], which is ", what, " ", i, " of ", op_label(node),
            ", is at version ", now, "; expected version ", s.version, " instead"));
    }
  };
  check(node.inputs, "input");
  check(node.outputs, "output");
}

void accumulate_into_leaf(const std::shared_ptr<TensorImpl>& leaf, Tensor g) {
  if (g.dtype() != leaf->dtype) g = g.to(leaf->dtype);
  if (!autograd_meta(*leaf))
    leaf->extension(TensorSlot::autograd) = std::make_shared<AutogradMeta>();
  Tensor& grad = autograd_meta(*leaf)->grad;
  if (!grad.defined()) {
    // A fresh tensor: the vjp may hand back a caller's tensor (the gradient passed in).
    grad = g.clone();
  } else {
    add_(grad, g);
  }
}

bool same_sizes(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.sizes()[d].maybe_int() != b.sizes()[d].maybe_int()) return false;
  return true;
}

struct Pending {
  std::vector<Tensor> grads;
  int dependencies = 0;
};

// The callbacks queued by the backward() running on this thread (queue_callback).
struct BackwardFrame {
  std::vector<std::function<void()>> callbacks;
  int64_t nodes_run = 0;
};
thread_local BackwardFrame* current_backward = nullptr;

// Makes `frame` this thread's current backward until the scope ends (backward may nest).
struct BackwardFrameScope {
  explicit BackwardFrameScope(BackwardFrame* frame) : outer(current_backward) {
    current_backward = frame;
  }
  ~BackwardFrameScope() { current_backward = outer; }
  BackwardFrame* outer;
};

// Only leaves with hooks are counted: a backward without any pays nothing for them.
bool has_leaf_hooks(const TensorImpl& leaf) {
  const AutogradMeta* meta = autograd_meta(leaf);
  return meta && !meta->post_accumulate_hooks.empty();
}

// The leaf's post-accumulate hooks, on its grad (copied first: a hook may remove itself).
void run_leaf_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  AutogradMeta* meta = autograd_meta(*leaf);
  if (!meta || meta->post_accumulate_hooks.empty() || !meta->grad.defined()) return;
  const auto hooks = meta->post_accumulate_hooks;
  const Tensor t(leaf);
  for (const auto& [id, hook] : hooks) hook(t);
}

void add_into(std::vector<Tensor>& slots, int index, const Tensor& g) {
  if (static_cast<int>(slots.size()) <= index) slots.resize(index + 1);
  Tensor& slot = slots[index];
  slot = slot.defined() ? add(slot, g) : g;
}

// The gradient backward starts root `r` from: `g`, or ones for a one-element root; checked.
Tensor root_gradient(const Tensor& root, Tensor g, size_t r) {
  LATHE_CHECK(root.defined(), "[backward] tensor ", r, " is undefined");
  LATHE_CHECK(root.requires_grad(), "[backward] element ", r,
              " of tensors does not require grad and does not have a grad_fn (",
              root.shape_string(),
              "): mark an input with set_requires_grad(true) before computing it, outside any "
              "NoGradGuard");
  if (!g.defined()) {
    LATHE_CHECK(root.numel() == 1,
                "[backward] grad can be implicitly created only for "
                "one-element outputs; pass a gradient for ",
                root.shape_string());
    return detail::on_device_of(ones(root.sizes(), root.dtype()), root);
  }
  LATHE_CHECK(g.shape() == root.shape(), "[backward] gradient ", g.shape_string(),
              " does not match the shape of the tensor ", root.shape_string());
  return g;
}

// The saved outputs of `node` and their gradients: zeros where none arrived, unless its vjp
// takes undefined ones (OpDef::vjp_takes_undefined_grads).
void output_gradients(const AutogradNode& node, const std::vector<Tensor>& grads,
                      std::vector<Tensor>& outs, std::vector<Tensor>& gouts) {
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const Tensor& o = node.outputs[k].value;
    outs.push_back(o);
    Tensor g = k < grads.size() ? grads[k] : Tensor();
    if (!g.defined() && o.defined() && !node.op->vjp_takes_undefined_grads)
      g = detail::on_device_of(zeros(o.sizes(), o.dtype()), o);
    gouts.push_back(g);
  }
}

// Every node reached from `stack`, counting for each the edges into it from other reached nodes
// (pending) and for each leaf the edges into it (leaf_pending).
std::vector<std::shared_ptr<AutogradNode>> reach_graph(
    std::vector<std::shared_ptr<AutogradNode>> stack, std::unordered_set<AutogradNode*>& seen,
    std::unordered_map<AutogradNode*, Pending>& pending,
    std::unordered_map<TensorImpl*, int>& leaf_pending) {
  std::vector<std::shared_ptr<AutogradNode>> all;
  while (!stack.empty()) {
    std::shared_ptr<AutogradNode> node = std::move(stack.back());
    stack.pop_back();
    pending[node.get()];
    for (const auto& e : node->next) {
      if (e.leaf && has_leaf_hooks(*e.leaf)) leaf_pending[e.leaf.get()]++;
      if (!e.node) continue;
      pending[e.node.get()].dependencies++;
      if (seen.insert(e.node.get()).second) stack.push_back(e.node);
    }
    all.push_back(std::move(node));
  }
  return all;
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph) {
  LATHE_CHECK(grads.empty() || grads.size() == roots.size(), "[backward] got ", roots.size(),
              " tensors and ", grads.size(), " gradients");
  // The vjps run without recording: double backward is not supported.
  NoGradGuard no_grad;
  BackwardFrame frame;
  const BackwardFrameScope scope(&frame);
  // For every leaf reached, the edges into it not yet run: its hooks fire when none is left.
  std::unordered_map<TensorImpl*, int> leaf_pending;
  std::unordered_map<AutogradNode*, Pending> pending;
  std::vector<std::shared_ptr<AutogradNode>> stack;
  std::unordered_set<AutogradNode*> seen;
  std::vector<std::pair<std::shared_ptr<AutogradNode>, int>> root_edges;
  std::vector<Tensor> root_grads;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    Tensor g = root_gradient(root, grads.empty() ? Tensor() : grads[r], r);
    if (is_leaf_impl(root.impl())) {
      accumulate_into_leaf(root.impl_ptr(), g);
      run_leaf_hooks(root.impl_ptr());
      continue;
    }
    const AutogradMeta* meta = autograd_meta(root.impl());
    root_edges.emplace_back(meta->grad_fn, meta->output_nr);
    root_grads.push_back(g);
    if (seen.insert(meta->grad_fn.get()).second) stack.push_back(meta->grad_fn);
  }
  const std::vector<std::shared_ptr<AutogradNode>> all =
      reach_graph(std::move(stack), seen, pending, leaf_pending);
  for (size_t r = 0; r < root_edges.size(); ++r)
    add_into(pending[root_edges[r].first.get()].grads, root_edges[r].second, root_grads[r]);

  auto later_first = [](const std::shared_ptr<AutogradNode>& a,
                        const std::shared_ptr<AutogradNode>& b) {
    return a->sequence_nr < b->sequence_nr;
  };
  std::priority_queue<std::shared_ptr<AutogradNode>, std::vector<std::shared_ptr<AutogradNode>>,
                      decltype(later_first)>
      ready(later_first);
  for (const auto& n : all)
    if (pending[n.get()].dependencies == 0) ready.push(n);

  while (!ready.empty()) {
    std::shared_ptr<AutogradNode> node = ready.top();
    ready.pop();
    ++frame.nodes_run;  // counted before its vjp: its hooks see it as run
    if (node->released) throw_freed(*node);
    check_versions(*node);
    Pending& p = pending[node.get()];
    std::vector<Tensor> ins, outs, gouts;
    for (const SavedTensor& s : node->inputs) ins.push_back(s.value);
    output_gradients(*node, p.grads, outs, gouts);
    std::vector<bool> needs(node->next.size());
    for (size_t i = 0; i < needs.size(); ++i) needs[i] = node->next[i].defined();
    LATHE_CHECK(static_cast<bool>(node->op->vjp), "[autograd] op '", op_label(*node),
                "' has no vjp: its derivative is not implemented");
    std::vector<Tensor> in_grads = node->op->vjp(ins, outs, gouts, node->attrs, needs);
    LATHE_CHECK(in_grads.size() <= ins.size(), "[autograd] the vjp of '", op_label(*node),
                "' returned ", in_grads.size(), " gradients for ", ins.size(), " inputs");
    for (size_t i = 0; i < in_grads.size(); ++i) {
      Tensor g = in_grads[i];
      if (!needs[i] || !g.defined()) continue;
      LATHE_CHECK(same_sizes(g, ins[i]), "[autograd] the vjp of '", op_label(*node),
                  "' returned a gradient ", g.shape_string(), " for input ", i, " ",
                  ins[i].shape_string());
      if (g.dtype() != ins[i].dtype()) g = g.to(ins[i].dtype());
      const auto& e = node->next[i];
      if (e.leaf) {
        accumulate_into_leaf(e.leaf, g);
        continue;
      }
      Pending& q = pending[e.node.get()];
      add_into(q.grads, e.output_nr, g);
    }
    // Dependencies drop after the gradients are in, also for edges that carried none.
    for (size_t i = 0; i < node->next.size(); ++i) {
      const auto& e = node->next[i];
      if (e.leaf && has_leaf_hooks(*e.leaf) && --leaf_pending[e.leaf.get()] == 0)
        run_leaf_hooks(e.leaf);
      if (!e.node) continue;
      if (--pending[e.node.get()].dependencies == 0) ready.push(e.node);
    }
    if (!retain_graph) {
      node->inputs.clear();
      node->outputs.clear();
      node->released = true;
    }
    pending.erase(node.get());
  }
  // The queued callbacks, in order (one may queue more).
  for (size_t i = 0; i < frame.callbacks.size(); ++i) {
    std::function<void()> fn = std::move(frame.callbacks[i]);
    fn();
  }
}

int64_t register_post_accumulate_grad_hook(const Tensor& leaf,
                                           std::function<void(const Tensor&)> hook) {
  LATHE_CHECK(leaf.defined() && is_leaf_impl(leaf.impl()),
              "[autograd] register_post_accumulate_grad_hook: the tensor is not a leaf (hooks "
              "run when a leaf's .grad is complete; register it on a parameter)");
  LATHE_CHECK(leaf.requires_grad(),
              "[autograd] register_post_accumulate_grad_hook: the tensor does not require grad");
  static std::atomic<int64_t> next_id{1};
  if (!autograd_meta(leaf.impl()))
    leaf.impl().extension(TensorSlot::autograd) = std::make_shared<AutogradMeta>();
  const int64_t id = next_id++;
  autograd_meta(leaf.impl())->post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void remove_post_accumulate_grad_hook(const Tensor& leaf, int64_t id) {
  AutogradMeta* meta = leaf.defined() ? autograd_meta(leaf.impl()) : nullptr;
  if (!meta) return;
  auto& hooks = meta->post_accumulate_hooks;
  hooks.erase(
      std::remove_if(hooks.begin(), hooks.end(), [id](const auto& h) { return h.first == id; }),
      hooks.end());
}

void queue_callback(std::function<void()> fn) {
  LATHE_CHECK(current_backward != nullptr,
              "[autograd] queue_callback called outside a backward (call it from a hook)");
  current_backward->callbacks.push_back(std::move(fn));
}

bool in_backward() { return current_backward != nullptr; }

int64_t nodes_run_in_backward() { return current_backward ? current_backward->nodes_run : 0; }

}  // namespace autograd

// ---- autograd's Tensor members (core/tensor_methods.h) ----

namespace {

Tensor grad_of(const Tensor& x) {
  const AutogradMeta* meta = autograd_meta(x.impl());
  return meta ? meta->grad : Tensor();
}

void set_grad_of(const Tensor& x, const Tensor& g) {
  if (!autograd_meta(x.impl())) {
    if (!g.defined()) return;
    x.impl().extension(TensorSlot::autograd) = std::make_shared<AutogradMeta>();
  }
  autograd_meta(x.impl())->grad = g;
}

bool is_leaf_tensor(const Tensor& x) { return is_leaf_impl(x.impl()); }

std::string grad_fn_name_of(const Tensor& x) {
  return is_leaf_tensor(x) ? std::string() : op_label(*autograd_meta(x.impl())->grad_fn);
}

void backward_from(const Tensor& x, const Tensor& gradient, bool retain_graph) {
  autograd::backward({x}, {gradient}, retain_graph);
}

Tensor detach_of(const Tensor& x) {
  if (!detail::is_tracing()) return detail::alias_without_autograd(x);
  // Traced: recorded as an alias that stops gradient (a node recorded without grad gets none).
  NoGradGuard no_grad;
  return dispatch1(LATHE_OP("detach"), {&x, 1}, Attrs{});
}

}  // namespace

void detail::set_autograd_functions(TensorOpFunctions& f) {
  f.grad = grad_of;
  f.set_grad = set_grad_of;
  f.is_leaf = is_leaf_tensor;
  f.grad_fn_name = grad_fn_name_of;
  f.backward = backward_from;
  f.detach = detach_of;
}

}  // namespace lathe
