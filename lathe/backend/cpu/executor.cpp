#include "lathe/backend/cpu/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "lathe/backend/cpu/cpu_options.h"
#include "lathe/backend/cpu/executor_profile.h"
#include "lathe/backend/cpu/kernel_table.h"
#include "lathe/backend/cpu/memory_plan.h"
#include "lathe/backend/symbolic_attrs.h"

namespace lathe::backend::cpu {
namespace {

struct Step {
  const OpDef* op;
  const CpuKernelInfo* cpu = nullptr;  // the op's entry in the cpu kernel table, or null
  int in_place_input = -1;             // CpuKernelInfo::in_place_input
  Attrs attrs;
  std::vector<SymbolicAttr> symbolic;  // empty for most nodes
  std::vector<int> inputs;             // slot per input, -1 for an undefined optional tensor
  std::vector<int> outputs;            // slot per output
  std::vector<int> release;            // slots whose last use is this step
  std::vector<int> mutated;            // input positions the op writes (their version is bumped)
  std::string name;                    // "%5 (conv2d)" for errors
};

struct InputCheck {
  DType dtype;
  size_t rank;
  std::string source;
};

// Where a value lives in a plan.
struct SlotPlan {
  bool in_arena = false;
  size_t byte_offset = 0;  // in the arena
  Shape sizes, strides;    // the layout the allocating kernel gave it
  DType dtype = DType::f32;
};

struct StepPlan {
  std::vector<TensorMeta> metas;  // the shape rule's result for this shape
  Attrs attrs;                    // symbols substituted (used when the step has symbolic attrs)
  bool use_out = false;           // run CpuKernelInfo::out_kernel into arena / fresh outputs
  bool has_view_meta = false;     // some output is a view: its offset follows input 0's
  int64_t input0_offset = 0;      // input 0's storage offset when the metas were recorded
  bool skip = false;              // a concat whose inputs were written into its slices
};

// The per-call state of one run: the arena and the slot tensors viewing it.
struct Arena {
  std::shared_ptr<Storage> storage;
  std::vector<Tensor> slots;
  std::vector<Tensor> args;
  std::vector<Tensor> outs;
  std::vector<TensorMeta> metas;  // view steps' metas, adjusted per call
};

struct Plan {
  std::vector<int64_t> key;
  std::vector<StepPlan> steps;
  std::vector<SlotPlan> slots;
  size_t arena_bytes = 0;
  ExecutorStats stats;
  std::mutex mu;  // guards free_arenas
  std::vector<std::unique_ptr<Arena>> free_arenas;
};

constexpr size_t kMaxPlans = 16;
constexpr size_t kMaxFreeArenas = 4;

// LATHE_PROFILE=1: every planned call times each step; when the executable goes away it
// prints where the time went, by op and by the slowest steps (to stderr). LATHE_PROFILE=steps
// also lists every step in order with its time, output sizes and attributes.
bool profile_enabled() { return options().profile != ProfileMode::off; }

bool profile_steps() { return options().profile == ProfileMode::steps; }

class Executor final : public PlannedExecutable {
 public:
  ~Executor() override {
    if (profile_calls_ > 0) print_profile();
  }

  explicit Executor(const ir::Graph& g) {
    std::unordered_map<const ir::Value*, int> slot;
    auto slot_of = [&](const ir::Value* v) {
      auto it = slot.find(v);
      LATHE_CHECK(it != slot.end(), "[cpu.executor] value %", v->id(),
                  " is used but never defined (run ir::Graph::verify)");
      return it->second;
    };
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const ir::Value* v = g.inputs()[i];
      slot.emplace(v, num_slots_++);
      inputs_.push_back(
          {v->type().dtype, v->type().sizes.size(), g.input_sources()[i].to_string()});
    }
    for (const ir::Node* n : g.nodes()) {
      Step s;
      s.op = &n->op();
      s.cpu = cpu_kernel(s.op);
      if (s.cpu) s.in_place_input = s.cpu->in_place_input;
      s.attrs = n->attrs();
      s.name = lathe::detail::str(n->name(), " (", n->op().name, ")");
      s.symbolic = find_symbolic_attrs(s.attrs);
      for (const ir::Value* v : n->inputs()) s.inputs.push_back(v ? slot_of(v) : -1);
      for (int i : s.op->mutated_inputs)
        if (i < static_cast<int>(s.inputs.size()) && s.inputs[i] >= 0 && s.op->mutates(s.attrs, i))
          s.mutated.push_back(i);
      for (const ir::Value* v : n->outputs()) {
        slot.emplace(v, num_slots_);
        s.outputs.push_back(num_slots_++);
      }
      steps_.push_back(std::move(s));
    }
    for (const ir::Value* v : g.outputs()) outputs_.push_back(slot_of(v));
    profile_ = profile_enabled();
    if (profile_) profile_ns_.assign(steps_.size(), 0);

