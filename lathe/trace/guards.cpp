#include "lathe/trace/guards.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <sstream>
#include <type_traits>

#include "lathe/core/grad_mode.h"
#include "lathe/nn/module.h"

namespace lathe::detail {

namespace {

// Real tensors hold inline SymInts, whose representation is the int64 value itself, so the guard
// program can read sizes and strides in place.
static_assert(sizeof(SymInt) == sizeof(int64_t) && std::is_standard_layout_v<SymInt>);
const int64_t* raw_ints(const Shape& s) { return reinterpret_cast<const int64_t*>(s.data()); }

EntryGuards::ArgKind kind_of(const Arg& a) { return static_cast<EntryGuards::ArgKind>(a.index()); }

const char* kind_name(EntryGuards::ArgKind k) {
  switch (k) {
    case EntryGuards::ArgKind::kTensor:
      return "Tensor";
    case EntryGuards::ArgKind::kInt:
      return "int";
    case EntryGuards::ArgKind::kDouble:
      return "double";
    case EntryGuards::ArgKind::kBool:
      return "bool";
  }
  return "?";
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kContiguous:
      return "contiguous";
    case Layout::kChannelsLast:
      return "channels_last";
    case Layout::kDense:
      return "dense";
    case Layout::kStrided:
      return "strided";
  }
  return "?";
}

// "dense in dim order [1,0] (innermost first)"
std::string dense_order_string(const std::vector<int8_t>& order) {
  std::ostringstream os;
  os << "dense in dim order [";
  for (size_t i = 0; i < order.size(); ++i) os << (i ? "," : "") << int{order[i]};
  os << "] (innermost first)";
  return os.str();
}

std::string scalar_string(const Arg& a) {
  std::ostringstream os;
  if (auto* i = std::get_if<int64_t>(&a)) os << *i;
  if (auto* d = std::get_if<double>(&a)) os << *d;
  if (auto* b = std::get_if<bool>(&a)) os << (*b ? "true" : "false");
  return os.str();
}

bool same_scalar(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (auto* d = std::get_if<double>(&a)) {
    // Bitwise, so NaN hits and 0.0 / -0.0 are told apart.
    double e = std::get<double>(b);
    return std::memcmp(d, &e, sizeof(double)) == 0;
  }
  if (auto* i = std::get_if<int64_t>(&a)) return *i == std::get<int64_t>(b);
  if (auto* v = std::get_if<bool>(&a)) return *v == std::get<bool>(b);
  return false;  // tensors are not scalars
}

const Tensor& tensor_arg(const std::vector<Arg>& args, int32_t i) {
  return *std::get_if<Tensor>(&args[i]);
}

int32_t first_alias(const std::vector<Arg>& args, size_t i) {
  const Tensor* t = std::get_if<Tensor>(&args[i]);
  if (!t || !t->defined()) return -1;
  for (size_t j = 0; j < i; ++j) {
    const Tensor* u = std::get_if<Tensor>(&args[j]);
    if (u && u->is_same(*t)) return static_cast<int32_t>(j);
  }
  return -1;
}

bool layout_matches(const EntryGuards::TensorCheck& c, const Tensor& t) {
  // Dense in the traced order: the traced strides (products of sizes) are the call's strides.
  if (c.layout == Layout::kDense) return is_dense_in_order(t, c.order.data());
  if (c.layout == Layout::kStrided) {
    for (int32_t d = 0; d < c.rank; ++d)
      if (t.strides()[d].maybe_int() != c.strides[d]) return false;
    return layout_of(t) == Layout::kStrided;
  }
  return layout_of(t) == c.layout;
}

// True when `t` may stand in for the tensor a slot held while tracing.
bool same_type(const EntryGuards::SlotCheck& c, const Tensor& t) {
  if (!t.defined() || t.dtype() != c.dtype || !(t.device() == c.device) ||
      t.dim() != static_cast<int64_t>(c.sizes.size()))
    return false;
  for (size_t d = 0; d < c.sizes.size(); ++d)
    if (t.sizes()[d].maybe_int() != c.sizes[d] || t.strides()[d].maybe_int() != c.strides[d])
      return false;
  return true;
}

bool slot_passes(const EntryGuards::SlotCheck& c) {
  if (c.slot->impl_ptr().get() == c.traced.get()) return true;
  return c.may_rebind && same_type(c, *c.slot);
}

bool frozen_passes(const EntryGuards::FrozenCheck& c) {
  // A lazy tensor written since (pending: no storage until sync) or given a new buffer fails.
  const Tensor& t = *c.holder;
  const std::shared_ptr<Storage>& st = t.impl().storage;
  return t.impl_ptr() == c.traced && st.get() == c.storage && st->version() == c.version;
}

std::string describe(const Tensor& t) { return t.defined() ? t.shape_string() : "undefined"; }

// The bytes [first, last) a tensor with elements spans in its storage.
std::pair<int64_t, int64_t> byte_extent(const Tensor& t) {
  int64_t lo = t.storage_offset(), hi = lo;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t step = (t.sizes()[d].expect_int() - 1) * t.strides()[d].expect_int();
    (step > 0 ? hi : lo) += step;
  }
  const int64_t item = static_cast<int64_t>(itemsize(t.dtype()));
  return {lo * item, (hi + 1) * item};
}

}  // namespace

