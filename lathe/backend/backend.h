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

// Values of the graph's size symbols for one call, indexed by symbol id: symbols[i] is the value
// of the symbol whose expression has sym::Expr::value() == i (its id in the ShapeEnv that made
// it; ids count backed and unbacked symbols together in creation order, so when a trace has only
// backed symbols, symbols[i] is the value of the symbol printed s<i>). Executables substitute
// them into symbolic attributes (e.g. a view's target size). May be empty for graphs without
// symbolic attributes.
using SymbolValues = std::span<const int64_t>;

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs the graph. `inputs` follow Graph::inputs() order. Returns the graph outputs (a graph
  // output that is a graph input is returned as the same tensor; a value returned twice comes
  // back twice). In-place ops write into the input tensors they mutate (and bump their version),
  // so buffer and parameter updates reach the caller. Safe to call from several threads at once.
  virtual std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues symbols) = 0;
};

// What a caller knows about a graph beyond the graph itself.
struct CompileContext {
  // Per graph input (Graph::inputs() order; empty: none): the input's value when it is a
  // constant of the compiled graph (a frozen parameter or buffer), undefined otherwise. The caller
  // passes these same tensors at every run and guarantees they keep their values while the
  // executable is used (the compile cache guards their storage versions and drops the entry on
  // an in-place update), so a backend may read them at compile time and keep what it derives.
  std::vector<Tensor> constants;
  // The compute precision the caller asks for (CompileOptions::precision): f32, or bf16 where a
  // backend may run contractions on bf16 kernels (the graph's inputs and outputs keep their
  // dtypes). Backends without bf16 kernels ignore it.
  DType precision = DType::f32;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The graph is not used after compile returns: the executable copies what it needs. Symbolic
  // expressions in attributes are kept by pointer, so the ShapeEnv that owns them must outlive
  // the executable (a compile cache entry keeps both).
  virtual std::unique_ptr<Executable> compile(const ir::Graph& graph) = 0;
  // True when the backend uses CompileContext::constants (freezing costs the caller guards and
  // recompiles after in-place updates, so it freezes only for such backends).
  virtual bool uses_constants() const { return false; }
  // compile() with what the caller knows; the default ignores the context.
  virtual std::unique_ptr<Executable> compile_with_context(const ir::Graph& graph,
                                                           const CompileContext& context) {
    (void)context;
    return compile(graph);
  }
};

using BackendFactory = std::function<std::unique_ptr<Backend>()>;
// Registers a backend by name (throws if taken). "interpreter" is built in. Thread-safe.
void register_backend(const std::string& name, BackendFactory factory);
// A new instance of the named backend; throws listing the known names when unknown.
std::unique_ptr<Backend> create_backend(const std::string& name);
// Registered names, sorted.
std::vector<std::string> backend_names();

}  // namespace lathe::backend