    // Liveness per slot: the last step reading it (or making it, when nobody reads it).
    last_use_.assign(num_slots_, -1);
    for (size_t k = 0; k < steps_.size(); ++k) {
      for (int o : steps_[k].outputs) last_use_[o] = static_cast<int>(k);
      for (int i : steps_[k].inputs)
        if (i >= 0) last_use_[i] = static_cast<int>(k);
    }
    pinned_.assign(num_slots_, false);
    for (size_t i = 0; i < inputs_.size(); ++i) pinned_[i] = true;
    for (int o : outputs_) pinned_[o] = true;
    for (int s = 0; s < num_slots_; ++s)
      if (!pinned_[s] && last_use_[s] >= 0) steps_[last_use_[s]].release.push_back(s);
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues symbols) override {
    LATHE_CHECK(inputs.size() == inputs_.size(), "[cpu.executor] the graph takes ", inputs_.size(),
                " inputs, got ", inputs.size());
    std::vector<int64_t> key(symbols.begin(), symbols.end());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      const InputCheck& c = inputs_[i];
      LATHE_CHECK(t.defined() && t.has_storage(), "[cpu.executor] input ", i, " (", c.source,
                  ") has no data");
      LATHE_CHECK(t.dtype() == c.dtype && static_cast<size_t>(t.dim()) == c.rank,
                  "[cpu.executor] input ", i, " (", c.source, ") is ", t.shape_string(),
                  ", the graph expects ", dtype_name(c.dtype), " with ", c.rank, " dims");
      for (int64_t d = 0; d < t.dim(); ++d) {
        key.push_back(t.sizes()[d].expect_int());
        key.push_back(t.strides()[d].expect_int());
      }
    }
    std::shared_ptr<Plan> plan = find_plan(key);
    if (!plan) return record(inputs, symbols, std::move(key));
    return run_planned(*plan, inputs);
  }

  ExecutorStats stats() const override {
    std::lock_guard<std::mutex> lock(plans_mu_);
    ExecutorStats s;
    if (!plans_.empty()) s = plans_.back()->stats;
    s.plans = plans_.size();
    s.steps = steps_.size();
    return s;
  }

 private:
  std::shared_ptr<Plan> find_plan(const std::vector<int64_t>& key) const {
    std::lock_guard<std::mutex> lock(plans_mu_);
    for (const std::shared_ptr<Plan>& p : plans_)
      if (p->key == key) return p;
    return nullptr;
  }

  Error node_error(const Step& s, const Error& e) const {
    return Error(lathe::detail::str("[cpu.executor] node ", s.name, ": ", e.what()));
  }

