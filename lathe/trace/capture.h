// The capture stage of lathe::compile: the function traced once with fake tensors (Tracer) into a
// captured graph, with what the later stages need of the trace: the graph's inputs (arguments and
// captured tensors), where each output of the call comes from, the modules read (for their
// guards) and the size symbols (for the guard program, produced once the joint stage has added
// its own size facts).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/ir/graph.h"
#include "lathe/sym/shape_env.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/guards.h"
#include "lathe/trace/module_guards.h"
#include "lathe/trace/tracer.h"

namespace lathe::detail {

// Where a compiled call's output comes from.
struct OutputSpec {
  enum class Kind : uint8_t { kGraph, kArgument, kCaptured, kUndefined };
  Kind kind = Kind::kGraph;
  int index = 0;  // graph output, argument or capture slot
};

struct CapturedGraph {
  // Owns the symbolic expressions of the graph (and later of the executables).
  std::shared_ptr<sym::ShapeEnv> env;
  std::unique_ptr<ir::Graph> graph;
  // Parameter and buffer tensors -> their module paths (read by the tracer).
  std::unordered_map<const TensorImpl*, std::string> names;
  std::unique_ptr<Tracer> tracer;  // its captures, input origins, bindings and sources
  ModuleCollector modules_read;
  std::vector<OutputSpec> outputs;    // per output of the call
  std::vector<Device> output_device;  // per graph output: the device the traced value lives on
  EntryGuards guards;                 // after produce_guards

  // Records the call's argument checks and the shape guards of the trace's symbols. Called
  // after the joint stage (plan_training), whose vjps' shape rules may add guards.
  void produce_guards(const std::vector<Arg>& args);
};

// How each dim of tensor argument `arg` is traced (the cache's dynamic-shape policy).
using DimChooser = std::function<std::vector<DimChoice>(size_t arg, const Tensor& t)>;

// Traces fn on fakes of `args` (module: compile(module)'s, may be null; its parameters and
// buffers are named by path) into a verified graph with symbols resolved. Errors raised while
// tracing are rethrown with the call's sizes (trace_errors.h). Logs, under LATHE_LOGS=recompiles,
// the dims traced as dynamic that the code specialized.
std::unique_ptr<CapturedGraph> capture_graph(const CompiledFunction::Fn& fn,
                                             const std::vector<Arg>& args, nn::Module* module,
                                             const CompileOptions& options, const DimChooser& dims);

// Re-resolves every symbolic size of the graph through the ShapeEnv. A symbol pinned or equated
// by a guard recorded after a value's type (or a node's symbolic attribute) was recorded is
// rewritten there too, so the graph states what its guards allow, and Graph::verify, whose shape
// rules see the replacements, agrees with it.
void resolve_symbols(ir::Graph& graph, sym::ShapeEnv& env);

}  // namespace lathe::detail
