#include "lathe/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <unordered_set>

#include "lathe/backend/cpu/concat_blocked.h"
#include "lathe/backend/cpu/constant_fold.h"
#include "lathe/backend/cpu/executor.h"
#include "lathe/backend/cpu/fold_batch_norm.h"
#include "lathe/backend/cpu/fuse_attention.h"
#include "lathe/backend/cpu/fuse_conv.h"
#include "lathe/backend/cpu/fuse_dw_conv.h"
#include "lathe/backend/cpu/fuse_linear.h"
#include "lathe/backend/cpu/fuse_pointwise.h"
#include "lathe/backend/cpu/merge_linear.h"
#include "lathe/backend/cpu/plan_layouts.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/backend/interpreter.h"
#include "lathe/ir/functionalize.h"
#include "lathe/ir/passes.h"
#include "lathe/kernels/elementwise.h"

namespace lathe::backend {
namespace cpu {
namespace {

std::vector<std::string> split_list(const char* s) {
  std::vector<std::string> out;
  if (!s) return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool log_passes() {
  for (const std::string& t : split_list(std::getenv("LATHE_LOGS")))
    if (t == "passes" || t == "all") return true;
  return false;
}

bool has_writes(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes())
    if (n->has_side_effects()) return true;
  return false;
}

std::unique_ptr<ir::Graph> copy_graph(const ir::Graph& g) {
  return rewrite_graph(g, [](const ir::Node&, GraphCopy&) { return false; });
}

}  // namespace

const std::vector<std::string>& pass_names() {
  // One pass per line (the trailing // keeps clang-format from joining them).
  static const std::vector<std::string> names{
      "functionalize",    //
      "constant_fold",    //
      "fold_batch_norm",  //
      "fuse_conv",        //
      "fuse_linear",      //
      "fuse_attention",   //
      "fuse_pointwise",   //
      "merge_linear",     //
      "plan_layouts",     //
      "concat_blocked",   //
      "fuse_dw_conv",     //
      "dce",              //
  };
  return names;
}

std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g,
                                      const std::vector<std::string>& disabled) {
  GraphConstants none;
  return run_passes(g, none, disabled);
}

std::unique_ptr<ir::Graph> run_passes(const ir::Graph& g, GraphConstants& constants,
                                      const std::vector<std::string>& disabled) {
  std::vector<std::string> off = split_list(std::getenv("LATHE_DISABLE_PASSES"));
  off.insert(off.end(), disabled.begin(), disabled.end());
  for (const std::string& name : off)
    LATHE_CHECK(std::find(pass_names().begin(), pass_names().end(), name) != pass_names().end(),
                "[cpu] unknown pass '", name, "' in LATHE_DISABLE_PASSES or the disabled list");
  const bool log = log_passes();
  std::unique_ptr<ir::Graph> cur = copy_graph(g);
  for (const std::string& name : pass_names()) {
    if (std::find(off.begin(), off.end(), name) != off.end()) continue;
    std::string summary;
    if (name == "functionalize") {
      // Writes become functional ops and final copies into the written inputs, so the fusions
      // need not stop at them. A graph without writes is left as it is.
      // What it cannot express (a write through a view of a symbolic base) keeps its writes:
      // the fusions respect them.
      if (!has_writes(*cur)) {
        summary = "no writes";
      } else {
        try {
          ir::FunctionalGraph f = ir::functionalize(*cur, ir::WriteBack::copy_nodes);
          LATHE_CHECK(f.graph->inputs().size() == cur->inputs().size(),
                      "[cpu] functionalize changed the graph inputs");
          cur = std::move(f.graph);
          summary = f.summary();
        } catch (const Error& e) {
          summary = lathe::detail::str("skipped: ", e.what());
        }
      }
    } else if (name == "constant_fold") {
      int n = 0;
      cur = constant_fold(*cur, constants, &n);
      summary = lathe::detail::str(n, " nodes folded");
    } else if (name == "fold_batch_norm") {
      int n = 0;
      cur = fold_batch_norm(*cur, constants, &n);
      summary = lathe::detail::str(n, " batch norms folded into their convolution");
    } else if (name == "fuse_conv") {
      FuseConvStats s;
      cur = fuse_conv(*cur, &s);
      summary = lathe::detail::str(s.fused, " fused (", s.bn_folded, " with batch norm, ",
                                   s.residual, " with a residual add)");
    } else if (name == "fuse_linear") {
      FuseLinearStats s;
      cur = fuse_linear(*cur, &s);
      summary = lathe::detail::str(s.fused, " fused (", s.act, " with an activation, ", s.residual,
                                   " with a residual add)");
    } else if (name == "fuse_attention") {
      FuseAttentionStats s;
      cur = fuse_attention(*cur, &s);
      summary = lathe::detail::str(s.fused, " fused (", s.masked, " with a mask, ", s.transposed,
                                   " writing [B, L, H, E])");
    } else if (name == "fuse_pointwise") {
      FusePointwiseStats s;
      cur = fuse_pointwise(*cur, &s);
      summary = lathe::detail::str(s.groups, " groups of ", s.nodes, " pointwise nodes fused");
    } else if (name == "merge_linear") {
      MergeLinearStats s;
      cur = merge_linear(*cur, constants, &s);
      summary = lathe::detail::str(s.merged, " linear layers merged into ", s.groups);
    } else if (name == "plan_layouts") {
      PlanLayoutsStats s;
      std::unordered_set<const ir::Value*> constant_inputs;
      for (const auto& [value, tensor] : constant_values(*cur, constants))
        constant_inputs.insert(value);
      const bool winograd = plan_layouts_winograd();
      std::string why = "LATHE_CPU_BLOCK";
      int block = 0;
      if (std::getenv("LATHE_CPU_BLOCK")) {
        block = plan_layouts_block();
      } else {
        const BlockChoice c = choose_block(*cur, winograd, &constant_inputs);
        block = c.block;
        why = c.winograd ? std::string("Winograd")
              : c.probed_convs
                  ? lathe::detail::str("measured on ", c.probed_convs,
                                       " memory-bound convolutions: channels-last ",
                                       c.cost_s[0] * 1e3, " ms, nChw8c ", c.cost_s[1] * 1e3,
                                       " ms, nChw16c ", c.cost_s[2] * 1e3, " ms")
                  : std::string("the machine's block");
      }
      cur = plan_layouts(*cur, &s, block, winograd, &constant_inputs);
      summary = lathe::detail::str(s.blocked_convs, " convolutions on the blocked layout (block ",
                                   s.block, ": ", why, "; ", s.winograd_convs, " Winograd), ",
                                   s.blocked_pools, " max poolings, ", s.to_blocked,
                                   " reorders in, ", s.from_blocked, " reorders out");
    } else if (name == "concat_blocked") {
      ConcatBlockedStats s;
      cur = concat_blocked(*cur, &s);
      summary = lathe::detail::str(s.concats, " concats and ", s.pools,
                                   " max poolings on blocked values, ", s.reorders_removed,
                                   " reorders removed");
    } else if (name == "fuse_dw_conv") {
      if (!fuse_dw_conv_enabled()) {
        summary = "off (LATHE_DW_FUSION=0)";
      } else {
        FuseDwConvStats s;
        cur = fuse_dw_conv(*cur, &s);
        summary = lathe::detail::str(s.fused, " 1x1 + depthwise pairs fused, ", s.no_jit,
                                     " left (no fused oneDNN kernel for them here)");
      }
    } else if (name == "dce") {
      summary = lathe::detail::str(ir::dead_code_elimination(*cur), " nodes removed");
    }
    cur->verify();
    if (log)
      std::cerr << "[lathe.passes] after " << name << ": " << summary << "\n"
                << cur->to_string() << "\n";
  }
  return cur;
}

}  // namespace cpu

