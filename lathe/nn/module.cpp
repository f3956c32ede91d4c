#include "lathe/nn/module.h"

#include <algorithm>
#include <set>

#include "lathe/core/grad_mode.h"

namespace lathe::nn {

namespace {
thread_local ModuleAccessObserver* tls_observer = nullptr;
}  // namespace

ModuleAccessObserver* set_module_access_observer(ModuleAccessObserver* observer) {
  ModuleAccessObserver* prev = tls_observer;
  tls_observer = observer;
  return prev;
}

void Module::note_access() const {
  if (tls_observer) tls_observer->on_access(*this);
}

std::vector<Tensor> Module::forward_all(const std::vector<Tensor>& inputs) {
  LATHE_CHECK(inputs.size() == 1, "[", type_name(), "] forward takes 1 input, got ", inputs.size());
  return {forward(inputs[0])};
}

Tensor Module::forward(const Tensor&) {
  throw Error(detail::str("[", type_name(), "] has no single-input forward"));
}

void Module::check_new_name(const std::string& name, const char* what) const {
  LATHE_CHECK(!name.empty() && name.find('.') == std::string::npos, "[", type_name(), "] ", what,
              " name '", name, "' must be non-empty and contain no '.'");
  bool taken =
      std::any_of(params_.begin(), params_.end(), [&](const auto& p) { return p.first == name; }) ||
      std::any_of(buffers_.begin(), buffers_.end(),
                  [&](const auto& b) { return b.name == name; }) ||
      std::any_of(children_.begin(), children_.end(),
                  [&](const auto& c) { return c.first == name; });
  LATHE_CHECK(!taken, "[", type_name(), "] cannot register ", what, " '", name,
              "': the name is already used");
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  check_new_name(name, "parameter");
  params_.emplace_back(name, std::move(t));
  ++structure_version_;
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name, "buffer");
  buffers_.push_back(Buffer{name, std::move(t), persistent});
  ++structure_version_;
  return buffers_.back().t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name, "child module");
  LATHE_CHECK(m != nullptr, "[", type_name(), "] child module '", name, "' is null");
  children_.emplace_back(name, std::move(m));
  ++structure_version_;
}

void Module::collect(const std::string& prefix, bool params, bool buffers, bool only_persistent,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  note_access();
  if (params)
    for (const auto& [name, t] : params_)
      if (t.defined()) out.emplace_back(prefix + name, t);
  if (buffers)
    for (const Buffer& b : buffers_)
      if (b.t.defined() && (b.persistent || !only_persistent))
        out.emplace_back(prefix + b.name, b.t);
  for (const auto& [name, child] : children_)
    child->collect(prefix + name + ".", params, buffers, only_persistent, out);
}

namespace {
// Keeps the first entry of each tensor object (PyTorch's remove_duplicate, by identity).
void remove_duplicates(std::vector<std::pair<std::string, Tensor>>& items) {
  std::set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Tensor>> kept;
  kept.reserve(items.size());
  for (auto& it : items)
    if (seen.insert(it.second.impl_ptr().get()).second) kept.push_back(std::move(it));
  items = std::move(kept);
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool remove_duplicate) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, false, false, out);
  if (remove_duplicate) remove_duplicates(out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool remove_duplicate) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, true, false, out);
  if (remove_duplicate) remove_duplicates(out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::shared_ptr<Module> self = weak_from_this().lock();
  LATHE_CHECK(self != nullptr, "[", type_name(),
              "] named_modules() needs the module to be owned by a std::shared_ptr (nn::make); "
              "use apply() inside constructors");
  out.emplace_back("", std::move(self));
  note_access();
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules())
      out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

void Module::apply(const std::function<void(const std::string&, Module&)>& fn,
                   const std::string& prefix) {
  fn(prefix, *this);
  for (const auto& [name, child] : children_)
    child->apply(fn, prefix.empty() ? name : prefix + "." + name);
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> items;
  collect("", true, true, true, items);
  return std::map<std::string, Tensor>(items.begin(), items.end());
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + v[i];
  return r;
}
}  // namespace