  // First call for a shape: runs every step with the allocating kernels (as the interpreter
  // does, but keeping every value until the end so storages can be told apart), then plans.
  std::vector<Tensor> record(std::span<const Tensor> inputs, SymbolValues symbols,
                             std::vector<int64_t> key) {
    auto plan = std::make_shared<Plan>();
    plan->key = std::move(key);
    plan->steps.resize(steps_.size());
    std::vector<Tensor> slots(num_slots_);
    for (size_t i = 0; i < inputs.size(); ++i) slots[i] = inputs[i];
    // Union-find over slots: a value's root is the slot whose buffer it lives in.
    std::vector<int> parent(num_slots_);
    for (int s = 0; s < num_slots_; ++s) parent[s] = s;
    std::unordered_map<const Storage*, int> storage_root;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Storage* st = inputs[i].impl().storage.get();
      auto [it, fresh] = storage_root.emplace(st, static_cast<int>(i));
      if (!fresh) parent[i] = it->second;
    }
    std::vector<bool> fresh(num_slots_, false);
    std::vector<Tensor> args;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& s = steps_[k];
      StepPlan& sp = plan->steps[k];
      args.clear();
      for (int i : s.inputs) args.push_back(i >= 0 ? slots[i] : Tensor());
      try {
        sp.attrs = s.symbolic.empty() ? Attrs() : substitute_symbols(s.attrs, s.symbolic, symbols);
        const Attrs& attrs = s.symbolic.empty() ? s.attrs : sp.attrs;
        sp.metas = s.op->shape(args, attrs);
        std::vector<Tensor> outs = run_eager_kernel(*s.op, args, attrs, sp.metas);
        LATHE_CHECK(outs.size() == s.outputs.size(), "the kernel returned ", outs.size(),
                    " outputs, the node has ", s.outputs.size());
        for (int i : s.mutated) args[i].bump_version();
        for (size_t o = 0; o < outs.size(); ++o) slots[s.outputs[o]] = std::move(outs[o]);
      } catch (const Error& e) {
        throw node_error(s, e);
      }
      for (const TensorMeta& m : sp.metas) sp.has_view_meta |= m.is_view;
      if (sp.has_view_meta && !args.empty() && args[0].defined())
        sp.input0_offset = args[0].storage_offset();
      bool all_fresh = true;
      for (int o : s.outputs) {
        const Tensor& t = slots[o];
        const Storage* st = t.has_storage() ? t.impl().storage.get() : nullptr;
        auto it = st ? storage_root.find(st) : storage_root.end();
        if (it != storage_root.end()) {
          parent[o] = find_root(parent, it->second);
          all_fresh = false;
        } else {
          if (st) storage_root.emplace(st, o);
          fresh[o] = st && t.storage_offset() == 0;
          all_fresh &= fresh[o];
        }
      }
      sp.use_out = all_fresh && s.cpu && s.cpu->out_kernel && !runs_widened(*s.op, args, sp.metas);
    }
    std::vector<Tensor> result;
    result.reserve(outputs_.size());
    for (int o : outputs_) result.push_back(slots[o]);
    build_plan(*plan, slots, parent, fresh);
    {
      std::lock_guard<std::mutex> lock(plans_mu_);
      bool present = false;
      for (const std::shared_ptr<Plan>& p : plans_) present |= p->key == plan->key;
      if (!present) {
        if (plans_.size() >= kMaxPlans) plans_.erase(plans_.begin());
        plans_.push_back(std::move(plan));
      }
    }
    return result;
  }

  void build_plan(Plan& plan, const std::vector<Tensor>& slots, std::vector<int>& parent,
                  const std::vector<bool>& fresh) const {
    const int n = num_slots_;
    // A buffer may live in the arena when an out kernel writes it and nothing the caller sees
    // (graph inputs and outputs, and their views) lives in it.
    std::vector<bool> eligible(n, false);
    for (size_t k = 0; k < steps_.size(); ++k)
      if (plan.steps[k].use_out)
        for (int o : steps_[k].outputs) eligible[o] = fresh[o];
    for (int s = 0; s < n; ++s)
      if (pinned_[s]) eligible[find_root(parent, s)] = false;
    // The lifetime of each buffer spans every value living in it.
    std::vector<int> first(n, -1), last(n, -1);
    for (size_t k = 0; k < steps_.size(); ++k)
      for (int o : steps_[k].outputs) first[o] = static_cast<int>(k);
    for (int s = 0; s < n; ++s) {
      int r = find_root(parent, s);
      last[r] = std::max(last[r], last_use_[s]);
    }
    std::vector<size_t> inner_offset(n, 0);  // bytes into the buffer (concat inputs)
    const size_t concats_in_place =
        place_concat_inputs(plan, slots, parent, eligible, fresh, first, last, inner_offset);
    // In place: a pointwise step writes over an input buffer that dies at it (a fused conv or
    // linear over its residual, CpuKernelInfo::in_place_input), when the input is that buffer
    // itself (no view) with the output's exact layout, and no other input of the step reads it.
    // whole[s]: s is its buffer's full value (the buffer's own, or written in place over it).
    std::vector<bool> whole(n, false);
    for (int s = 0; s < n; ++s) whole[s] = eligible[s] && find_root(parent, s) == s;
    size_t in_place = 0;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& s = steps_[k];
      const bool pointwise = s.op->category == OpCategory::pointwise;
      if (!plan.steps[k].use_out || (!pointwise && s.in_place_input < 0) || s.outputs.size() != 1)
        continue;
      const int o = s.outputs[0];
      if (!eligible[o] || find_root(parent, o) != o) continue;
      const Tensor& out = slots[o];
      for (size_t j = 0; j < s.inputs.size(); ++j) {
        const int i = s.inputs[j];
        if (!pointwise && static_cast<int>(j) != s.in_place_input) continue;
        if (i < 0 || !whole[i]) continue;
        const int r = find_root(parent, i);
        if (last[r] != static_cast<int>(k)) continue;
        const Tensor& in = slots[i];
        if (in.dtype() != out.dtype() || in.sizes() != out.sizes() || in.strides() != out.strides())
          continue;
        // Another input position reading the buffer: a pointwise step reads each element before
        // writing it, so the same slot twice is fine there; a convolution reading the buffer as
        // its x too (conv(y) + y) would read what it already overwrote.
        bool read_elsewhere = false;
        for (size_t p = 0; p < s.inputs.size(); ++p) {
          const int q = s.inputs[p];
          if (p == j || q < 0 || (pointwise && q == i)) continue;
          read_elsewhere |= find_root(parent, q) == r;
        }
        if (read_elsewhere) continue;
        parent[o] = r;
        last[r] = last[o];
        whole[o] = true;
        ++in_place;
        break;
      }
    }
    place_buffers(plan, slots, parent, eligible, first, last, inner_offset);
    plan.stats.in_place = in_place;
    plan.stats.concats_in_place = concats_in_place;
  }

  // Places the arena buffers (the roots of eligible slots) and describes every slot an out step
  // writes: in the arena at its offset, or allocated per call in the allocating kernel's layout.
  void place_buffers(Plan& plan, const std::vector<Tensor>& slots, std::vector<int>& parent,
                     const std::vector<bool>& eligible, const std::vector<int>& first,
                     const std::vector<int>& last, const std::vector<size_t>& inner_offset) const {
    const int n = num_slots_;
    // Place the buffers.
    std::vector<int> buffer_slot;
    std::vector<BufferLifetime> buffers;
    std::vector<int> buffer_of(n, -1);
    size_t unplanned = 0;
    for (int s = 0; s < n; ++s) {
      if (!eligible[s] || find_root(parent, s) != s) continue;
      buffer_of[s] = static_cast<int>(buffers.size());
      buffer_slot.push_back(s);
      buffers.push_back({extent_bytes(slots[s]), first[s], last[s]});
    }
    ArenaLayout layout = plan_arena(buffers);
    plan.arena_bytes = layout.bytes;
    plan.slots.resize(n);
    size_t arena_values = 0;
    for (int s = 0; s < n; ++s) {
      // Arena slots: the buffers' own values and the outputs written in place over them.
      if (!eligible[s]) continue;
      int b = buffer_of[find_root(parent, s)];
      if (b < 0) continue;
      SlotPlan& p = plan.slots[s];
      p.in_arena = true;
      p.byte_offset = layout.offsets[b] + inner_offset[s];
      p.sizes = slots[s].sizes();
      p.strides = slots[s].strides();
      p.dtype = slots[s].dtype();
      unplanned += extent_bytes(slots[s]);
      ++arena_values;
    }
    // Outputs of out steps that do not live in the arena are allocated per call, in the layout
    // the allocating kernel gave them.
    for (size_t k = 0; k < steps_.size(); ++k) {
      if (!plan.steps[k].use_out) continue;
      for (int o : steps_[k].outputs) {
        SlotPlan& p = plan.slots[o];
        if (p.in_arena) continue;
        p.sizes = slots[o].sizes();
        p.strides = slots[o].strides();
        p.dtype = slots[o].dtype();
      }
    }
    ExecutorStats& st = plan.stats;
    for (const StepPlan& sp : plan.steps) st.out_steps += sp.use_out;
    st.arena_values = arena_values;
    st.arena_bytes = layout.bytes;
    st.unplanned_bytes = unplanned;
  }

  // Concat without a copy: when every input of a `cat` is made by an out step just for it (the
  // cat is its last use) and its slice of the cat's buffer has the input's own layout (equal
  // strides on every dim of size > 1: a channel concat of blocked values at batch 1, say), the
  // producers write straight into the slices and the cat step is skipped. Else the cat copies.
  // Returns the number of concats placed so.
  size_t place_concat_inputs(Plan& plan, const std::vector<Tensor>& slots, std::vector<int>& parent,
                             const std::vector<bool>& eligible, const std::vector<bool>& fresh,
                             std::vector<int>& first, std::vector<int>& last,
                             std::vector<size_t>& inner_offset) const {
    std::vector<int> made_by(num_slots_, -1);
    for (size_t k = 0; k < steps_.size(); ++k)
      for (int o : steps_[k].outputs) made_by[o] = static_cast<int>(k);
    std::vector<bool> claimed(num_slots_, false);
    size_t placed = 0;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& s = steps_[k];
      if (s.op->name != "cat" || !plan.steps[k].use_out || s.outputs.size() != 1) continue;
      const int o = s.outputs[0];
      if (!eligible[o] || find_root(parent, o) != o) continue;
      const Tensor& out = slots[o];
      int64_t d = s.attrs.get_int("dim");
      if (d < 0) d += out.dim();
      std::vector<size_t> offsets;
      int64_t start = 0;
      bool ok = !s.inputs.empty();
      for (int i : s.inputs) {
        if (!ok) break;
        ok = i >= 0 && !claimed[i] && eligible[i] && fresh[i] && find_root(parent, i) == i &&
             made_by[i] >= 0 && plan.steps[made_by[i]].use_out &&
             steps_[made_by[i]].outputs.size() == 1 && last[i] == static_cast<int>(k);
        if (!ok) break;
        const Tensor& in = slots[i];
        ok = in.dtype() == out.dtype() && in.dim() == out.dim();
        for (int64_t e = 0; ok && e < in.dim(); ++e) {
          const int64_t size = in.sizes()[e].expect_int();
          ok = (e == d || size == out.sizes()[e].expect_int()) &&
               (size == 1 || in.strides()[e].expect_int() == out.strides()[e].expect_int());
        }
        offsets.push_back(static_cast<size_t>(start * out.strides()[d].expect_int()) *
                          itemsize(out.dtype()));
        start += in.sizes()[d].expect_int();
        claimed[i] = true;
      }
      if (!ok) {
        for (int i : s.inputs)
          if (i >= 0) claimed[i] = false;
        continue;
      }
      for (size_t j = 0; j < s.inputs.size(); ++j) {
        const int i = s.inputs[j];
        parent[i] = o;
        inner_offset[i] = offsets[j];
        first[o] = std::min(first[o], first[i]);
        last[o] = std::max(last[o], last[i]);
      }
      plan.steps[k].skip = true;
      ++placed;
    }
    return placed;
  }

  std::unique_ptr<Arena> take_arena(Plan& plan) const {
    {
      std::lock_guard<std::mutex> lock(plan.mu);
      if (!plan.free_arenas.empty()) {
        std::unique_ptr<Arena> a = std::move(plan.free_arenas.back());
        plan.free_arenas.pop_back();
        return a;
      }
    }
    auto a = std::make_unique<Arena>();
    a->storage = Storage::allocate(std::max<size_t>(plan.arena_bytes, 1));
    a->slots.resize(num_slots_);
    for (int s = 0; s < num_slots_; ++s) {
      const SlotPlan& p = plan.slots[s];
      if (!p.in_arena) continue;
      auto impl = std::make_shared<TensorImpl>();
      impl->storage = a->storage;
      impl->sizes = p.sizes;
      impl->strides = p.strides;
      impl->offset = static_cast<int64_t>(p.byte_offset / itemsize(p.dtype));
      impl->dtype = p.dtype;
      a->slots[s] = Tensor(std::move(impl));
    }
    return a;
  }

  void give_back(Plan& plan, std::unique_ptr<Arena> a) const {
    std::lock_guard<std::mutex> lock(plan.mu);
    if (plan.free_arenas.size() < kMaxFreeArenas) plan.free_arenas.push_back(std::move(a));
  }

  void print_profile() const {
    std::vector<StepProfile> rows(steps_.size());
    for (size_t k = 0; k < steps_.size(); ++k) {
      rows[k] = {steps_[k].op->name, steps_[k].name, "", steps_[k].attrs.to_string(),
                 profile_ns_[k]};
      if (!plans_.empty() && !plans_.back()->steps[k].metas.empty())
        rows[k].shape = lathe::detail::str(plans_.back()->steps[k].metas[0].sizes);
    }
    print_step_profile(rows, profile_calls_, profile_steps());
  }

  std::vector<Tensor> run_planned(Plan& plan, std::span<const Tensor> inputs) const {
    using ProfileClock = std::chrono::steady_clock;
    ProfileClock::time_point step_start;
    if (profile_) ++profile_calls_;
    std::unique_ptr<Arena> arena = take_arena(plan);
    std::vector<Tensor>& slots = arena->slots;
    std::vector<Tensor>& args = arena->args;
    std::vector<Tensor>& outs = arena->outs;
    for (size_t i = 0; i < inputs.size(); ++i) slots[i] = inputs[i];
    // Cached derived data (reordered weights) is keyed on a storage's version: a value the arena
    // held before must not be mistaken for this call's.
    arena->storage->bump_version();
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& s = steps_[k];
      const StepPlan& sp = plan.steps[k];
      args.clear();
      for (int i : s.inputs) args.push_back(i >= 0 ? slots[i] : Tensor());
      const Attrs& attrs = s.symbolic.empty() ? s.attrs : sp.attrs;
      const std::vector<TensorMeta>* metas = &sp.metas;
      if (profile_) step_start = ProfileClock::now();
      if (sp.skip) {
        for (int r : s.release)
          if (!plan.slots[r].in_arena) slots[r] = Tensor();
        continue;
      }
      try {
        if (sp.has_view_meta && !args.empty() && args[0].defined()) {
          // A view's offset is absolute in input 0's storage, which may now be the arena.
          arena->metas = sp.metas;
          const int64_t delta = args[0].storage_offset() - sp.input0_offset;
          for (TensorMeta& m : arena->metas)
            if (m.is_view) m.offset += delta;
          metas = &arena->metas;
        }
        if (sp.use_out) {
          outs.resize(s.outputs.size());
          for (size_t o = 0; o < s.outputs.size(); ++o) {
            const SlotPlan& p = plan.slots[s.outputs[o]];
            outs[o] = p.in_arena ? slots[s.outputs[o]] : empty_strided(p.sizes, p.strides, p.dtype);
          }
          s.cpu->out_kernel(args, attrs, *metas, outs);
          for (size_t o = 0; o < s.outputs.size(); ++o)
            if (!plan.slots[s.outputs[o]].in_arena) slots[s.outputs[o]] = std::move(outs[o]);
          arena->storage->bump_version();
        } else {
          std::vector<Tensor> res = run_eager_kernel(*s.op, args, attrs, *metas);
          LATHE_CHECK(res.size() == s.outputs.size(), "the kernel returned ", res.size(),
                      " outputs, the node has ", s.outputs.size());
          for (size_t o = 0; o < res.size(); ++o) slots[s.outputs[o]] = std::move(res[o]);
        }
        for (int i : s.mutated) args[i].bump_version();
      } catch (const Error& e) {
        throw node_error(s, e);
      }
      for (int r : s.release)
        if (!plan.slots[r].in_arena) slots[r] = Tensor();
      if (profile_)
        profile_ns_[k] +=
            std::chrono::duration_cast<std::chrono::nanoseconds>(ProfileClock::now() - step_start)
                .count();
    }
    std::vector<Tensor> result;
    result.reserve(outputs_.size());
    for (int o : outputs_) result.push_back(slots[o]);
    // Drop the references to the caller's tensors and this call's results.
    for (int s = 0; s < num_slots_; ++s)
      if (!plan.slots[s].in_arena) slots[s] = Tensor();
    args.clear();
    outs.clear();
    give_back(plan, std::move(arena));
    return result;
  }

  int num_slots_ = 0;
  std::vector<InputCheck> inputs_;
  std::vector<Step> steps_;
  std::vector<int> outputs_;
  std::vector<int> last_use_;
  std::vector<bool> pinned_;
  mutable std::mutex plans_mu_;
  std::vector<std::shared_ptr<Plan>> plans_;
  // LATHE_PROFILE: per-step wall time summed over planned calls (not thread safe: a profile
  // of concurrent calls mixes them, which is acceptable for a diagnostic).
  bool profile_ = false;
  mutable int64_t profile_calls_ = 0;
  mutable std::vector<int64_t> profile_ns_;
};

}  // namespace

std::unique_ptr<PlannedExecutable> make_planned_executable(const ir::Graph& graph) {
  return std::make_unique<Executor>(graph);
}

}  // namespace lathe::backend::cpu