std::pair<int32_t, int32_t> EntryGuards::shared_memory(const std::vector<Arg>& args) const {
  if (written_args_.empty()) return {-1, -1};
  // Sorted by storage and first byte, the ranges a range meets are the earlier ones of its
  // storage still open at its first byte: n log n for calls over many parameters (an optimizer
  // step writes them all), the open list staying short unless arguments do share memory.
  struct Range {
    const Storage* storage;
    int64_t first, last;
    int32_t arg;
    bool written;
    const TensorImpl* impl;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor* t = std::get_if<Tensor>(&args[i]);
    if (!t || !t->defined() || !t->has_storage() || t->numel() == 0) continue;
    auto [first, last] = byte_extent(*t);
    const bool written = std::find(written_args_.begin(), written_args_.end(),
                                   static_cast<int32_t>(i)) != written_args_.end();
    ranges.push_back({t->impl().storage.get(), first, last, static_cast<int32_t>(i), written,
                      t->impl_ptr().get()});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& x, const Range& y) {
    if (x.storage != y.storage) return std::less<const Storage*>()(x.storage, y.storage);
    return x.first < y.first;
  });
  std::vector<const Range*> open;
  for (const Range& r : ranges) {
    std::erase_if(open,
                  [&](const Range* o) { return o->storage != r.storage || o->last <= r.first; });
    for (const Range* o : open)
      // Only a write makes sharing matter; the same tensor passed twice is the alias guard's
      // (the trace knows it is one).
      if (o->impl != r.impl && (o->written || r.written))
        return {std::min(o->arg, r.arg), std::max(o->arg, r.arg)};
    open.push_back(&r);
  }
  return {-1, -1};
}

void make_arg_views(const std::vector<Arg>& args, sym::ArgView* out) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Tensor* t = std::get_if<Tensor>(&args[i]); t && t->defined()) {
      out[i] = sym::ArgView::tensor(raw_ints(t->sizes()), raw_ints(t->strides()), t->dim());
    } else if (const int64_t* v = std::get_if<int64_t>(&args[i])) {
      out[i] = sym::ArgView::integer(*v);
    } else {
      out[i] = sym::ArgView{};
    }
  }
}

namespace {
// "off" or the autocast dtype ("bf16").
std::string autocast_string(const detail::AutocastState& s) {
  return s.enabled ? dtype_name(s.dtype) : "off";
}
}  // namespace

