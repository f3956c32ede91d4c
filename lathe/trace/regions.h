// Graph breaks: a compiled function whose code reads tensor data (item(), to_vector(), printing
// values, a branch on a value) runs as regions. Each call runs the function's host code under a
// RegionRecorder, which records ops (the compile tracer, over real tensors); a data read ends the
// current region: its ops become a graph, found in the function's RegionCache by structural hash
// (confirmed by the op at every position; compiled by the backend on a miss), and run; the pending
// tensors the code still holds get their data, the read returns the value, and recording goes on
// into the next region. A branch taken on a value is correct by construction: the next region
// records what the code does now.
//
// Regions take every tensor they meet as a graph input by reference (arguments, parameters,
// results of earlier regions), with static sizes: the graph's structure and input types are its
// cache key, so a region is compiled once per distinct structure and input types and guarded by
// nothing else.
//
// Training: a region whose inputs require grad (grad mode on) is run by the eager kernels op by
// op with autograd, so gradients flow across region boundaries through the eager autograd engine;
// regions that need no gradient run compiled.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/ir/graph.h"
#include "lathe/sym/shape_env.h"
#include "lathe/trace/compile.h"

namespace lathe::detail {

// One compiled region.
struct Region {
  uint64_t hash = 0;
  std::shared_ptr<sym::ShapeEnv> env;  // owns the graph's expressions (none: sizes are static)
  std::unique_ptr<ir::Graph> graph;    // to confirm a hash match, and for graph_string
  std::unique_ptr<backend::Executable> executable;  // null for regions replayed with autograd
  std::string ends_at;  // the read that ended it ("item() of f32[] from sum") or "return"
  size_t num_nodes = 0;
  std::vector<const OpDef*> ops;  // by position, to confirm a hash match
  std::atomic<int64_t> runs{0};
};

// What one call did, region by region (lathe::explain).
struct RegionTrace {
  std::vector<size_t> nodes;          // ops per region
  std::vector<std::string> ends_at;   // why each region ended
  std::vector<uint8_t> compiled_now;  // the region was compiled by this call
  std::vector<uint8_t> eager;         // replayed by the eager kernels (training)
};

class RegionCache {
 public:
  // `fn`, `options` and `module` belong to the compile cache that owns this one.
  RegionCache(const CompiledFunction::Fn& fn, const CompileOptions& options, nn::Module* module);
  ~RegionCache();

  // Runs the function once as regions. `first_break` is the reason the whole-graph trace gave.
  std::vector<Tensor> call(const std::vector<Arg>& args);

  size_t num_regions() const;  // compiled regions, all calls
  int64_t region_compiles() const { return compiles_.load(); }
  RegionTrace last_call() const;             // regions of the most recent call
  std::string graph_string(size_t i) const;  // region i in compile order

 private:
  friend class RegionRecorder;
  // The region of this structure (compiled now when new); `compiled` says which.
  Region& find_or_compile(std::unique_ptr<ir::Graph> graph, std::shared_ptr<sym::ShapeEnv> env,
                          const std::string& ends_at, bool* compiled);

  const CompiledFunction::Fn& fn_;
  const CompileOptions& options_;
  std::unordered_map<const TensorImpl*, std::string> names_;  // module paths of parameters

  mutable std::mutex mu_;
  std::unique_ptr<backend::Backend> backend_;
  std::unordered_map<uint64_t, std::vector<Region*>> by_hash_;
  std::vector<std::unique_ptr<Region>> regions_;  // compile order
  RegionTrace last_call_;
  std::atomic<int64_t> compiles_{0};
};

}  // namespace lathe::detail
