// The pass manager: one signature for a graph pass, and one place that runs a list of them.
//
// A Pass is a name and a function that rewrites the graph in place or replaces it (the cpu
// passes build a new graph), returning whether it changed anything; it may leave a one-line
// summary in PassContext::summary. The manager runs the list in order and owns what every pass
// needs around it: Graph::verify after each pass (a broken graph throws an Error naming the
// pass), the log (one line per pass: name, changed or not, node count before and after, time,
// summary; with log_graphs also the graph after it), the timings, and disabling passes by name
// (an unknown name throws, listing the known ones). Its settings come as a struct: it reads no
// environment (a backend fills the struct from its own options).
//
// Every pass runs on forward and on backward (training) graphs alike unless it says why not
// (Pass::not_on_backward); PassContext::backward tells the manager which graph it runs on.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lathe/ir/graph.h"

namespace lathe::ir {

// What a pass gets besides the graph. A backend derives from it to carry its own state (the cpu
// backend: frozen constants, its options, the layout plan); passes cast with `as<T>()`.
struct PassContext {
  virtual ~PassContext() = default;
  bool backward = false;  // the graph is a backward (training) graph
  std::string summary;    // the running pass's one-line summary, for the log

  template <class T>
  T& as() {
    return dynamic_cast<T&>(*this);
  }
};

struct Pass {
  std::string name;
  // Rewrites `g` (in place, or by replacing it); returns whether the graph changed.
  std::function<bool(std::unique_ptr<Graph>& g, PassContext& ctx)> run;
  // Empty: the pass runs on backward graphs too. Otherwise why it must not (it is skipped there).
  std::string not_on_backward;
};

struct PassManagerOptions {
  bool log = false;                    // one line per pass
  bool log_graphs = false;             // and the graph after each pass
  std::vector<std::string> disabled;   // pass names to skip; an unknown one is an error
  std::ostream* log_stream = nullptr;  // nullptr: std::cerr
  std::string log_prefix = "[lathe.passes]";
};

// What happened to one pass.
struct PassRecord {
  std::string name;
  bool ran = false;  // false: disabled, or skipped on a backward graph
  bool changed = false;
  size_t nodes_before = 0, nodes_after = 0;
  double seconds = 0;
  std::string summary;
};

class PassManager {
 public:
  explicit PassManager(std::vector<Pass> passes, PassManagerOptions options = {});

  // Runs the passes in order on `g` (replacing it when a pass does). Throws lathe::Error when a
  // disabled name is unknown, and "[passes] pass '<name>' broke the graph: ..." when the graph
  // fails Graph::verify after a pass.
  void run(std::unique_ptr<Graph>& g, PassContext& ctx);

  const std::vector<Pass>& passes() const { return passes_; }
  std::vector<std::string> names() const;
  // One record per pass of the last run, in order.
  const std::vector<PassRecord>& records() const { return records_; }

 private:
  std::vector<Pass> passes_;
  PassManagerOptions options_;
  std::vector<PassRecord> records_;
};

// The names of `passes`, one per line, in order (the docs test compares them).
std::string pass_list_string(const std::vector<Pass>& passes);

// The ir-level passes as Passes: dce, cse, functionalize (writes -> functional ops with copies
// back into the written inputs; a graph without writes, or one it cannot express, is left alone).
Pass dce_pass();
Pass cse_pass();
Pass functionalize_pass();

}  // namespace lathe::ir
