// The lazy device runtime: the dispatch that records ops (hashing them as it goes), and sync()
// that looks the recorded window up by that hash and runs its executable (building and compiling
// a graph only on a miss). The public functions and the transfers are in lazy_api.cpp.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <unordered_set>

#include "lathe/backend/backend.h"
#include "lathe/core/device_registry.h"
#include "lathe/ir/graph.h"
#include "lathe/ir/graph_recorder.h"
#include "lathe/ir/structural.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/lazy/block_pool.h"
#include "lathe/lazy/executable_cache.h"
#include "lathe/lazy/freezing.h"
#include "lathe/lazy/lazy.h"
#include "lathe/lazy/lazy_context.h"
#include "lathe/lazy/lazy_value.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe::lazy {

LazyContext& context() {
  static LazyContext* c = new LazyContext();  // never destroyed: tensors may outlive statics
  return *c;
}

// A copy with the same memory order (dense tensors) or row-major.
Tensor copy_of(const Tensor& t) {
  Tensor out = empty_like(t);
  kernels::copy(out, t);
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::shared_ptr<LazyValue> device_data(Tensor buffer) {
  auto v = std::allocate_shared<LazyValue>(PoolAllocator<LazyValue>());
  v->kind = LazyValue::Kind::device_data;
  v->buffer = std::move(buffer);
  const TensorImpl& b = v->buffer.impl();
  ir::StructuralHasher h;
  h.add(static_cast<uint64_t>(b.dtype));
  h.add(b.sizes.size());
  for (size_t d = 0; d < b.sizes.size(); ++d) {
    h.add(static_cast<uint64_t>(*b.sizes[d].maybe_int()));
    h.add(static_cast<uint64_t>(*b.strides[d].maybe_int()));
  }
  v->type_digest = h.get();
  v->base_version = b.storage ? b.storage->version() : 0;
  return v;
}

// Where a value comes from, for the hash: a device data slot of this window (assigned, and its
// type hashed into `h`, at first use), or an output of a node of this window; a written value is
// its base after the write of a node.
uint64_t source_code(LazyContext& c, const LazyValue* v, ir::StructuralHasher& h) {
  if (!v) return 0x756e646566ull;  // an undefined optional input
  uint64_t code;
  const LazyValue* root = v->root();
  if (root->kind == LazyValue::Kind::device_data) {
    auto* data = const_cast<LazyValue*>(root);  // slots are bookkeeping of the context's window
    if (data->window != c.window) {
      data->window = c.window;
      data->slot = static_cast<int>(c.window_args.size());
      c.window_args.push_back(data->buffer);
      h.add(data->type_digest);
    }
    code = (uint64_t{1} << 62) | static_cast<uint64_t>(data->slot);
  } else {
    if (root->node->window != c.window) c.window_foreign = true;
    code = (uint64_t{2} << 62) | (static_cast<uint64_t>(root->node->pos) << 16) |
           static_cast<uint64_t>(root->index);
  }
  if (v->kind == LazyValue::Kind::written)
    code ^= (uint64_t{3} << 60) | (static_cast<uint64_t>(v->node->pos) << 20);
  return code;
}

// Adds one recorded op to the window's hash chain. Its attributes, its inputs' sources and its
// output types are each hashed on a chain of their own (fresh hashers, in registers), and only
// the three digests (the op folded into the attributes') join the window's chain: hashing is a
// serial chain of multiplies, and three short independent chains run side by side where one long
// one would wait on every word.
void hash_node(LazyContext& c, const LazyNode& n, const std::vector<TensorMeta>& outputs) {
  uint64_t attrs_digest = 0;
  if (!n.attrs.items().empty()) {
    ir::StructuralHasher a;
    a.add(n.attrs);
    attrs_digest = a.get();
  }
  ir::StructuralHasher ins;
  ins.add(n.inputs.size());
  for (const auto& in : n.inputs) ins.add(source_code(c, in.get(), ins));
  ir::StructuralHasher outs;
  outs.add(outputs.size());
  for (const TensorMeta& m : outputs) {
    outs.add(static_cast<uint64_t>(m.dtype) | (uint64_t{m.is_view} << 8));
    outs.add(m.sizes);
  }
  ir::StructuralHasher& h = c.chain;
  h.add(reinterpret_cast<uintptr_t>(n.op) ^ attrs_digest);
  h.add(ins.get());
  h.add(outs.get());
}

// The shared recorder over lazy values (under the lock): the value map is each tensor's
// LazyValue, device data are lifted at their first use, and every node is hashed into the
// window's chain as it is added. Results are pending tensors, held weakly by the context.
class LazyRecorder final
    : public ir::GraphRecorder<std::shared_ptr<LazyValue>, std::shared_ptr<LazyNode>> {
 public:
  explicit LazyRecorder(LazyContext& c) : c_(c) {}

 protected:
  std::shared_ptr<LazyValue> find(const Tensor& t) const override {
    const TensorImpl& impl = t.impl();
    if (impl.device.kind() != DeviceKind::lazy) return nullptr;
    return tensor_value(impl);
  }
  void bind(const Tensor& t, std::shared_ptr<LazyValue> v) override {
    set_tensor_value(t.impl(), std::move(v));
  }
  std::shared_ptr<LazyValue> lift(const Tensor& t) override {
    if (t.device().kind() != DeviceKind::lazy) {
      // A 0-dim CPU tensor joining lazy ones: copied to the device now, as eager would read it
      // now (and not bound: the CPU tensor stays a CPU tensor).
      c_.metrics.transfers_to_device++;
      c_.metrics.bytes_to_device += static_cast<int64_t>(t.nbytes());
      return device_data(copy_of(t));
    }
    auto v = device_data(lathe::detail::device_buffer(t));  // device data, first use as input
    v->module_state = t.impl().module_state;
    bind(t, v);
    return v;
  }
  std::shared_ptr<LazyNode> add_node(const OpDef& op, std::span<std::shared_ptr<LazyValue>> inputs,
                                     const Attrs& attrs,
                                     const std::vector<TensorMeta>& outputs) override {
    auto node = std::allocate_shared<LazyNode>(PoolAllocator<LazyNode>());
    node->op = &op;
    node->attrs = attrs;
    node->inputs.assign_moved(inputs);
    node->seq = c_.next_seq++;
    hash_node(c_, *node, outputs);
    node->num_outputs = static_cast<int>(outputs.size());
    if (!outputs.empty()) {
      node->dtype0 = outputs[0].dtype;
      node->sizes0.assign(outputs[0].sizes);
      node->strides0.assign(outputs[0].strides);
      for (size_t i = 1; i < outputs.size(); ++i)
        node->more_outputs.push_back({outputs[i].dtype, outputs[i].sizes, outputs[i].strides});
    }
    node->window = c_.window;
    node->pos = static_cast<int>(c_.window_ops.size());
    c_.window_ops.push_back(&op);
    if (op.mutates_any(attrs)) c_.effects.push_back(node);
    return node;
  }
  const std::shared_ptr<LazyValue>& input_value(const std::shared_ptr<LazyNode>& node,
                                                int input) const override {
    return node->inputs[input];
  }
  std::shared_ptr<LazyValue> output_value(const std::shared_ptr<LazyNode>& node,
                                          int output) override {
    std::shared_ptr<LazyValue> v;
    if (output == 0) {
      v = std::shared_ptr<LazyValue>(node, &node->output0);  // holds the node
    } else {
      v = std::allocate_shared<LazyValue>(PoolAllocator<LazyValue>());
      v->owner = node;
    }
    v->kind = LazyValue::Kind::output;
    v->node = node.get();
    v->index = output;
    return v;
  }
  // A pending tensor shows the layout its kernel will give it (the recorder's output strides).
  Tensor make_tensor(TensorMeta&& m) override {
    auto impl = std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>());
    impl->sizes = std::move(m.sizes);  // add_node kept a copy for the graph
    impl->strides = std::move(m.strides);
    impl->offset = m.offset;
    impl->dtype = m.dtype;
    impl->device = Device::lazy();
    c_.pending.push_back(impl);
    return Tensor(std::move(impl));
  }
  // A written tensor stands for its buffer after the node's write; its data go until sync.
  void rebind_written(const Tensor& t, const std::shared_ptr<LazyNode>& node, int /*input*/,
                      const std::shared_ptr<LazyValue>& before, int /*returned_as*/) override {
    auto w = std::allocate_shared<LazyValue>(PoolAllocator<LazyValue>());
    w->kind = LazyValue::Kind::written;
    w->node = node.get();
    w->owner = node;
    w->base = before->kind == LazyValue::Kind::written ? before->base : before;
    w->base->writes++;  // autograd's version of every tensor on this buffer moves now
    TensorImpl& impl = t.impl();
    set_tensor_value(impl, std::move(w));
    impl.storage = nullptr;  // the buffer lives on in the graph input; sync gives it back
    c_.pending.push_back(t.impl_ptr());
  }

 private:
  LazyContext& c_;
};

}  // namespace

