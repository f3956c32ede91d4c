// The lazy device runtime: the dispatch hook that records ops, sync() that builds, looks up,
// compiles and runs the pending graph, and transfers between the CPU and the device.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <unordered_set>

#include "lathe/backend/backend.h"
#include "lathe/core/device_transfer.h"
#include "lathe/ir/graph.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/lazy/executable_cache.h"
#include "lathe/lazy/lazy.h"
#include "lathe/lazy/lazy_value.h"
#include "lathe/ops/register.h"

namespace lathe::lazy {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// All lazy state; one per process, guarded by `mu` (ops may be recorded from any thread).
struct LazyContext {
  std::mutex mu;
  uint64_t next_seq = 0;
  // Tensors made pending since the last sync (weak: dead ones are not computed).
  std::vector<std::weak_ptr<TensorImpl>> pending;
  // Nodes writing into an input since the last sync: they run even when no live tensor needs
  // their outputs.
  std::vector<std::shared_ptr<LazyNode>> effects;
  Metrics metrics;
  ExecutableCache cache;
  std::string backend_name = "interpreter";
  std::unique_ptr<backend::Backend> backend;
  std::function<uint64_t(const ir::Graph&)> hash_override;
  std::string last_graph;
};

LazyContext& context() {
  static LazyContext* c = new LazyContext();  // never destroyed: tensors may outlive statics
  return *c;
}

std::shared_ptr<LazyValue> device_data(Tensor buffer) {
  auto v = std::make_shared<LazyValue>();
  v->kind = LazyValue::Kind::device_data;
  v->buffer = std::move(buffer);
  return v;
}

// A copy with the same memory order (dense tensors) or row-major.
Tensor copy_of(const Tensor& t) {
  Tensor out = empty_like(t);
  kernels::copy(out, t);
  return out;
}

Tensor contiguous_copy_of(const Tensor& t) {
  Tensor out = empty(t.sizes(), t.dtype());
  kernels::copy(out, t);
  return out;
}

// The value an op input stands for (under the lock).
std::shared_ptr<LazyValue> value_of(LazyContext& c, const Tensor& t) {
  if (!t.defined()) return nullptr;
  TensorImpl& impl = t.impl();
  if (impl.device.kind() != DeviceKind::lazy) {
    // A 0-dim CPU tensor joining lazy ones: copied to the device now, as eager would read it now.
    c.metrics.transfers_to_device++;
    c.metrics.bytes_to_device += static_cast<int64_t>(t.nbytes());
    return device_data(copy_of(t));
  }
  if (!impl.lazy)
    impl.lazy = device_data(lathe::detail::device_buffer(t));  // device data, first use as input
  return impl.lazy;
}

const OpDef& contiguous_op() {
  static const OpDef& op = OpRegistry::global().add(
      OpDef{"lazy_contiguous",
            1,
            [](TensorList in, const Attrs&) {
              TensorMeta m;
              m.sizes = in[0].sizes();
              m.dtype = in[0].dtype();
              m.device = in[0].device();
              return std::vector<TensorMeta>{m};
            },
            [](TensorList in, const Attrs&, const std::vector<TensorMeta>&) {
              return std::vector<Tensor>{in[0].is_contiguous() ? in[0] : contiguous_copy_of(in[0])};
            },
            {},
            {}});
  return op;
}

Tensor pending_tensor(LazyContext& c, std::shared_ptr<LazyValue> v, const TensorMeta& m) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = m.sizes;
  impl->strides = m.is_view ? m.strides : contiguous_strides(m.sizes);
  impl->offset = m.is_view ? m.offset : 0;
  impl->dtype = m.dtype;
  impl->device = Device::lazy();
  impl->lazy = std::move(v);
  c.pending.push_back(impl);
  return Tensor(std::move(impl));
}

