// AOT autograd: lathe::compile of a function or module called in training mode (grad enabled,
// some argument or captured parameter requiring grad). Internal to the compile cache.
//
// The stages after capture: the traced forward graph (parameters lifted as graph inputs, read in
// place at every call) is extended into a joint graph (joint_graph.h: the ops' vjp rules traced
// over it), which a Partitioner (partition.h, CompileOptions::partitioner) splits: the backward
// graph takes (forward inputs it reads, saved forward values, output gradients) and returns the
// gradients of the forward inputs that require grad; the forward graph returns its outputs
// followed by the saved values. The default partitioner recomputes cheap values in the backward
// instead of saving them (see docs/architecture.md).
//
// Each call of the compiled forward records ONE autograd node in the eager engine (its op is the
// plan's "compiled_backward" OpDef); backward() runs the compiled backward through it and the
// engine accumulates .grad on the real parameters exactly as for eager nodes, with the same
// version checks and the same error for a second backward through freed values.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/ir/graph.h"
#include "lathe/sym/shape_env.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/tracer.h"

namespace lathe {
class Partitioner;
}

namespace lathe::detail {

struct CapturedGraph;

struct AotPlan {
  // Owns the symbols both executables refer to: destroyed last.
  std::shared_ptr<sym::ShapeEnv> env;
  std::string name;                           // the compiled function's name, for errors
  std::unique_ptr<ir::Graph> backward_graph;  // until the backward is compiled
  std::unique_ptr<backend::Executable> backward;
  std::string backward_text;

  size_t num_forward_inputs = 0;
  size_t num_user_outputs = 0;  // forward graph outputs before the saved values
  size_t num_saved = 0;         // forward graph outputs after them
  size_t num_recomputed = 0;    // values the backward recomputes instead of reading them saved
  std::vector<uint8_t> input_requires_grad;   // per forward graph input, at trace time
  std::vector<uint8_t> input_read;            // per forward graph input: the backward reads it
  std::vector<std::string> input_names;       // per forward graph input
  std::vector<uint8_t> output_requires_grad;  // per user graph output
  // Per forward graph input: the grad-output slots whose gradient reaches it (node by node, as
  // eager's graph would). A backward() that reaches none of them leaves its grad undefined.
  std::vector<std::vector<int>> grad_outputs_reaching;

  // Per backward graph input: where its tensor comes from at backward time.
  struct BackwardInput {
    enum class Kind : uint8_t { kForwardInput, kSaved, kGradOutput, kConstant };
    Kind kind = Kind::kForwardInput;
    int index = 0;  // forward input position, saved slot, grad-output slot, constant slot
  };
  std::vector<BackwardInput> backward_inputs;
  std::vector<Tensor> constants;       // tensors the vjp rules made (zeros, scalars)
  std::vector<int> grad_output_of;     // per grad-output slot: its user graph output
  std::vector<int> gradient_of_input;  // per backward graph output: its forward input position

  OpDef op;  // the autograd node's op: "compiled_backward", its vjp runs `backward`
};

// True when a trace on inputs with these requires_grad flags builds an AOT plan: grad mode is
// on and some floating input requires grad.
bool aot_wanted(const ir::Graph& forward, const std::vector<uint8_t>& input_requires_grad);

// Builds the joint graph and partitions it with `partitioner`. Appends the saved values to
// forward's outputs. Null when no output requires grad. Throws lathe::Error naming the function
// for what it cannot compile for training (an op without a vjp, a random op on the gradient path,
// an in-place write into a value that requires grad or that the backward reads).
std::shared_ptr<AotPlan> build_aot_plan(ir::Graph& forward, std::shared_ptr<sym::ShapeEnv> env,
                                        const Tracer& tracer,
                                        std::vector<uint8_t> input_requires_grad,
                                        const std::string& name, const Partitioner& partitioner);

// The joint and partition stages of a capture (capture.h): for a training call (grad on, some
// floating argument or capture requiring grad) the plan, with the forward and backward graphs'
// symbols resolved and both graphs verified; null for an inference entry. Runs before the
// capture's guards are produced: the vjps' shape rules may add guards.
std::shared_ptr<AotPlan> plan_training(CapturedGraph& captured, const std::vector<Arg>& args,
                                       const CompileOptions& options);

// Before the forward executable runs on `inputs` (forward graph order): checks that they still
// require grad as traced (the guards check it for arguments and captures; this names the input
// if something else changed it).
void aot_check_inputs(const AotPlan& plan, std::span<const Tensor> inputs);

// After the forward executable ran on `inputs`: drops the saved values from `graph_outputs` and
// records one autograd node whose outputs are the user outputs that require grad.
void aot_attach(const std::shared_ptr<const AotPlan>& plan, std::span<const Tensor> inputs,
                std::vector<Tensor>& graph_outputs, backend::SymbolValues symbols);

}  // namespace lathe::detail
