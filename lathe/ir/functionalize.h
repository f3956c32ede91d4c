// functionalize: rewrites a graph whose nodes write in place (add_, copy_, fill_, batch_norm's
// running statistics in training, writes through views of inputs) into one where no node
// writes, as AOT autograd's functionalization does. Each write becomes the op's functional
// variant (OpDef::functional_variant: add_ -> add, batch_norm -> batch_norm_functional, ...);
// a write through a view becomes an as_strided_scatter of the view's new value into its base;
// later reads of the base or of other views of it read the new values (views are re-derived
// from the updated base). The new values of graph inputs that were written are handed back as
// the WriteBack mode says.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/ir/graph.h"

namespace lathe::ir {

// Static alias facts of a graph, from OpDef::output_aliases: a view's output and an in-place
// op's result share storage with their input. Distinct graph inputs are assumed not to alias.
class AliasAnalysis {
 public:
  explicit AliasAnalysis(const Graph& g);
  // The value whose storage v lives in: v itself unless it is a view or an in-place result.
  const Value* base_of(const Value* v) const;
  // The position of the graph input whose storage v lives in, or -1.
  int aliased_input(const Value* v) const;
  // True when a and b share storage (the same base).
  bool may_alias(const Value* a, const Value* b) const;
  // Positions of the graph inputs some node writes into (directly or through a view), sorted.
  const std::vector<int>& mutated_inputs() const { return mutated_inputs_; }

 private:
  std::unordered_map<const Value*, const Value*> base_;
  std::unordered_map<const Value*, int> input_position_;
  std::vector<int> mutated_inputs_;
};

// Where the new values of written graph inputs go.
enum class WriteBack {
  // Appended as extra graph outputs (after the original ones); FunctionalGraph::updates says
  // which input each one updates. No node writes anything; the caller copies them back.
  outputs,
  // The graph ends with one copy_(input, new value) per written input: the same inputs and
  // outputs as before (outputs aliasing an input still do), and these copies are the only
  // writes. Backends can run it as it is.
  copy_nodes,
};

// Graph input `input` takes the value of graph output `output` after a call.
struct InputUpdate {
  int input = 0;
  int output = 0;
};

struct FunctionalGraph {
  std::unique_ptr<Graph> graph;
  std::vector<InputUpdate> updates;  // WriteBack::outputs: one per written input
  int rewritten = 0;                 // writing nodes replaced by functional ones
  int scatters = 0;                  // writes through views turned into as_strided_scatter
  int written_inputs = 0;            // graph inputs written back (either mode)
  // "2 writes made functional (1 through a view), 1 input written back" for pass logs.
  std::string summary() const;
};

// The functional form of g (g itself is unchanged). Throws "[functionalize] ..." for what it
// cannot express: an op that writes and has no functional variant, or a write through a view
// whose base has symbolic sizes (the scatter window would be symbolic).
FunctionalGraph functionalize(const Graph& g, WriteBack mode = WriteBack::outputs);

}  // namespace lathe::ir