namespace {

// The interpreter over the rewritten graph, with the constants the passes derived (folded
// weights, appended as graph inputs) kept here and passed after the caller's inputs.
class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::unique_ptr<Executable> inner, size_t num_inputs, std::vector<Tensor> derived)
      : inner_(std::move(inner)), num_inputs_(num_inputs), derived_(std::move(derived)) {}

  std::vector<Tensor> run(std::span<const Tensor> inputs, SymbolValues symbols) override {
    if (derived_.empty()) return inner_->run(inputs, symbols);
    LATHE_CHECK(inputs.size() == num_inputs_, "[cpu] the graph takes ", num_inputs_,
                " inputs, got ", inputs.size());
    std::vector<Tensor> all(inputs.begin(), inputs.end());
    all.insert(all.end(), derived_.begin(), derived_.end());
    std::vector<Tensor> outputs = inner_->run(all, symbols);
    // An output that is (a view of) a folded constant gets its own copy: in eager it is a fresh
    // tensor on every call, and a caller writing into it must not change the next call's result.
    for (Tensor& out : outputs) {
      if (!out.defined() || !out.has_storage()) continue;
      for (const Tensor& c : derived_) {
        if (!c.has_storage() || c.impl().storage != out.impl().storage) continue;
        Tensor copy = empty_like(out);
        kernels::copy(copy, out);
        out = std::move(copy);
        break;
      }
    }
    return outputs;
  }

 private:
  std::unique_ptr<Executable> inner_;
  size_t num_inputs_;
  std::vector<Tensor> derived_;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  bool uses_constants() const override { return true; }
  std::unique_ptr<Executable> compile(const ir::Graph& graph) override {
    return compile_with_context(graph, {});
  }
  std::unique_ptr<Executable> compile_with_context(const ir::Graph& graph,
                                                   const CompileContext& context) override {
    cpu::GraphConstants constants = context.constants;
    std::unique_ptr<ir::Graph> g = cpu::run_passes(graph, constants);
    const size_t n = graph.inputs().size();
    std::vector<Tensor> derived;
    for (size_t i = n; i < g->inputs().size(); ++i) derived.push_back(constants.at(i));
    // LATHE_CPU_EXECUTOR=interpreter runs the optimized graph on the reference step list, to
    // tell a wrong result of the passes from one of the executor.
    const char* exec = std::getenv("LATHE_CPU_EXECUTOR");
    std::unique_ptr<Executable> inner = exec && std::string(exec) == "interpreter"
                                            ? make_interpreter_backend()->compile(*g)
                                            : cpu::make_planned_executable(*g);
    return std::make_unique<CpuExecutable>(std::move(inner), n, std::move(derived));
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace lathe::backend
