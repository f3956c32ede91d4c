// Backend interface: compile a Graph into an Executable that runs it on real tensors.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ir/graph.h"

namespace lathe::backend {

// Values of the graph's size symbols for one call (symbol index -> value), as read by the guard
// program; executables substitute them into symbolic attributes (e.g. a view's target size).
using SymbolValues = std::span<const int64_t>;

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs the graph. `inputs` follow Graph::inputs() order. Returns the graph outputs. Must be
  // safe to call from several threads at once.
  virtual std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues symbols) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The backend may keep the graph's structure; the graph is not used after compile returns.
  virtual std::unique_ptr<Executable> compile(const ir::Graph& graph) = 0;
};

using BackendFactory = std::function<std::unique_ptr<Backend>()>;
// Registers a backend by name (throws if taken). "interpreter" is built in.
void register_backend(const std::string& name, BackendFactory factory);
// A new instance of the named backend; throws listing the known names when unknown.
std::unique_ptr<Backend> create_backend(const std::string& name);
std::vector<std::string> backend_names();

}  // namespace lathe::backend
