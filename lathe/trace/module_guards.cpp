#include "lathe/trace/module_guards.h"

#include "lathe/trace/cache_entry.h"

namespace lathe::detail {

void ModuleCollector::on_access(const nn::Module& m) {
  auto it = index_.find(&m);
  if (it != index_.end() && !seen_[it->second].expired()) return;
  std::weak_ptr<const nn::Module> w = m.weak_from_this();
  if (w.expired()) return;  // under construction, or not owned by a shared_ptr
  if (it != index_.end()) {
    seen_[it->second] = std::move(w);  // a new module at the address of a dead one
    return;
  }
  index_.emplace(&m, seen_.size());
  seen_.push_back(std::move(w));
  if (!names_) return;
  // Listing the tree reads its modules: not an access by the traced function.
  struct Unobserved {
    nn::ModuleAccessObserver* prev = nn::set_module_access_observer(nullptr);
    ~Unobserved() { nn::set_module_access_observer(prev); }
  } unobserved;
  for (auto& [name, t] : m.named_parameters()) names_->emplace(t.impl_ptr().get(), name);
  for (auto& [name, t] : m.named_buffers()) names_->emplace(t.impl_ptr().get(), name);
}

std::vector<std::shared_ptr<nn::Module>> ModuleCollector::modules() const {
  std::vector<std::shared_ptr<nn::Module>> out;
  for (const auto& w : seen_)
    if (auto m = w.lock()) out.push_back(std::const_pointer_cast<nn::Module>(m));
  return out;
}

void guard_modules(CacheEntry& entry, nn::Module* root, const ModuleCollector& read) {
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> modules;
  std::unordered_map<const nn::Module*, size_t> known;
  if (root) {
    modules = root->named_modules();
    for (size_t i = 0; i < modules.size(); ++i) known.emplace(modules[i].second.get(), i);
  }
  int outside = 0;
  for (auto& m : read.modules()) {
    if (known.count(m.get())) continue;
    known.emplace(m.get(), modules.size());
    modules.emplace_back(str(m->type_name(), "#", ++outside), std::move(m));
  }

  std::unordered_map<const TensorImpl*, size_t> capture_of;
  for (size_t k = 0; k < entry.captured.size(); ++k)
    capture_of.emplace(entry.captured[k].impl_ptr().get(), k);
  struct Slot {
    std::string name;
    const Tensor* slot;
    int capture;
  };
  std::vector<Slot> slots;
  std::vector<int> holders(entry.captured.size(), 0);
  for (const auto& [path, m] : modules) {
    std::string prefix = path.empty() ? "module." : "module '" + path + "'.";
    for (const auto& [name, slot] : m->tensor_slots()) {
      auto it = capture_of.find(slot->impl_ptr().get());
      int k = it == capture_of.end() ? -1 : static_cast<int>(it->second);
      if (k >= 0) ++holders[k];
      slots.push_back({prefix + name, slot, k});
    }
  }
  for (auto& [path, m] : modules) entry.guards.record_module(m, path);
  for (const Slot& s : slots) {
    EntryGuards::SlotCheck c;
    c.slot = s.slot;
    c.traced = s.slot->impl_ptr();
    c.name = s.name;
    // A tensor held twice (tied weights) is one graph input: both slots must keep it.
    if (s.capture >= 0 && holders[s.capture] == 1 && !entry.fresh_capture[s.capture]) {
      const Tensor& t = *s.slot;
      c.may_rebind = true;
      c.dtype = t.dtype();
      c.device = t.device();
      c.sizes = t.shape();
      c.strides = t.int_strides();
      entry.capture_slots[s.capture] = s.slot;
    }
    entry.guards.record_slot(std::move(c));
  }
}

}  // namespace lathe::detail