void EntryGuards::record_call(const std::vector<Arg>& args) {
  grad_enabled_ = GradMode::is_enabled();
  autocast_ = detail::autocast_state();
  for (size_t i = 0; i < args.size(); ++i) {
    kinds_.push_back(kind_of(args[i]));
    alias_of_.push_back(first_alias(args, i));
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      LATHE_CHECK(t->defined(), "[compile] argument ", i, " is an undefined tensor");
      TensorCheck c;
      c.arg = static_cast<int32_t>(i);
      c.dtype = t->dtype();
      c.device = t->device();
      c.rank = static_cast<int32_t>(t->dim());
      c.requires_grad = t->requires_grad();
      const ArgLayout layout = arg_layout(*t);  // the rule the tracer traced it with
      c.layout = layout.kind;
      if (c.layout == Layout::kStrided) c.strides = t->int_strides();
      if (c.layout == Layout::kDense) c.order = layout.order_vector();
      tensors_.push_back(std::move(c));
    } else {
      scalars_.emplace_back(static_cast<int32_t>(i), args[i]);
    }
  }
}

void EntryGuards::record_module(std::shared_ptr<nn::Module> module, std::string path) {
  ModuleCheck c;
  c.module = module.get();
  c.version = module->structure_version();
  c.training = module->is_training();
  c.path = std::move(path);
  modules_.push_back(std::move(c));
  keep_alive_.push_back(std::move(module));
}

GuardFailure EntryGuards::check(const std::vector<Arg>& args,
                                std::span<const sym::ArgView> views) const {
  using S = GuardFailure::Stage;
  if (args.size() != kinds_.size()) return {S::kArgCount, 0};
  for (size_t i = 0; i < args.size(); ++i)
    if (kind_of(args[i]) != kinds_[i]) return {S::kArgKind, static_cast<int32_t>(i)};
  for (const TensorCheck& c : tensors_) {
    const Tensor& t = tensor_arg(args, c.arg);
    if (!t.defined() || t.dtype() != c.dtype || !(t.device() == c.device) || t.dim() != c.rank ||
        t.requires_grad() != c.requires_grad || !layout_matches(c, t))
      return {S::kTensor, c.arg};
  }
  for (size_t i = 0; i < args.size(); ++i)
    if (kinds_[i] == ArgKind::kTensor && first_alias(args, i) != alias_of_[i])
      return {S::kAlias, static_cast<int32_t>(i)};
  for (const auto& [i, v] : scalars_)
    if (!same_scalar(args[i], v)) return {S::kScalar, i};
  if (GradMode::is_enabled() != grad_enabled_) return {S::kGradMode, 0};
  if (!(detail::autocast_state() == autocast_)) return {S::kAutocast, 0};
  for (size_t i = 0; i < modules_.size(); ++i) {
    const ModuleCheck& m = modules_[i];
    if (m.module->structure_version() != m.version || m.module->is_training() != m.training)
      return {S::kModule, static_cast<int32_t>(i)};
  }
  for (size_t i = 0; i < slots_.size(); ++i)
    if (!slot_passes(slots_[i])) return {S::kSlot, static_cast<int32_t>(i)};
  for (size_t i = 0; i < capture_grads_.size(); ++i)
    if (capture_grads_[i].holder->requires_grad() != capture_grads_[i].requires_grad)
      return {S::kCaptureGrad, static_cast<int32_t>(i)};
  for (size_t i = 0; i < frozen_.size(); ++i)
    if (!frozen_passes(frozen_[i])) return {S::kFrozen, static_cast<int32_t>(i)};
  sym::GuardCheck r = program_.check(views);
  if (!r.ok()) return {S::kProgram, r.failed};
  if (auto [i, j] = shared_memory(args); i >= 0) return {S::kOverlap, j};
  return {};
}

bool EntryGuards::frozen_stale() const {
  for (const FrozenCheck& c : frozen_)
    if (!frozen_passes(c)) return true;
  return false;
}

bool EntryGuards::modules_in_eval() const {
  if (modules_.empty()) return false;
  for (const ModuleCheck& m : modules_)
    if (m.training) return false;
  return true;
}

