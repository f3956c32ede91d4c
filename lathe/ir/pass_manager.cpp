#include "lathe/ir/pass_manager.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include "lathe/base/error.h"
#include "lathe/ir/functionalize.h"
#include "lathe/ir/passes.h"

namespace lathe::ir {

PassManager::PassManager(std::vector<Pass> passes, PassManagerOptions options)
    : passes_(std::move(passes)), options_(std::move(options)) {}

std::vector<std::string> PassManager::names() const {
  std::vector<std::string> out;
  for (const Pass& p : passes_) out.push_back(p.name);
  return out;
}

std::string pass_list_string(const std::vector<Pass>& passes) {
  std::string out;
  for (const Pass& p : passes) out += p.name + "\n";
  return out;
}

namespace {

void check_disabled(const std::vector<std::string>& disabled,
                    const std::vector<std::string>& known) {
  for (const std::string& name : disabled) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw Error(lathe::detail::str("[passes] unknown pass '", name,
                                   "' in the disabled list (LATHE_DISABLE_PASSES); known: ", list));
  }
}

}  // namespace

void PassManager::run(std::unique_ptr<Graph>& g, PassContext& ctx) {
  check_disabled(options_.disabled, names());
  std::ostream& log = options_.log_stream ? *options_.log_stream : std::cerr;
  records_.clear();
  for (const Pass& pass : passes_) {
    PassRecord r;
    r.name = pass.name;
    r.nodes_before = r.nodes_after = g->num_nodes();
    const bool off = std::find(options_.disabled.begin(), options_.disabled.end(), pass.name) !=
                     options_.disabled.end();
    if (off || (ctx.backward && !pass.not_on_backward.empty())) {
      r.summary = off ? "disabled" : "skipped on a backward graph: " + pass.not_on_backward;
      if (options_.log) log << options_.log_prefix << " " << pass.name << ": " << r.summary << "\n";
      records_.push_back(std::move(r));
      continue;
    }
    ctx.summary.clear();
    const auto start = std::chrono::steady_clock::now();
    r.ran = true;
    r.changed = pass.run(g, ctx);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.nodes_after = g->num_nodes();
    r.summary = ctx.summary;
    try {
      g->verify();
    } catch (const Error& e) {
      throw Error(
          lathe::detail::str("[passes] pass '", pass.name, "' broke the graph: ", e.what()));
    }
    if (options_.log) {
      std::ostringstream line;
      line.precision(3);
      line << options_.log_prefix << " " << pass.name << ": "
           << (r.changed ? "changed" : "unchanged") << ", " << r.nodes_before << " -> "
           << r.nodes_after << " nodes, " << r.seconds * 1e3 << " ms";
      if (!r.summary.empty()) line << " (" << r.summary << ")";
      log << line.str() << "\n";
      if (options_.log_graphs) log << g->to_string() << "\n";
    }
    records_.push_back(std::move(r));
  }
}

Pass dce_pass() {
  return {"dce",
          [](std::unique_ptr<Graph>& g, PassContext& ctx) {
            const int n = dead_code_elimination(*g);
            ctx.summary = lathe::detail::str(n, " nodes removed");
            return n > 0;
          },
          ""};
}

Pass cse_pass() {
  return {"cse",
          [](std::unique_ptr<Graph>& g, PassContext& ctx) {
            const int n = common_subexpression_elimination(*g);
            ctx.summary = lathe::detail::str(n, " nodes merged");
            return n > 0;
          },
          ""};
}

Pass functionalize_pass() {
  // What it cannot express (a write through a view of a symbolic base) keeps its writes: the
  // passes after it respect them.
  return {"functionalize",
          [](std::unique_ptr<Graph>& g, PassContext& ctx) {
            bool writes = false;
            for (const Node* n : g->nodes()) writes = writes || n->has_side_effects();
            if (!writes) {
              ctx.summary = "no writes";
              return false;
            }
            try {
              FunctionalGraph f = functionalize(*g, WriteBack::copy_nodes);
              LATHE_CHECK(f.graph->inputs().size() == g->inputs().size(),
                          "[passes] functionalize changed the graph inputs");
              g = std::move(f.graph);
              ctx.summary = f.summary();
              return true;
            } catch (const Error& e) {
              ctx.summary = lathe::detail::str("skipped: ", e.what());
              return false;
            }
          },
          ""};
}

}  // namespace lathe::ir
