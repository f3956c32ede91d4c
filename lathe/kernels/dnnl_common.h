// The oneDNN glue shared by the conv, matmul and pooling kernels: the engine and stream, memory
// descriptors built from a tensor's real strides, a thread-safe bounded primitive cache keyed on
// shapes/strides/attributes, and a cache of weights reordered into a primitive's preferred layout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/kernels/post_ops.h"

namespace lathe::detail {

// The CPU engine (one per process).
dnnl::engine& dnnl_engine();
// A CPU stream for the calling thread (oneDNN streams are not meant to be shared by threads).
dnnl::stream& dnnl_stream();
// Makes OpenMP's thread count for this thread equal lathe::num_threads() (oneDNN reads it when
// a primitive runs) and returns it.
int dnnl_prepare_threads();

dnnl::memory::data_type dnnl_dtype(DType dt, const char* op);
// True when oneDNN runs bf16 convolutions and matmuls natively on this CPU (avx512_bf16 or AMX,
// within ONEDNN_MAX_CPU_ISA): then bf16 operands go to oneDNN as they are, with f32
// accumulation; elsewhere bf16 ops compute on f32 copies.
bool dnnl_bf16_native();

// A memory descriptor with the tensor's logical dims and its real strides. Strides of size-1
// dims are normalised to the dense value so layouts like channels-last match oneDNN's tags. A
// 4-d tensor that is both row-major and channels-last (a dim of size 1) is described as
// channels-last when `prefer_channels_last` (so src and dst of a conv agree), else row-major.
dnnl::memory::desc dnnl_md(const Tensor& t, bool prefer_channels_last = false);
// Same, for explicit dims and strides (any dims of size 1 normalised as above).
dnnl::memory::desc dnnl_md(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                           DType dt);
// A dnnl::memory over the tensor's data (no copy).
dnnl::memory dnnl_mem(const dnnl::memory::desc& md, const Tensor& t);

// x (f32) rounded to bf16 (to nearest even, NaN kept) in a new tensor, by one oneDNN reorder: the
// source operand of a convolution or matmul computed at bf16 precision (Conv2dParams::bf16,
// linear_forward's bf16). A non-overlapping and dense x keeps its strides (channels-last stays
// channels-last), any other x comes back row-major.
Tensor dnnl_round_to_bf16(const Tensor& x);

// A key for the primitive caches: a flat list of integers (op tag, dims, strides, attributes,
// thread count), compared exactly.
struct DnnlKey {
  DnnlKey() { v.reserve(48); }
  std::vector<int64_t> v;
  DnnlKey& add(int64_t x) {
    v.push_back(x);
    return *this;
  }
  DnnlKey& add(const std::vector<int64_t>& xs) {
    v.push_back(static_cast<int64_t>(xs.size()));
    v.insert(v.end(), xs.begin(), xs.end());
    return *this;
  }
  // Dims, strides, dtype and offset-alignment-free description of a tensor.
  DnnlKey& add(const Tensor& t);
  bool operator==(const DnnlKey& o) const { return v == o.v; }
};
struct DnnlKeyHash {
  size_t operator()(const DnnlKey& k) const;
};

// A created primitive with its descriptor and the name of the implementation oneDNN chose.
struct DnnlPrimitive {
  dnnl::primitive prim;
  dnnl::primitive_desc pd;
  std::string impl;
  // Set by dnnl_cached_primitive: a number no other primitive of the process has (DnnlArgs keys
  // its reusable memory objects on it), and the scratchpad size pd asks for.
  uint64_t id = 0;
  size_t scratchpad_bytes = 0;
};

// Returns the cached primitive for `key`, creating it with `make` on a miss (outside the lock).
// The cache is bounded (least recently used entries are dropped). `make` may return nullptr to
// say the configuration is unsupported; that answer is cached too.
std::shared_ptr<const DnnlPrimitive> dnnl_cached_primitive(
    const DnnlKey& key, const std::function<std::shared_ptr<DnnlPrimitive>()>& make);
// Number of primitives currently cached (for tests).
size_t dnnl_primitive_cache_size();

// A primitive attribute with a user-managed scratchpad (so one primitive can run on several
// threads at once).
dnnl::primitive_attr dnnl_default_attr();
// dnnl_default_attr() plus `post` as oneDNN post-ops (eltwise, sum, eltwise).
dnnl::primitive_attr dnnl_post_ops_attr(const PostOps& post);
// Adds `post` to a primitive cache key.
void dnnl_add_post_ops_key(DnnlKey& key, const PostOps& post);
// Runs a primitive with the given arguments plus a thread-local scratchpad.
void dnnl_execute(const DnnlPrimitive& p, std::unordered_map<int, dnnl::memory> args);

// The arguments of one run of a cached primitive, without allocating: each argument's oneDNN
// memory object is made once per (primitive, argument, thread) and then only pointed at the
// call's data (set_data_handle), and the run goes through the C API with an array of arguments
// instead of a map. A oneDNN memory object costs an aligned allocation (a third of a small
// convolution's call, measured). Use: DnnlArgs a(prim); a.add(...)...; a.run();
class DnnlArgs {
 public:
  explicit DnnlArgs(const DnnlPrimitive& p) : p_(p) {}
  // Argument `arg` over `data`; `md` gives its descriptor (asked only the first time).
  template <class Md>
  DnnlArgs& add(int arg, void* data, Md&& md) {
    return add_memory(arg, reusable(arg, data, std::forward<Md>(md)));
  }
  // A ready memory object (a cached reordered weight).
  DnnlArgs& add_memory(int arg, const dnnl::memory& m);
  void run();

 private:
  template <class Md>
  const dnnl::memory& reusable(int arg, void* data, Md&& md) {
    dnnl::memory* m = find_reusable(arg);
    if (!m) m = &make_reusable(arg, md());
    m->set_data_handle(data);
    return *m;
  }
  dnnl::memory* find_reusable(int arg);
  dnnl::memory& make_reusable(int arg, const dnnl::memory::desc& md);

  const DnnlPrimitive& p_;
  static constexpr int kMaxArgs = 8;
  dnnl_exec_arg_t args_[kMaxArgs];
  int n_ = 0;
};

// Returns `weight` (described by `user_md`) in the layout `target_md`, reordering it at most once
// per (storage, offset, Storage::version(), target layout). Entries whose storage is gone or whose
// version is old are dropped; the cache is bounded in entries.
struct DnnlWeight {
  dnnl::memory mem;
  std::shared_ptr<void> hold;  // keeps the reordered buffer alive while in use
};
// `user_md` describes the weight as stored; it is only called when a reorder has to run.
DnnlWeight dnnl_cached_weight(const Tensor& weight,
                              const std::function<dnnl::memory::desc()>& user_md,
                              const dnnl::memory::desc& target_md);
// Number of reordered weights currently cached, and how many reorders have run (for tests).
size_t dnnl_weight_cache_size();
uint64_t dnnl_weight_reorder_count();

// ---- strided copies (own loops; f32, f64 and the integer types) ----
// Copies src into dst elementwise (same sizes and dtype, any strides).
void copy_into(const Tensor& dst, const Tensor& src);
// A row-major copy of t (t itself when already contiguous).
Tensor to_contiguous(const Tensor& t);
// A channels-last copy of a 4-d t (t itself when already channels-last).
Tensor to_channels_last_copy(const Tensor& t);

}  // namespace lathe::detail