namespace {

using TensorCheck = EntryGuards::TensorCheck;

// Which of a tensor argument's checks failed, with what was traced and what the call has.
void explain_tensor(std::ostream& os, const TensorCheck& c, const Tensor& t, int32_t index) {
  std::string a = "arg" + std::to_string(index);
  os << "guard failed: ";
  if (t.dtype() != c.dtype) {
    os << a << ".dtype == " << dtype_name(c.dtype) << "; actual: " << dtype_name(t.dtype());
  } else if (!(t.device() == c.device)) {
    os << a << ".device == " << c.device << "; actual: " << t.device();
  } else if (t.dim() != c.rank) {
    os << a << ".dim() == " << c.rank << "; actual: " << t.dim();
  } else if (t.requires_grad() != c.requires_grad) {
    os << a << ".requires_grad == " << (c.requires_grad ? "true" : "false")
       << "; actual: " << (t.requires_grad() ? "true" : "false");
  } else {
    os << a << " is "
       << (c.layout == Layout::kDense ? dense_order_string(c.order)
                                      : std::string(layout_name(c.layout)));
    if (c.layout == Layout::kStrided) os << " with strides " << detail::str(c.strides);
    os << "; actual: " << layout_name(layout_of(t)) << " with strides "
       << detail::str(t.int_strides());
  }
}

void explain_module(std::ostream& os, const EntryGuards::ModuleCheck& m) {
  std::string name = m.path.empty() ? std::string("module") : "module '" + m.path + "'";
  if (m.module->structure_version() != m.version) {
    os << "guard failed: " << name << ".structure_version() == " << m.version
       << "  # a parameter, buffer or submodule was added or replaced; actual: "
       << m.module->structure_version();
  } else {
    os << "guard failed: " << name << ".is_training() == " << (m.training ? "true" : "false")
       << "; actual: " << (m.module->is_training() ? "true" : "false");
  }
}

void explain_slot(std::ostream& os, const EntryGuards::SlotCheck& c) {
  os << "guard failed: " << c.name << " is the tensor traced";
  if (c.may_rebind)
    os << " or one of type " << dtype_name(c.dtype) << str(c.sizes) << " strides " << str(c.strides)
       << " on " << c.device;
  os << "  # re-assigned through param()/buffer() or a held reference; actual: a new tensor "
     << describe(*c.slot);
}

void explain_frozen(std::ostream& os, const EntryGuards::FrozenCheck& c) {
  os << "guard failed: " << c.name << " is the tensor frozen at version " << c.version
     << "  # frozen into the compiled graph (eval, no grad); actual: ";
  const std::shared_ptr<Storage>& st = c.holder->impl().storage;
  if (c.holder->impl_ptr() != c.traced)
    os << "a new tensor " << describe(*c.holder);
  else if (st.get() != c.storage)
    os << "written on its device since (a new or pending buffer)";
  else
    os << "updated in place (version " << st->version() << ")";
}

}  // namespace

std::string EntryGuards::explain(const std::vector<Arg>& args, std::span<const sym::ArgView> views,
                                 GuardFailure f) const {
  using S = GuardFailure::Stage;
  std::ostringstream os;
  switch (f.stage) {
    case S::kNone:
      return "all guards passed";
    case S::kArgCount:
      os << "guard failed: len(args) == " << kinds_.size() << "; actual: " << args.size();
      break;
    case S::kArgKind:
      os << "guard failed: arg" << f.index << " is " << kind_name(kinds_[f.index])
         << "; actual: " << kind_name(kind_of(args[f.index]));
      break;
    case S::kTensor: {
      const TensorCheck* c = nullptr;
      for (const TensorCheck& x : tensors_)
        if (x.arg == f.index) c = &x;
      explain_tensor(os, *c, tensor_arg(args, f.index), f.index);
      break;
    }
    case S::kAlias: {
      int32_t want = alias_of_[f.index], have = first_alias(args, f.index);
      os << "guard failed: arg" << f.index;
      if (want >= 0)
        os << " is arg" << want;
      else
        os << " is a distinct tensor";
      os << " (aliasing as traced); actual: ";
      if (have >= 0)
        os << "arg" << f.index << " is arg" << have;
      else
        os << "arg" << f.index << " is a distinct tensor";
      break;
    }
    case S::kScalar: {
      const Arg* want = nullptr;
      for (const auto& [i, v] : scalars_)
        if (i == f.index) want = &v;
      os << "guard failed: arg" << f.index << " == " << scalar_string(*want)
         << "  # scalar arguments are guarded by value; actual: arg" << f.index << " = "
         << scalar_string(args[f.index]);
      break;
    }
    case S::kGradMode:
      os << "guard failed: GradMode::is_enabled() == " << (grad_enabled_ ? "true" : "false")
         << "; actual: " << (GradMode::is_enabled() ? "true" : "false");
      break;
    case S::kAutocast:
      os << "guard failed: autocast == " << autocast_string(autocast_)
         << "; actual: " << autocast_string(detail::autocast_state());
      break;
    case S::kModule:
      explain_module(os, modules_[f.index]);
      break;
    case S::kSlot:
      explain_slot(os, slots_[f.index]);
      break;
    case S::kCaptureGrad: {
      const CaptureGradCheck& c = capture_grads_[f.index];
      os << "guard failed: " << c.name
         << ".requires_grad == " << (c.requires_grad ? "true" : "false")
         << "  # set_requires_grad changed since the trace; actual: "
         << (c.holder->requires_grad() ? "true" : "false");
      break;
    }
    case S::kFrozen:
      explain_frozen(os, frozen_[f.index]);
      break;
    case S::kProgram:
      os << program_.explain(views, sym::GuardCheck{f.index});
      break;
    case S::kOverlap: {
      auto [i, j] = shared_memory(args);
      os << "guard failed: written arguments share no memory with other tensor arguments  # the graph writes " << written_list()
         << " in place; actual: arg" << i << " and arg" << j << " are views of one storage";
      break;
    }
  }
  return os.str();
}