std::vector<Tensor> record(const OpDef& op, TensorList inputs, const Attrs& attrs,
                           std::vector<TensorMeta>&& metas) {
  const auto t0 = Clock::now();
  static const OpDef* view_op = &LATHE_OP("view");
  for (int i : op.mutated_inputs) {
    const bool cpu = i < static_cast<int>(inputs.size()) && inputs[i].defined() &&
                     inputs[i].device().kind() != DeviceKind::lazy;
    LATHE_CHECK(!cpu, "[", op.name, "] writes into input ", i, " ", inputs[i].shape_string(),
                ", which is on the cpu while other inputs are lazy");
  }
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  auto node = std::make_shared<LazyNode>();
  node->op = &op;
  node->attrs = attrs;
  node->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) node->inputs.push_back(value_of(c, t));
  if (&op == view_op && node->inputs[0] && !node->inputs[0]->layout_known) {
    // The input's strides are a guess; the kernel may have laid it out otherwise.
    auto cn = std::make_shared<LazyNode>();
    cn->op = &contiguous_op();
    cn->inputs = {node->inputs[0]};
    TensorMeta m;
    m.sizes = inputs[0].sizes();
    m.dtype = inputs[0].dtype();
    m.device = Device::lazy();
    cn->outputs = {m};
    cn->seq = c.next_seq++;
    auto cv = std::make_shared<LazyValue>();
    cv->kind = LazyValue::Kind::output;
    cv->node = cn;
    node->inputs[0] = std::move(cv);
    c.metrics.ops_traced++;
  }
  node->seq = c.next_seq++;
  node->outputs = std::move(metas);
  const bool writes_self =
      std::find(op.mutated_inputs.begin(), op.mutated_inputs.end(), 0) != op.mutated_inputs.end() &&
      node->outputs.size() == 1 && node->outputs[0].is_view;
  std::vector<Tensor> out;
  if (!writes_self) {
    const bool input_layout_known =
        !node->inputs.empty() && node->inputs[0] && node->inputs[0]->layout_known;
    out.reserve(node->outputs.size());
    for (size_t i = 0; i < node->outputs.size(); ++i) {
      auto v = std::make_shared<LazyValue>();
      v->kind = LazyValue::Kind::output;
      v->node = node;
      v->index = static_cast<int>(i);
      v->layout_known = node->outputs[i].is_view && input_layout_known;
      out.push_back(pending_tensor(c, std::move(v), node->outputs[i]));
    }
  }
  for (int i : op.mutated_inputs) {
    if (i >= static_cast<int>(inputs.size()) || !inputs[i].defined()) continue;
    TensorImpl& impl = inputs[i].impl();
    const std::shared_ptr<LazyValue>& in = node->inputs[i];
    auto w = std::make_shared<LazyValue>();
    w->kind = LazyValue::Kind::written;
    w->node = node;
    w->base = in->kind == LazyValue::Kind::written ? in->base : in;
    w->layout_known = in->layout_known;
    impl.lazy = std::move(w);
    impl.storage = nullptr;  // the buffer lives on in the graph input; sync gives it back
    c.pending.push_back(inputs[i].impl_ptr());
  }
  if (!op.mutated_inputs.empty()) c.effects.push_back(node);
  if (writes_self) out.push_back(inputs[0]);
  c.metrics.ops_traced++;
  c.metrics.trace_s += seconds_since(t0);
  return out;
}

// Graph values by (value or node, output index); device data uses index -1.
using ValueKey = std::pair<const void*, int>;

ValueKey key_of(const LazyValue* v) {
  v = v->root();
  if (v->kind == LazyValue::Kind::device_data) return {v, -1};
  return {v->node.get(), v->index};
}

void sync_locked(LazyContext& c) {
  auto t0 = Clock::now();
  std::vector<std::shared_ptr<TensorImpl>> live;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& w : c.pending)
    if (auto p = w.lock())
      if (!p->storage && p->lazy && seen.insert(p.get()).second) live.push_back(std::move(p));
  c.pending.clear();
  std::vector<std::shared_ptr<LazyNode>> effects = std::move(c.effects);
  c.effects.clear();
  if (live.empty() && effects.empty()) return;
  c.metrics.syncs++;

  // The nodes the live tensors and the writes need, in recording order.
  std::vector<const LazyNode*> nodes;
  std::unordered_set<const LazyNode*> visited;
  std::vector<const LazyNode*> stack;
  auto visit = [&](const LazyValue* v) {
    if (!v) return;
    if (v->kind == LazyValue::Kind::written) {
      stack.push_back(v->node.get());
      v = v->base.get();
    }
    if (v->kind == LazyValue::Kind::output) stack.push_back(v->node.get());
  };
  for (const auto& p : live) visit(p->lazy.get());
  for (const auto& n : effects) stack.push_back(n.get());
  while (!stack.empty()) {
    const LazyNode* n = stack.back();
    stack.pop_back();
    if (!visited.insert(n).second) continue;
    nodes.push_back(n);
    for (const auto& in : n->inputs) visit(in.get());
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const LazyNode* a, const LazyNode* b) { return a->seq < b->seq; });

  // The graph: device data become inputs in order of first use.
  auto graph = std::make_unique<ir::Graph>();
  std::map<ValueKey, ir::Value*> values;
  std::vector<Tensor> args;
  auto ir_value = [&](const LazyValue* v) -> ir::Value* {
    if (!v) return nullptr;
    ValueKey k = key_of(v);
    auto it = values.find(k);
    if (it != values.end()) return it->second;
    const LazyValue* root = v->root();
    LATHE_CHECK(root->kind == LazyValue::Kind::device_data,
                "[lazy] internal error: a value is used before the node that makes it");
    ir::InputSource src;
    src.index = static_cast<int>(args.size());
    ir::Value* iv = graph->add_input(ir::ValueType::of(root->buffer), src);
    args.push_back(root->buffer);
    values.emplace(k, iv);
    return iv;
  };
  for (const LazyNode* n : nodes) {
    std::vector<ir::Value*> ins;
    ins.reserve(n->inputs.size());
    for (const auto& in : n->inputs) ins.push_back(ir_value(in.get()));
    std::vector<ir::ValueType> types;
    for (const TensorMeta& m : n->outputs) {
      ir::ValueType t;
      t.dtype = m.dtype;
      t.sizes = m.sizes;
      types.push_back(std::move(t));
    }
    ir::Node* irn = graph->add_node(*n->op, std::move(ins), n->attrs, std::move(types));
    for (size_t i = 0; i < irn->outputs().size(); ++i)
      values.emplace(ValueKey{n, static_cast<int>(i)}, irn->output(i));
  }
  std::vector<ir::Value*> outs;
  for (const auto& p : live) outs.push_back(ir_value(p->lazy.get()));
  graph->set_outputs(std::move(outs));
  c.metrics.graphs_built++;
  c.metrics.graph_nodes += static_cast<int64_t>(graph->num_nodes());
  c.metrics.trace_s += seconds_since(t0);

  auto t1 = Clock::now();
  const uint64_t hash = c.hash_override ? c.hash_override(*graph) : graph->structural_hash();
  c.metrics.graph_hashes++;
  ExecutableCache::Lookup found = c.cache.find(hash, *graph);
  c.metrics.hash_s += seconds_since(t1);
  if (found.collided) c.metrics.hash_collisions++;
  backend::Executable* exe = found.executable;
  if (exe) {
    c.metrics.cache_hits++;
  } else {
    c.metrics.cache_misses++;
    auto t2 = Clock::now();
    if (!c.backend) c.backend = backend::create_backend(c.backend_name);
    std::unique_ptr<backend::Executable> compiled = c.backend->compile(*graph);
    c.metrics.compiles++;
    c.metrics.compile_s += seconds_since(t2);
    c.last_graph = graph->to_string();
    exe = c.cache.insert(hash, std::move(graph), std::move(compiled));
  }

  auto t3 = Clock::now();
  std::vector<Tensor> results = exe->run(args, {});
  c.metrics.executions++;
  c.metrics.execute_s += seconds_since(t3);
  for (size_t i = 0; i < live.size(); ++i) {
    TensorImpl& impl = *live[i];
    const Tensor& r = results[i];
    impl.storage = r.impl().storage;
    impl.sizes = r.sizes();
    impl.strides = r.strides();
    impl.offset = r.storage_offset();
    impl.lazy = nullptr;
  }
}

