// Freezing on the lazy device: a module moved there (Module::to(Device::lazy())) keeps its
// parameters and buffers as device data that every call's graph reads as inputs. When a cached
// graph writes nothing and is run again with the same module state (the same buffers, unchanged
// since), the lazy device compiles a frozen variant of it: those inputs are handed to the backend
// as constants (backend::CompileContext), which may fold them at compile time (batch norm into
// the convolution weights, weights reordered for Winograd or the blocked layout), as compile's
// freezing does. The variant is used while every frozen input is the same storage, at the same
// offset, with the same version; any change drops it (the next repeated state freezes again),
// and an entry whose state keeps changing (training) stops freezing.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/ir/graph.h"

namespace lathe::lazy {

struct FreezeState {
  explicit FreezeState(std::vector<int> c) : candidates(std::move(c)) {}
  std::vector<int> candidates;  // the graph inputs that may be frozen
  // The candidates' buffers (held: their storages are the guard) and versions at the last call.
  std::vector<Tensor> seen;
  std::vector<uint64_t> versions;
  int drops = 0;                                    // frozen variants dropped so far
  std::unique_ptr<backend::Executable> executable;  // the frozen variant, or null
};

// At most this many frozen variants are dropped before an entry stops freezing.
constexpr int kMaxFreezeDrops = 2;

// The graph inputs a frozen variant may take as constants: those whose device data is module
// state (`module_state`, per graph input), when the graph writes nothing (a graph that writes
// may write module state; training windows do).
std::vector<int> freeze_candidates(const ir::Graph& g, const std::vector<bool>& module_state);

enum class FreezeStep {
  use_unfrozen,    // no frozen variant (none may be made, or the state is new)
  use_frozen,      // the frozen variant's state is unchanged: run it
  compile_frozen,  // the same state a second time: compile the frozen variant, then run it
  dropped,         // the state the frozen variant froze changed: it is dropped
};

// One call of the entry with these arguments (graph input order): what to run, with the
// snapshot of the candidates' state updated.
FreezeStep freeze_step(FreezeState& s, std::span<const Tensor> args);

// The compile context of a frozen variant: the candidates' arguments as constants.
backend::CompileContext freeze_context(const FreezeState& s, std::span<const Tensor> args);

}  // namespace lathe::lazy
