// The cpu backend's executor: a flat launch list over value slots with a memory plan.
//
// compile() resolves every node to a step (op, attributes, input/output slots as indices). The
// first call for a concrete shape (the symbol values and the inputs' sizes and strides) runs the
// steps with the allocating kernels, as the interpreter does, and records what each produced:
// output metadata, layout, and which outputs alias which buffers. From that it builds the plan
// for the shape, cached: the shape rules' results, symbols substituted into attributes, and one
// arena holding every intermediate that an op with an out kernel (CpuKernelInfo::out_kernel,
// kernel_table.h) produces, placed by liveness (buffers whose lifetimes do not overlap share
// memory; a pointwise op whose same-layout input dies there writes over it). Later calls run the
// list: out kernels write into the arena, other ops allocate as in eager; no shape rule runs, no
// map is looked up.
//
// Graph outputs (and anything a graph output views) never live in the arena: they are
// allocated per call, so a result handed out is never overwritten by a later call. Concurrent
// calls each take their own arena from a small pool of the plan.
#pragma once

#include <cstddef>
#include <memory>

#include "lathe/backend/backend.h"

namespace lathe::backend::cpu {

// What the plans of an executable hold (for tests and logs).
struct ExecutorStats {
  size_t plans = 0;             // concrete shapes planned
  size_t steps = 0;             // nodes in the launch list
  size_t out_steps = 0;         // steps of the last plan that write into given outputs
  size_t arena_values = 0;      // values of the last plan living in the arena
  size_t in_place = 0;          // of those, how many write over a dying input
  size_t concats_in_place = 0;  // cat steps skipped: their inputs were written into its slices
  size_t arena_bytes = 0;       // arena size of the last plan
  size_t unplanned_bytes = 0;   // sum of the arena values' sizes (what eager would allocate)
};

class PlannedExecutable : public Executable {
 public:
  virtual ExecutorStats stats() const = 0;
};

std::unique_ptr<PlannedExecutable> make_planned_executable(const ir::Graph& graph);

}  // namespace lathe::backend::cpu
