// Internal representation of pending lazy work: a DAG of recorded op calls whose leaves are
// device data. Tensors on the lazy device point at a LazyValue through their
// TensorSlot::device_value extension (see tensor_value / set_tensor_value).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/lazy/inline_vector.h"
#include "lathe/ops/op_def.h"

namespace lathe::lazy {

struct LazyNode;

struct LazyValue final : TensorExtension {
  // User-provided, so that make_shared (value-initialization) runs the member initializers only
  // instead of zero-filling the whole object first (every recorded op makes values and nodes).
  LazyValue() {}
  enum class Kind : uint8_t {
    device_data,  // a graph input: `buffer` is the device buffer (a CPU tensor)
    output,       // output `index` of `node`
    written,      // `base` after the in-place write of `node` (same buffer, newer contents)
  };
  Kind kind = Kind::device_data;
  Tensor buffer;
  // output, written: the node. Output 0 lives inside its node (LazyNode::output0) and holds the
  // node through the shared_ptr's control block it is reached by; every other value holds its
  // node in `owner`.
  LazyNode* node = nullptr;
  std::shared_ptr<LazyNode> owner;
  int index = 0;
  std::shared_ptr<LazyValue> base;  // written: the value written into (never `written` itself)
  // device_data: the graph input slot of this buffer in recording window `window` (assigned at
  // its first use in a window; see LazyContext).
  uint64_t window = UINT64_MAX;
  int slot = -1;
  // device_data: the hash of the buffer's dtype, sizes and strides, computed once when the value
  // is made (`buffer` never changes): recording hashes this word instead of walking the buffer's
  // metadata, which is cold in cache after a call has run (docs/history/, session 9).
  uint64_t type_digest = 0;
  // The version counter autograd sees (lazy_version): a root value (device data or a node's
  // output) starts at its buffer's storage version (0 for an output) and counts the in-place
  // writes recorded into it since, before they run.
  uint64_t base_version = 0;
  uint64_t writes = 0;
  // device_data: the tensor it was lifted from is a module's state on the device
  // (TensorImpl::module_state), which a graph that writes nothing may freeze.
  bool module_state = false;

  // The value whose buffer this is (itself unless written).
  const LazyValue* root() const { return kind == Kind::written ? base.get() : this; }
};

// The value a lazy tensor stands for (the pending value, or its device data's graph-input handle
// once used), or null.
inline std::shared_ptr<LazyValue> tensor_value(const TensorImpl& impl) {
  return std::static_pointer_cast<LazyValue>(impl.extension(TensorSlot::device_value));
}
inline LazyValue* tensor_value_ptr(const TensorImpl& impl) {
  return static_cast<LazyValue*>(impl.extension(TensorSlot::device_value).get());
}
inline void set_tensor_value(TensorImpl& impl, std::shared_ptr<LazyValue> v) {
  impl.extension(TensorSlot::device_value) = std::move(v);
}

// One recorded op call.
struct LazyNode {
  LazyNode() {}  // no zero-fill before the member initializers (see LazyValue())
  const OpDef* op = nullptr;
  Attrs attrs;  // the call's (copies share their items: no value is copied)
  // nullptr for an undefined optional tensor; inline, as most ops take at most five inputs.
  InlineVector<std::shared_ptr<LazyValue>, 5> inputs;
  // The output types (read when a cache miss builds the graph): output 0's inline, the others'
  // (multi-output ops) in more_outputs. Strides are the recorder's (eager's layout rule, or the
  // view's): the graph carries them, so the backend sees what the program sees (a reshape of a
  // channels-last value is a copy, not a view) and may re-lay only what the program cannot see.
  struct OutputType {
    DType dtype;
    Shape sizes, strides;
  };
  int num_outputs = 0;
  DType dtype0 = DType::f32;
  InlineVector<Shape::value_type, 5> sizes0;  // inline: no allocation for up to five dims
  InlineVector<Shape::value_type, 5> strides0;
  std::vector<OutputType> more_outputs;
  uint64_t seq = 0;     // recording order: nodes run in this order
  uint64_t window = 0;  // the recording window (the ops since a sync) it was recorded in
  int pos = 0;          // its position in that window
  mutable uint64_t visit_mark = 0;  // the last sync's walk that reached it (needed_nodes)
  // Output 0's value, in the node's allocation (most ops have one output): handed out by
  // shared_ptrs that share the node's control block, so it costs no allocation of its own.
  LazyValue output0;
};

}  // namespace lathe::lazy