bool state_dict_shapes_match(const Tensor& target, const Tensor& value) {
  if (value.shape() == target.shape()) return true;
  return target.dim() == 0 && value.dim() == 1 && value.shape()[0] == 1;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& sd, bool strict) {
  std::map<std::string, Tensor> own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, t] : own) {
    auto it = sd.find(name);
    if (it == sd.end()) {
      missing.push_back(name);
    } else if (!it->second.defined() || !state_dict_shapes_match(t, it->second)) {
      mismatched.push_back(detail::str(
          name, " (checkpoint ", it->second.defined() ? it->second.shape_string() : "undefined",
          ", model ", t.shape_string(), ")"));
    }
  }
  for (const auto& [name, t] : sd)
    if (!own.count(name)) unexpected.push_back(name);
  bool key_error = strict && (!missing.empty() || !unexpected.empty());
  if (key_error || !mismatched.empty()) {
    std::string msg =
        detail::str("[load_state_dict] ", type_name(), ": cannot load the state dict");
    if (strict && !missing.empty())
      msg += detail::str("; missing keys (", missing.size(), "): ", join(missing));
    if (strict && !unexpected.empty())
      msg += detail::str("; unexpected keys (", unexpected.size(), "): ", join(unexpected));
    if (!mismatched.empty())
      msg += detail::str("; shape mismatches (", mismatched.size(), "): ", join(mismatched));
    throw Error(msg);
  }
  // Loading writes parameters in place: not something autograd records (as torch.no_grad()).
  NoGradGuard no_grad;
  for (auto& [name, t] : own) {
    auto it = sd.find(name);
    if (it == sd.end()) continue;
    // A [1] value for a 0-d tensor: broadcasting copies its one element.
    t.copy_(it->second.dim() == t.dim() ? it->second : it->second.reshape(Shape{}));
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

Module& Module::to(Device device) {
  // The moved / converted tensors stay leaves (as torch's Module.to).
  NoGradGuard no_grad;
  auto move = [&](Module& m, Tensor& t) {
    if (!t.defined() || t.device() == device) return;
    Tensor moved = t.to(device);
    moved.set_requires_grad(t.requires_grad());
    moved.impl().module_state = device.kind() != DeviceKind::cpu;
    t.impl() = moved.impl();  // same handle, new contents
    ++m.structure_version_;
  };
  apply([&](const std::string&, Module& m) {
    for (auto& [name, t] : m.params_) move(m, t);
    for (Buffer& b : m.buffers_) move(m, b.t);
  });
  return *this;
}

Module& Module::to(DType dtype) {
  LATHE_CHECK(is_floating(dtype), "[Module.to] dtype must be floating point, got ",
              dtype_name(dtype));
  NoGradGuard no_grad;
  auto convert = [&](Module& m, Tensor& t) {
    if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == dtype) return;
    Tensor converted = t.to(dtype);
    converted.set_requires_grad(t.requires_grad());
    t.impl() = converted.impl();
    ++m.structure_version_;
  };
  apply([&](const std::string&, Module& m) {
    for (auto& [name, t] : m.params_) convert(m, t);
    for (Buffer& b : m.buffers_) convert(m, b.t);
  });
  return *this;
}

void Module::set_parameter(const std::string& name, Tensor t) {
  param(name) = std::move(t);
  ++structure_version_;
}

void Module::set_buffer(const std::string& name, Tensor t) {
  buffer(name) = std::move(t);
  ++structure_version_;
}

void Module::set_child(const std::string& name, std::shared_ptr<Module> m) {
  LATHE_CHECK(m != nullptr, "[", type_name(), "] child module '", name, "' is null");
  for (auto& [n, c] : children_) {
    if (n == name) {
      c = std::move(m);
      ++structure_version_;
      return;
    }
  }
  add_child(name, std::move(m));
}

Tensor& Module::param(const std::string& name) {
  note_access();
  for (auto& [n, t] : params_)
    if (n == name) return t;
  throw Error(detail::str("[", type_name(), "] has no parameter '", name, "'"));
}

Tensor& Module::buffer(const std::string& name) {
  note_access();
  for (Buffer& b : buffers_)
    if (b.name == name) return b.t;
  throw Error(detail::str("[", type_name(), "] has no buffer '", name, "'"));
}

std::vector<std::pair<std::string, const Tensor*>> Module::tensor_slots() const {
  std::vector<std::pair<std::string, const Tensor*>> out;
  for (const auto& [name, t] : params_) out.emplace_back(name, &t);
  for (const Buffer& b : buffers_) out.emplace_back(b.name, &b.t);
  return out;
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  note_access();
  for (const auto& [n, c] : children_)
    if (n == name) return c;
  throw Error(detail::str("[", type_name(), "] has no child module '", name, "'"));
}

Sequential::Sequential(std::vector<ModulePtr> mods) {
  for (auto& m : mods) push_back(std::move(m));
}

void Sequential::push_back(ModulePtr m) { add_child(std::to_string(size()), std::move(m)); }

void Sequential::append(const std::string& name, ModulePtr m) { add_child(name, std::move(m)); }

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& [name, m] : named_children()) y = m->forward(y);
  return y;
}

}  // namespace lathe::nn
