// Module guards: which modules a traced function read (however it reached them: compile(module),
// a module captured by a lambda, a child found through child()), and the guards that keep an
// entry from replaying a graph made for another structure, training flag or parameter tensor.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/nn/module.h"

namespace lathe::detail {

struct CacheEntry;

// Collects the modules whose state is read on this thread while its Scope lives.
class ModuleCollector final : public nn::ModuleAccessObserver {
 public:
  class Scope {
   public:
    explicit Scope(ModuleCollector& c) : prev_(nn::set_module_access_observer(&c)) {}
    ~Scope() { nn::set_module_access_observer(prev_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    nn::ModuleAccessObserver* prev_;
  };

  void on_access(const nn::Module& m) override;
  // Also names the parameters and buffers of each module read into `names` (first name wins:
  // "0.weight" when a captured Sequential is read before its children), for traces of a lambda
  // whose captures have no module path otherwise.
  void name_tensors_into(std::unordered_map<const TensorImpl*, std::string>* names) {
    names_ = names;
  }
  // The modules read that are still alive and owned by a std::shared_ptr, in first-read order
  // (a module built inside the function, or one not owned by a shared_ptr, cannot be guarded).
  std::vector<std::shared_ptr<nn::Module>> modules() const;

 private:
  std::unordered_map<const nn::Module*, size_t> index_;
  std::vector<std::weak_ptr<const nn::Module>> seen_;
  std::unordered_map<const TensorImpl*, std::string>* names_ = nullptr;
};

// Guards every module of `root`'s tree (compile(module); may be null) and every module in `read`:
// the structure version and training flag of each, and each of their parameter and buffer slots
// (it must hold the tensor traced; a captured tensor held by exactly one slot may be replaced by
// one of the same type, which the entry then reads from the slot: entry.capture_slots).
// entry.captured must be set.
void guard_modules(CacheEntry& entry, nn::Module* root, const ModuleCollector& read);

}  // namespace lathe::detail
