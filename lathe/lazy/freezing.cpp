#include "lathe/lazy/freezing.h"

#include "lathe/core/storage.h"

namespace lathe::lazy {
namespace {

uint64_t version_of(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  return impl.storage ? impl.storage->version() : 0;
}

// Whether the candidates' arguments are the buffers of the snapshot, unchanged.
bool same_state(const FreezeState& s, std::span<const Tensor> args) {
  if (s.seen.size() != s.candidates.size()) return false;
  for (size_t k = 0; k < s.candidates.size(); ++k) {
    const TensorImpl& a = args[s.candidates[k]].impl();
    const TensorImpl& b = s.seen[k].impl();
    if (a.storage != b.storage || a.offset != b.offset || version_of(s.seen[k]) != s.versions[k])
      return false;
  }
  return true;
}

void take_snapshot(FreezeState& s, std::span<const Tensor> args) {
  s.seen.clear();
  s.versions.clear();
  for (int i : s.candidates) {
    s.seen.push_back(args[i]);
    s.versions.push_back(version_of(args[i]));
  }
}

}  // namespace

std::vector<int> freeze_candidates(const ir::Graph& g, const std::vector<bool>& module_state) {
  for (const ir::Node* n : g.nodes())
    for (int i : n->op().mutated_inputs)
      if (n->mutates_input(i)) return {};
  std::vector<int> out;
  for (size_t i = 0; i < g.inputs().size() && i < module_state.size(); ++i)
    if (module_state[i]) out.push_back(static_cast<int>(i));
  return out;
}

FreezeStep freeze_step(FreezeState& s, std::span<const Tensor> args) {
  if (s.candidates.empty()) return FreezeStep::use_unfrozen;
  const bool same = same_state(s, args);
  if (s.executable) {
    if (same) return FreezeStep::use_frozen;
    s.executable.reset();
    take_snapshot(s, args);
    if (++s.drops >= kMaxFreezeDrops) {  // the state keeps changing: stop freezing
      s.candidates.clear();
      s.seen.clear();
      s.versions.clear();
    }
    return FreezeStep::dropped;
  }
  if (!same) {
    take_snapshot(s, args);
    return FreezeStep::use_unfrozen;
  }
  return FreezeStep::compile_frozen;
}

backend::CompileContext freeze_context(const FreezeState& s, std::span<const Tensor> args) {
  backend::CompileContext context;
  context.constants.resize(args.size());
  for (int i : s.candidates) context.constants[i] = args[i];
  return context;
}

}  // namespace lathe::lazy
