// Module: named parameters, buffers and child modules, train/eval, state_dict with PyTorch's
// dotted names.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::nn {

class Module;

// Told about every module whose state (parameters, buffers, children, training flag) is read on
// this thread while installed: lathe::compile installs one while tracing and guards those modules,
// however the traced function reached them.
class ModuleAccessObserver {
 public:
  virtual void on_access(const Module& m) = 0;

 protected:
  ~ModuleAccessObserver() = default;
};
// Installs `observer` on this thread (null: none); returns the previous one.
ModuleAccessObserver* set_module_access_observer(ModuleAccessObserver* observer);

class Module : public std::enable_shared_from_this<Module> {
 public:
  virtual ~Module() = default;

  // Runs the module on its inputs. Single-input modules override forward(const Tensor&).
  virtual std::vector<Tensor> forward_all(const std::vector<Tensor>& inputs);
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // Recursively, "layer1.0.conv1.weight" style names, in registration order. A tensor held by
  // several slots (a tied weight, a module registered twice) is listed once, under its first
  // name, unless remove_duplicate is false (as PyTorch's named_parameters / named_buffers):
  // an optimizer given parameters() then updates a tied weight once per step.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool remove_duplicate = true) const;
  // Persistent or not.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool remove_duplicate = true) const;
  std::vector<Tensor> parameters() const;  // named_parameters()' tensors, each once
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    note_access();
    return children_;
  }
  // Every module in the tree with its dotted path ("" for this one), pre-order. The module must
  // be owned by a std::shared_ptr (nn::make); constructors use apply() instead.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  // Calls fn(path, module) on every module of the tree, pre-order ("" for this one).
  void apply(const std::function<void(const std::string&, Module&)>& fn,
             const std::string& prefix = "");

  // Parameters and persistent buffers by dotted name; a tied tensor appears under every name
  // (as in PyTorch), so that a checkpoint loads into an untied copy too.
  std::map<std::string, Tensor> state_dict() const;
  // Copies values into the existing tensors (dtype converted, shapes must match; a 1-element
  // [1] tensor loads into a 0-d one, as PyTorch accepts for num_batches_tracked). With strict,
  // missing or unexpected keys are an error; shape mismatches are always an error. All problems
  // are reported together in one error; nothing is copied when an error is thrown.
  void load_state_dict(const std::map<std::string, Tensor>& sd, bool strict = true);

  // Moves every parameter and buffer of the tree to `device` in place: each tensor keeps its
  // handle (a TensorImpl swap), so references held elsewhere see the move. Bumps the structure
  // version of every module whose tensors moved. Returns *this.
  Module& to(Device device);
  // Converts every floating-point parameter and buffer of the tree to `dtype` in place (same
  // handles, as to(Device)); integer buffers (num_batches_tracked) keep their dtype. Bumps the
  // structure version of every module whose tensors changed. Returns *this.
  Module& to(DType dtype);

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const {
    note_access();
    return training_;
  }

  // Replaces the tensor of a registered parameter / buffer, or a child (structure change).
  void set_parameter(const std::string& name, Tensor t);
  void set_buffer(const std::string& name, Tensor t);
  void set_child(const std::string& name, std::shared_ptr<Module> m);
  // The tensor the module holds. Assigning to the reference (`param("w") = t`, `w = w - lr * g`)
  // replaces it without changing the structure version; compiled functions check the tensor
  // object of every parameter and buffer of the modules they read, and use the new one.
  Tensor& param(const std::string& name);
  Tensor& buffer(const std::string& name);
  // This module's parameters, then buffers (not its descendants'): name and the slot holding the
  // tensor (stable for the module's life). lathe::compile guards that each still holds the
  // tensor it traced.
  std::vector<std::pair<std::string, const Tensor*>> tensor_slots() const;
  std::shared_ptr<Module> child(const std::string& name) const;

  // Increases whenever a parameter, buffer or child of this module (not its descendants) is
  // added or replaced; in-place value updates do not change it. Guards use it.
  uint64_t structure_version() const { return structure_version_; }

  // Short type name for printing ("Conv2d").
  virtual std::string type_name() const { return "Module"; }

 protected:
  Tensor& register_parameter(const std::string& name, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  // Throws unless `name` is a valid, unused attribute name of this module.
  void check_new_name(const std::string& name, const char* what) const;

 private:
  // Tells the thread's ModuleAccessObserver (lathe::compile while tracing) this module was read.
  void note_access() const;

  // Private so that every read goes through is_training(), which tracing observes.
  bool training_ = true;
  void collect(const std::string& prefix, bool params, bool buffers, bool only_persistent,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  // Deques keep the references returned by register_*/param()/buffer() valid.
  std::deque<std::pair<std::string, Tensor>> params_;
  struct Buffer {
    std::string name;
    Tensor t;
    bool persistent;
  };
  std::deque<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  uint64_t structure_version_ = 0;
};

using ModulePtr = std::shared_ptr<Module>;

// Whether a checkpoint tensor `value` can be loaded into the module tensor `target`: equal
// shapes, or a [1] tensor for a 0-d target (PyTorch's rule for 0-d buffers saved as [1]).
bool state_dict_shapes_match(const Tensor& target, const Tensor& value);

// Runs children in order; children are named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<ModulePtr> mods);
  void push_back(ModulePtr m);
  // Registers m under an explicit name (for torchvision-style gaps and names).
  void append(const std::string& name, ModulePtr m);
  size_t size() const { return named_children().size(); }
  ModulePtr operator[](size_t i) const { return named_children().at(i).second; }
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
};

// Builds a module with std::make_shared.
template <class M, class... Args>
std::shared_ptr<M> make(Args&&... args) {
  return std::make_shared<M>(std::forward<Args>(args)...);
}

}  // namespace lathe::nn