std::vector<Tensor> record(const OpDef& op, TensorList inputs, const Attrs& attrs,
                           std::vector<TensorMeta>&& metas) {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  // Recording time is sampled (see kTimedEvery): reading the clock twice for every op cost
  // about a tenth of recording one.
  const bool timed = (c.window_ops.size() + c.timing_phase) % kTimedEvery == 0;
  Clock::time_point t0;
  if (timed) t0 = Clock::now();
  for (int i : op.mutated_inputs) {
    const bool cpu = i < static_cast<int>(inputs.size()) && inputs[i].defined() &&
                     inputs[i].device().kind() != DeviceKind::lazy && op.mutates(attrs, i);
    LATHE_CHECK(!cpu, "[", op.name, "] writes into input ", i, " ", inputs[i].shape_string(),
                ", which is on the cpu while other inputs are lazy");
  }
  std::vector<Tensor> out = LazyRecorder(c).record(op, inputs, attrs, std::move(metas));
  if (c.record_observer) c.record_observer(op, out);
  c.metrics.ops_traced++;
  if (timed) c.metrics.trace_s += kTimedEvery * seconds_since(t0);
  return out;
}

namespace {

// Graph values by (value or node, output index); device data uses index -1.
using ValueKey = std::pair<const void*, int>;

ValueKey key_of(const LazyValue* v) {
  v = v->root();
  if (v->kind == LazyValue::Kind::device_data) return {v, -1};
  return {v->node, v->index};
}

// The pending tensors still alive (each once), in the order they were made.
std::vector<std::shared_ptr<TensorImpl>> take_live(LazyContext& c) {
  std::vector<std::shared_ptr<TensorImpl>> live;
  std::unordered_set<const TensorImpl*> seen;  // used once live is long: usually a handful
  constexpr size_t kLinear = 16;
  auto first_time = [&](const TensorImpl* p) {
    if (live.size() < kLinear) {
      for (const auto& q : live)
        if (q.get() == p) return false;
      return true;
    }
    if (seen.empty())
      for (const auto& q : live) seen.insert(q.get());
    return seen.insert(p).second;
  };
  for (const auto& w : c.pending)
    if (auto p = w.lock())
      if (!p->storage && tensor_value_ptr(*p) && first_time(p.get())) live.push_back(std::move(p));
  c.pending.clear();
  return live;
}

// The nodes the live tensors and the writes need, in recording order. Nodes are marked visited
// with this sync's number (no set); the nodes of the current window are ordered by position
// (no sort), and only nodes left from an earlier window (its sync failed) need sorting by seq.
std::vector<const LazyNode*> needed_nodes(LazyContext& c,
                                          const std::vector<std::shared_ptr<TensorImpl>>& live,
                                          const std::vector<std::shared_ptr<LazyNode>>& effects) {
  const uint64_t mark = ++c.visit_mark;
  std::vector<const LazyNode*> nodes;
  std::vector<const LazyNode*> stack;
  auto visit = [&](const LazyValue* v) {
    if (!v) return;
    if (v->kind == LazyValue::Kind::written) {
      stack.push_back(v->node);
      v = v->base.get();
    }
    if (v->kind == LazyValue::Kind::output) stack.push_back(v->node);
  };
  for (const auto& p : live) visit(tensor_value_ptr(*p));
  for (const auto& n : effects) stack.push_back(n.get());
  bool foreign = false;
  while (!stack.empty()) {
    const LazyNode* n = stack.back();
    stack.pop_back();
    if (n->visit_mark == mark) continue;
    n->visit_mark = mark;
    nodes.push_back(n);
    foreign |= n->window != c.window;
    for (const auto& in : n->inputs) visit(in.get());
  }
  if (foreign) {
    std::sort(nodes.begin(), nodes.end(),
              [](const LazyNode* a, const LazyNode* b) { return a->seq < b->seq; });
    return nodes;
  }
  std::vector<const LazyNode*> by_pos(c.window_ops.size(), nullptr);
  for (const LazyNode* n : nodes) by_pos[n->pos] = n;
  size_t k = 0;
  for (const LazyNode* n : by_pos)
    if (n) by_pos[k++] = n;
  by_pos.resize(k);
  return by_pos;
}

// The cache key of this sync: the window's hash chain, which of its ops run (dead ones are
// dropped) and where each live tensor's value comes from.
uint64_t window_key(LazyContext& c, const std::vector<const LazyNode*>& nodes,
                    const std::vector<std::shared_ptr<TensorImpl>>& live) {
  ir::StructuralHasher h = c.chain;
  h.add(c.window_ops.size());
  h.add(nodes.size());
  for (const LazyNode* n : nodes) h.add(static_cast<uint64_t>(n->pos));
  h.add(live.size());
  for (const auto& p : live) h.add(source_code(c, tensor_value_ptr(*p), h));
  return h.get();
}

// The graph of `nodes` (a cache miss): device data become inputs in order of first use.
struct BuiltGraph {
  std::unique_ptr<ir::Graph> graph;
  std::vector<Tensor> args;    // the input buffers
  std::vector<int> arg_slots;  // their window slots
  std::vector<bool> module_state;  // per input: a module's state on the device (freezing.h)
};

BuiltGraph build_graph(const std::vector<const LazyNode*>& nodes,
                       const std::vector<std::shared_ptr<TensorImpl>>& live) {
  BuiltGraph b;
  b.graph = std::make_unique<ir::Graph>();
  std::map<ValueKey, ir::Value*> values;
  auto ir_value = [&](const LazyValue* v) -> ir::Value* {
    if (!v) return nullptr;
    ValueKey k = key_of(v);
    auto it = values.find(k);
    if (it != values.end()) return it->second;
    const LazyValue* root = v->root();
    LATHE_CHECK(root->kind == LazyValue::Kind::device_data,
                "[lazy] internal error: a value is used before the node that makes it");
    ir::InputSource src;
    src.index = static_cast<int>(b.args.size());
    ir::Value* iv = b.graph->add_input(ir::ValueType::of(root->buffer), src);
    b.args.push_back(root->buffer);
    b.arg_slots.push_back(root->slot);
    b.module_state.push_back(root->module_state);
    values.emplace(k, iv);
    return iv;
  };
  for (const LazyNode* n : nodes) {
    std::vector<ir::Value*> ins;
    ins.reserve(n->inputs.size());
    for (const auto& in : n->inputs) ins.push_back(ir_value(in.get()));
    std::vector<ir::ValueType> types;
    for (int i = 0; i < n->num_outputs; ++i) {
      ir::ValueType t;
      if (i == 0) {
        t.dtype = n->dtype0;
        t.sizes = Shape(n->sizes0.begin(), n->sizes0.end());
        t.strides = Shape(n->strides0.begin(), n->strides0.end());
      } else {
        const LazyNode::OutputType& o = n->more_outputs[i - 1];
        t.dtype = o.dtype;
        t.sizes = o.sizes;
        t.strides = o.strides;
      }
      types.push_back(std::move(t));
    }
    ir::Node* irn = b.graph->add_node(*n->op, std::move(ins), n->attrs, std::move(types));
    for (size_t i = 0; i < irn->outputs().size(); ++i)
      values.emplace(ValueKey{n, static_cast<int>(i)}, irn->output(i));
  }
  std::vector<ir::Value*> outs;
  for (const auto& p : live) outs.push_back(ir_value(tensor_value_ptr(*p)));
  b.graph->set_outputs(std::move(outs));
  return b;
}

std::unique_ptr<backend::Executable> compile_graph(LazyContext& c, const ir::Graph& graph,
                                                   const backend::CompileContext& context = {}) {
  auto t0 = Clock::now();
  if (!c.backend) c.backend = backend::create_backend(c.backend_name);
  std::unique_ptr<backend::Executable> exe = c.backend->compile_with_context(graph, context);
  c.metrics.compiles++;
  c.metrics.compile_s += seconds_since(t0);
  c.last_graph = graph.to_string();
  return exe;
}

// The executable to run: the entry's frozen one while the module state it froze is unchanged,
// compiled on the second call that sees the same state (freezing.h); else `exe`.
backend::Executable* frozen_or(LazyContext& c, FreezeState& s, backend::Executable* exe,
                               std::span<const Tensor> args,
                               const std::vector<const LazyNode*>& nodes,
                               const std::vector<std::shared_ptr<TensorImpl>>& live) {
  switch (freeze_step(s, args)) {
    case FreezeStep::use_unfrozen:
      return exe;
    case FreezeStep::use_frozen:
      return s.executable.get();
    case FreezeStep::dropped:
      c.metrics.freezes_dropped++;
      return exe;
    case FreezeStep::compile_frozen:
      break;
  }
  BuiltGraph b = build_graph(nodes, live);
  c.metrics.graphs_built++;
  c.metrics.graph_nodes += static_cast<int64_t>(b.graph->num_nodes());
  s.executable = compile_graph(c, *b.graph, freeze_context(s, args));
  c.metrics.freezes++;
  return s.executable.get();
}

// Runs the executable and turns the live pending tensors into device data, which frees the
// window's nodes.
void run_and_bind(LazyContext& c, backend::Executable& exe, std::span<const Tensor> args,
                  const std::vector<std::shared_ptr<TensorImpl>>& live,
                  const std::vector<const LazyNode*>& nodes) {
  auto t0 = Clock::now();
  std::vector<Tensor> results = exe.run(args, {});
  c.metrics.executions++;
  c.metrics.execute_s += seconds_since(t0);
  // Freeing the nodes walks them input by input, one pointer after another, dropping a
  // reference to each input value (parameters' values are shared by many calls' nodes), and the
  // executable has just pushed all that out of cache. Asking for the lines first, from the flat
  // list, lets the misses overlap instead of coming one at a time: the nodes, then their input
  // values' blocks (a pooled value or node: its control block just before it).
  auto prefetch_block = [](const void* object, size_t size) {
    const char* block = static_cast<const char*>(object) - 16;
    for (size_t at = 0; at < size + 16; at += 64) __builtin_prefetch(block + at, 1);
  };
  for (const LazyNode* n : nodes) prefetch_block(n, sizeof(LazyNode));
  for (const LazyNode* n : nodes)
    for (const auto& in : n->inputs)
      if (in) prefetch_block(in.get(), 64);
  for (size_t i = 0; i < live.size(); ++i) {
    TensorImpl& impl = *live[i];
    const Tensor& r = results[i];
    impl.storage = r.impl().storage;
    impl.sizes = r.sizes();
    impl.strides = r.strides();
    impl.offset = r.storage_offset();
    set_tensor_value(impl, nullptr);
  }
}

// Starts a new recording window (at every sync, whatever happens in it).
void reset_window(LazyContext& c) {
  c.window++;
  c.timing_phase = timing_phase(c.window);
  c.chain = ir::StructuralHasher();
  c.window_ops.clear();
  c.window_args.clear();
  c.window_foreign = false;
}

}  // namespace

