// The lazy device's state and the functions its two files share (lazy_device.cpp: recording and
// sync; lazy_api.cpp: the public functions, transfers, registration with core). Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lathe/backend/backend.h"
#include "lathe/ir/structural.h"
#include "lathe/lazy/executable_cache.h"
#include "lathe/lazy/lazy.h"
#include "lathe/lazy/lazy_value.h"

namespace lathe::lazy {

// Metrics::trace_s times one recorded op in kTimedEvery and counts it kTimedEvery times: the ops
// at window positions congruent to the window's timing phase, drawn per window from its number
// (splitmix64), so every position is timed equally often whatever the pattern of syncs, and the
// sum estimates the recording time without bias. A model called again and again (the lazy loop)
// gets its mean recording time; a single short window's figure is rough.
inline constexpr size_t kTimedEvery = 8;

inline size_t timing_phase(uint64_t window) {
  uint64_t x = window + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return static_cast<size_t>((x ^ (x >> 31)) % kTimedEvery);
}

// All lazy state; one per process, guarded by `mu` (ops may be recorded from any thread).
struct LazyContext {
  std::mutex mu;
  uint64_t next_seq = 0;
  // Tensors made pending since the last sync (weak: dead ones are not computed).
  std::vector<std::weak_ptr<TensorImpl>> pending;
  // Nodes writing into an input since the last sync: they run even when no live tensor needs
  // their outputs.
  std::vector<std::shared_ptr<LazyNode>> effects;
  // The recording window: the ops recorded since the last sync, the only ones a sync can run.
  // Recording hashes each op into `chain` (op, attributes, where each input comes from as a
  // window position or device data slot, output types), so a sync knows the structure of its
  // graph without building it.
  uint64_t window = 0;
  uint64_t visit_mark = 0;  // numbers the walks of needed_nodes (LazyNode::visit_mark)
  size_t timing_phase = lathe::lazy::timing_phase(0);  // of this window (see kTimedEvery)
  ir::StructuralHasher chain;
  std::vector<const OpDef*> window_ops;  // by position
  std::vector<Tensor> window_args;       // device data buffers by slot
  bool window_foreign = false;           // an input comes from an earlier window (its sync failed)
  Metrics metrics;
  ExecutableCache cache;
  std::string backend_name = "cpu";
  std::unique_ptr<backend::Backend> backend;
  std::function<uint64_t(uint64_t)> hash_override;
  std::function<void(const OpDef&, const std::vector<Tensor>&)> record_observer;
  std::string last_graph;
};

// The process's one context.
LazyContext& context();
// A copy with the same memory order (dense tensors) or row-major.
Tensor copy_of(const Tensor& t);
// Records one op call on lazy tensors (the device's dispatch; takes the lock).
std::vector<Tensor> record(const OpDef& op, TensorList inputs, const Attrs& attrs,
                           std::vector<TensorMeta>&& metas);
// Runs the pending work (the caller holds c.mu).
void sync_locked(LazyContext& c);

}  // namespace lathe::lazy
