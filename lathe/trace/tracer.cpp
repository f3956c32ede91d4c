#include "lathe/trace/tracer.h"

#include <algorithm>
#include <cstring>

#include "lathe/core/grad_mode.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/shape_util.h"

namespace lathe::detail {

Tracer::Tracer(sym::ShapeEnv& env, ir::Graph& graph,
               const std::unordered_map<const TensorImpl*, std::string>* names)
    : env_(env), graph_(graph), names_(names) {}

Tracer::~Tracer() = default;

Tensor Tracer::make_fake(Shape sizes, Shape strides, int64_t offset, DType dtype, Device device,
                         bool requires_grad) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  impl->device = device;
  impl->requires_grad = requires_grad;
  fakes_.push_back(impl);
  return Tensor(std::move(impl));
}

Tensor Tracer::add_argument(const Tensor& real, int arg, const std::vector<DimChoice>& dims) {
  auto it = arg_fakes_.find(real.impl_ptr().get());
  if (it != arg_fakes_.end()) return it->second;  // the same tensor passed again: one input
  const int64_t rank = real.dim();
  Shape sizes(rank);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t hint = real.sizes()[d].expect_int();
    sym::Source src = sym::Source::size(arg, static_cast<int32_t>(d));
    sym::DimPolicy policy = sym::DimPolicy::kStatic;
    if (dims[d].kind == DimChoice::Kind::kDynamic) policy = sym::DimPolicy::kDuck;
    if (dims[d].kind == DimChoice::Kind::kMarked) {
      env_.mark_dynamic(src, dims[d].min, dims[d].max);
      policy = sym::DimPolicy::kDynamic;
    }
    sizes[d] = env_.create_symbol(hint, src, policy);
    sources_.push_back(src);
    if (sizes[d].is_symbolic() && sizes[d].expr()->is_symbol()) {
      int64_t id = sizes[d].expr()->value();
      bool bound = std::any_of(bindings_.begin(), bindings_.end(),
                               [&](const SymbolBinding& b) { return b.symbol == id; });
      if (!bound) {
        bindings_.push_back({id, arg, static_cast<int32_t>(d)});
        binding_symbols_.push_back(sizes[d].expr());
      }
    }
  }
  const Shape strides = traced_strides(arg_layout(real), sizes, real);
  Tensor fake = make_fake(sizes, strides, 0, real.dtype(), real.device(), real.requires_grad());
  ir::ValueType type{real.dtype(), real.device(), sizes, strides};
  ir::InputSource source;
  source.kind = ir::InputSource::Kind::argument;
  source.index = arg;
  source.name = "arg" + std::to_string(arg);
  ir::Value* v = graph_.add_input(type, source);
  add_root(v);
  input_origin_.push_back(arg);
  bind(fake, v);
  arg_fakes_.emplace(real.impl_ptr().get(), fake);
  return fake;
}

ir::Value* Tracer::find(const Tensor& t) const {
  auto it = values_.find(t.impl_ptr().get());
  return it == values_.end() ? nullptr : it->second;
}

ir::Value* Tracer::lift(const Tensor& t) {
  if (!t.has_storage())
    throw Error(str("[trace] tensor ", t.shape_string(),
                    " has no data and does not belong to this trace (a traced tensor kept from "
                    "an earlier call, or a lazy tensor); pass it as an argument instead"));
  // A concrete tensor reached from inside the function: lifted by reference.
  const int slot = static_cast<int>(captured_.size());
  ir::InputSource source;
  source.kind = ir::InputSource::Kind::captured;
  source.index = slot;
  if (names_) {
    auto n = names_->find(t.impl_ptr().get());
    if (n != names_->end()) source.name = n->second;
  }
  if (source.name.empty()) source.name = "const" + std::to_string(slot);
  ir::ValueType type{t.dtype(), t.device(), t.sizes(), t.strides()};
  ir::Value* v = graph_.add_input(type, source);
  captured_.push_back(t);
  made_.push_back(allocated_.count(t.impl_ptr().get()) ? 1 : 0);
  add_root(v);
  input_origin_.push_back(-1 - slot);
  bind(t, v);
  return v;
}

void Tracer::add_root(const ir::Value* input) {
  roots_[input] = static_cast<int>(input_origin_.size());
  written_.push_back(0);
}

int Tracer::root_input(const ir::Value* v) const {
  auto it = roots_.find(v);
  return it == roots_.end() ? -1 : it->second;
}

ir::Node* Tracer::add_node(const OpDef& op, std::span<ir::Value*> inputs, const Attrs& attrs,
                           const std::vector<TensorMeta>& outputs) {
  std::vector<ir::ValueType> types;
  types.reserve(outputs.size());
  for (const TensorMeta& m : outputs) types.push_back({m.dtype, m.device, m.sizes, m.strides});
  ir::Node* node = graph_.add_node(op, std::vector<ir::Value*>(inputs.begin(), inputs.end()), attrs,
                                   std::move(types));
  if (!GradMode::is_enabled()) no_grad_nodes_.insert(node);
  return node;
}

std::vector<Tensor> Tracer::record_random(const OpDef& op, TensorList inputs, const Attrs& attrs,
                                          std::vector<TensorMeta>&& metas) {
  if (op.name != "dropout" || !GradMode::is_enabled() || inputs.size() != 1 || !inputs[0].defined())
    return GraphRecorder::record(op, inputs, attrs, std::move(metas));
  recording_mask_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{recording_mask_};
  const Tensor& x = inputs[0];
  // A broadcast scalar of ones: no allocation of (possibly symbolic) size.
  Tensor ones = full({}, 1.0, x.dtype()).expand(x.sizes());
  Tensor mask = dispatch1(op, {&ones, 1}, attrs);
  return {mul(x, mask)};
}

bool Tracer::materialize(const Tensor& t, const char* what) {
  if (!t.has_storage()) return false;  // a fake: the caller's error
  const ir::Value* v = find(t);
  const bool written = v && (!v->is_input() || input_written(static_cast<size_t>(root_input(v))));
  const bool user_read = std::strcmp(what, "raw_data()") != 0;
  if (!written && !user_read) return true;
  throw DataReadWhileTracing(
      str("[trace] ", what, " reads the data of ", t.shape_string(),
          written ? ", which this trace writes in place," : "",
          " while tracing: a traced graph cannot depend on it (the value would be fixed at trace "
          "time); read it outside the compiled function, or let lathe::compile split the "
          "function at the read (CompileOptions::fullgraph = false)"));
}

void Tracer::note_view(ir::Node* const& node, int output, ir::Value* const& base) {
  // Views (and in-place results) alias input 0: they keep its root.
  if (int r = root_input(base); r >= 0) roots_[node->output(output)] = r;
}

void Tracer::rebind_written(const Tensor& t, ir::Node* const& node, int /*input*/,
                            ir::Value* const& before, int returned_as) {
  ++num_writes_;
  if (int r = root_input(before); r >= 0) written_[r] = 1;
  // In-place op: eager returns the input itself. Later reads of it see the new value.
  if (returned_as >= 0) bind(t, node->output(returned_as));
}

}  // namespace lathe::detail