void sync_locked(LazyContext& c) {
  struct NewWindow {
    LazyContext& c;
    ~NewWindow() { reset_window(c); }
  } new_window{c};
  auto t0 = Clock::now();
  std::vector<std::shared_ptr<TensorImpl>> live = take_live(c);
  std::vector<std::shared_ptr<LazyNode>> effects = std::move(c.effects);
  c.effects.clear();
  if (live.empty() && effects.empty()) return;
  c.metrics.syncs++;
  std::vector<const LazyNode*> nodes = needed_nodes(c, live, effects);
  c.metrics.trace_s += seconds_since(t0);

  if (c.window_foreign) {
    // Values left pending by a failed sync: no key describes them; build, compile and run.
    BuiltGraph b = build_graph(nodes, live);
    c.metrics.graphs_built++;
    c.metrics.graph_nodes += static_cast<int64_t>(b.graph->num_nodes());
    c.metrics.cache_misses++;
    std::unique_ptr<backend::Executable> exe = compile_graph(c, *b.graph);
    run_and_bind(c, *exe, b.args, live, nodes);
    return;
  }
  auto t1 = Clock::now();
  const uint64_t key = window_key(c, nodes, live);
  const uint64_t bucket = c.hash_override ? c.hash_override(key) : key;
  c.metrics.graph_hashes++;
  ExecutableCache::Lookup found = c.cache.find(bucket, key, c.window_ops);
  c.metrics.hash_s += seconds_since(t1);
  if (found.collided) c.metrics.hash_collisions++;
  const ExecutableCache::Entry* entry = found.entry;
  if (entry) {
    c.metrics.cache_hits++;
  } else {
    c.metrics.cache_misses++;
    auto t2 = Clock::now();
    BuiltGraph b = build_graph(nodes, live);
    c.metrics.graphs_built++;
    c.metrics.graph_nodes += static_cast<int64_t>(b.graph->num_nodes());
    c.metrics.trace_s += seconds_since(t2);
    ExecutableCache::Entry e;
    e.key = key;
    e.ops = c.window_ops;
    e.arg_slots = std::move(b.arg_slots);
    e.executable = compile_graph(c, *b.graph);
    if (c.backend->uses_constants())
      e.freeze = std::make_unique<FreezeState>(freeze_candidates(*b.graph, b.module_state));
    entry = &c.cache.insert(bucket, std::move(e));
  }
  std::vector<Tensor> args;
  args.reserve(entry->arg_slots.size());
  for (int slot : entry->arg_slots) args.push_back(c.window_args.at(slot));
  backend::Executable* exe = entry->executable.get();
  if (entry->freeze) exe = frozen_or(c, *entry->freeze, exe, args, nodes, live);
  run_and_bind(c, *exe, args, live, nodes);
}

void sync_hook() { lathe::sync(); }

}  // namespace lathe::lazy