void sync_hook() { lathe::sync(); }

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    contiguous_op();
    set_lazy_dispatch_hook(&record);
    lathe::detail::set_lazy_sync_hook(&sync_hook);
  });
}

}  // namespace

Metrics metrics() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.metrics;
}

void reset_metrics() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.metrics = Metrics{};
}

void set_backend(const std::string& name) {
  auto b = backend::create_backend(name);  // throws for an unknown name
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.backend_name = name;
  c.backend = std::move(b);
  c.cache.clear();
}

std::string backend() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.backend_name;
}

void clear_cache() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.cache.clear();
}

size_t cache_size() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.cache.size();
}

namespace testing {
void set_hash_override(std::function<uint64_t(const ir::Graph&)> hash) {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.hash_override = std::move(hash);
}

std::string last_graph() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.last_graph;
}
}  // namespace testing

}  // namespace lathe::lazy

namespace lathe {

void sync() {
  lazy::LazyContext& c = lazy::context();
  std::lock_guard<std::mutex> lock(c.mu);
  lazy::sync_locked(c);
}

namespace {

// Tensor::to(Device) onto or off the lazy device (registered with core below).
Tensor lazy_transfer(const Tensor& t, Device d) {
  lazy::install();
  lazy::LazyContext& c = lazy::context();
  if (d.kind() == DeviceKind::lazy) {
    Tensor moved = detail::as_lazy_device_data(lazy::copy_of(t));
    moved.set_requires_grad(t.requires_grad());
    std::lock_guard<std::mutex> lock(c.mu);
    c.metrics.transfers_to_device++;
    c.metrics.bytes_to_device += static_cast<int64_t>(t.nbytes());
    return moved;
  }
  std::lock_guard<std::mutex> lock(c.mu);
  lazy::sync_locked(c);
  LATHE_CHECK(t.has_storage(), "[to] lazy tensor ", t.shape_string(),
              " has no data: the graph computing it failed");
  Tensor out = lazy::copy_of(detail::device_buffer(t));
  c.metrics.transfers_from_device++;
  c.metrics.bytes_from_device += static_cast<int64_t>(t.nbytes());
  return out;
}

const bool lazy_device_registered =
    (detail::register_device_transfer(DeviceKind::lazy, &lazy_transfer), true);

}  // namespace

// CMakeLists.txt links every user of lathe_lazy with --undefined=lathe_lazy_device_anchor, so this
// object (and the registration above) is in every program that can make lazy tensors.
extern "C" {
int lathe_lazy_device_anchor = 0;
}

}  // namespace lathe