std::string EntryGuards::to_string() const {
  std::ostringstream os;
  os << "len(args) == " << kinds_.size() << "\n";
  for (size_t i = 0; i < kinds_.size(); ++i) {
    if (kinds_[i] != ArgKind::kTensor) continue;
    const TensorCheck* c = nullptr;
    for (const TensorCheck& x : tensors_)
      if (x.arg == static_cast<int32_t>(i)) c = &x;
    os << "arg" << i << ": Tensor " << dtype_name(c->dtype) << " " << c->device << " dim "
       << c->rank << " " << layout_name(c->layout);
    if (c->layout == Layout::kStrided) os << " strides " << detail::str(c->strides);
    if (c->layout == Layout::kDense) os << " (" << dense_order_string(c->order) << ")";
    os << " requires_grad=" << (c->requires_grad ? "true" : "false");
    if (alias_of_[i] >= 0) os << " is arg" << alias_of_[i];
    os << "\n";
  }
  for (const auto& [i, v] : scalars_)
    os << "arg" << i << " == " << scalar_string(v) << "  # " << kind_name(kinds_[i]) << "\n";
  os << "GradMode::is_enabled() == " << (grad_enabled_ ? "true" : "false") << "\n";
  os << "autocast == " << autocast_string(autocast_) << "\n";
  for (const ModuleCheck& m : modules_)
    os << "module '" << m.path << "' (" << m.module->type_name()
       << ").structure_version() == " << m.version
       << ", is_training() == " << (m.training ? "true" : "false") << "\n";
  for (const SlotCheck& c : slots_) {
    os << c.name << " is the tensor traced";
    if (c.may_rebind)
      os << " or one of type " << dtype_name(c.dtype) << str(c.sizes) << " strides "
         << str(c.strides);
    os << "\n";
  }
  for (const CaptureGradCheck& c : capture_grads_)
    os << c.name << ".requires_grad == " << (c.requires_grad ? "true" : "false") << "\n";
  for (const FrozenCheck& c : frozen_)
    os << c.name << " is the tensor frozen, storage version == " << c.version << "\n";
  os << program_.to_string();
  if (!written_args_.empty())
    os << "written arguments share no memory with other tensor arguments  # the graph writes " << written_list()
       << " in place\n";
  return os.str();
}

std::string EntryGuards::written_list() const {
  std::string s;
  for (size_t k = 0; k < written_args_.size(); ++k)
    s += (k ? ", arg" : "arg") + std::to_string(written_args_[k]);
  return s;
}

}  // namespace lathe::detail
