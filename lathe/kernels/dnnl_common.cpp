#include "lathe/kernels/dnnl_common.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>

#include "lathe/core/threads.h"
#include "lathe/kernels/compile_time.h"

namespace lathe::detail {

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

int dnnl_prepare_threads() {
  int n = lathe::num_threads();
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
  return n;
}

dnnl::memory::data_type dnnl_dtype(DType dt, const char* op) {
  switch (dt) {
    case DType::f32:
      return dnnl::memory::data_type::f32;
    case DType::i32:
      return dnnl::memory::data_type::s32;
    case DType::bf16:
      return dnnl::memory::data_type::bf16;
    default:
      throw Error(str("[", op, "] oneDNN has no kernel for dtype ", dtype_name(dt)));
  }
}

bool dnnl_bf16_native() {
  static const bool native = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;  // the isa values are nested bit sets
  }();
  return native;
}

namespace {
std::vector<int64_t> normalized_strides(const std::vector<int64_t>& sz,
                                        const std::vector<int64_t>& st) {
  std::vector<int64_t> out = st;
  for (int64_t i = static_cast<int64_t>(sz.size()) - 1; i >= 0; --i) {
    if (sz[i] != 1) continue;
    out[i] =
        i + 1 < static_cast<int64_t>(sz.size()) ? out[i + 1] * std::max<int64_t>(sz[i + 1], 1) : 1;
  }
  return out;
}
}  // namespace

dnnl::memory::desc dnnl_md(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                           DType dt) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl_dtype(dt, "dnnl"),
                            normalized_strides(dims, strides));
}

dnnl::memory::desc dnnl_md(const Tensor& t, bool prefer_channels_last) {
  std::vector<int64_t> st;
  const bool cl = t.dim() == 4 && t.is_channels_last();
  if (t.is_contiguous() && !(cl && prefer_channels_last)) {
    st = to_ints(contiguous_strides(t.sizes()));
  } else if (cl) {
    st = to_ints(channels_last_strides(t.sizes()));
  } else {
    st = normalized_strides(t.shape(), t.int_strides());
  }
  auto dims = t.shape();
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()),
                            dnnl_dtype(t.dtype(), "dnnl"), st);
}

dnnl::memory dnnl_mem(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, dnnl_engine(), t.raw_data());
}

Tensor dnnl_round_to_bf16(const Tensor& x) {
  const bool dense = x.is_non_overlapping_and_dense();
  Tensor y =
      dense ? empty_strided(x.sizes(), x.strides(), DType::bf16) : empty(x.sizes(), DType::bf16);
  if (x.numel() == 0) return y;
  const std::vector<int64_t> dims = x.shape();
  dnnl::memory from = dnnl_mem(dnnl_md(dims, x.int_strides(), x.dtype()), x);
  dnnl::memory to = dnnl_mem(dnnl_md(dims, y.int_strides(), DType::bf16), y);
  dnnl_prepare_threads();
  dnnl::reorder(from, to).execute(dnnl_stream(), from, to);
  dnnl_stream().wait();
  return y;
}

DnnlKey& DnnlKey::add(const Tensor& t) {
  add(static_cast<int64_t>(t.dtype()));
  add(t.shape());
  add(t.int_strides());
  return *this;
}

size_t DnnlKeyHash::operator()(const DnnlKey& k) const {
  uint64_t h = 1469598103934665603ull;
  for (int64_t x : k.v) {
    h ^= static_cast<uint64_t>(x);
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return static_cast<size_t>(h);
}

// ---- primitive cache ----

namespace {
constexpr size_t kPrimitiveCacheCapacity = 1024;

struct PrimitiveCache {
  std::mutex mu;
  // Most recently used at the front.
  std::list<std::pair<DnnlKey, std::shared_ptr<const DnnlPrimitive>>> lru;
  std::unordered_map<DnnlKey, decltype(lru)::iterator, DnnlKeyHash> index;
};

PrimitiveCache& primitive_cache() {
  static PrimitiveCache* c = new PrimitiveCache();
  return *c;
}
}  // namespace

std::shared_ptr<const DnnlPrimitive> dnnl_cached_primitive(
    const DnnlKey& key, const std::function<std::shared_ptr<DnnlPrimitive>()>& make) {
  PrimitiveCache& c = primitive_cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.index.find(key);
    if (it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      return it->second->second;
    }
  }
  // Creation JIT-compiles (milliseconds): do it outside the lock.
  static std::atomic<uint64_t> next_id{1};
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<DnnlPrimitive> made = make();
  count_primitive_creation(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (made) {
    made->id = next_id.fetch_add(1, std::memory_order_relaxed);
    made->scratchpad_bytes = made->pd.scratchpad_desc().get_size();
  }
  std::shared_ptr<const DnnlPrimitive> p = std::move(made);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.index.find(key);
  if (it != c.index.end()) return it->second->second;  // another thread won the race
  c.lru.emplace_front(key, p);
  c.index.emplace(key, c.lru.begin());
  while (c.lru.size() > kPrimitiveCacheCapacity) {
    c.index.erase(c.lru.back().first);
    c.lru.pop_back();
  }
  return p;
}

size_t dnnl_primitive_cache_size() {
  PrimitiveCache& c = primitive_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.lru.size();
}

dnnl::primitive_attr dnnl_default_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {
// A growing 64-byte aligned buffer, one per thread.
struct ScratchBuffer {
  void* ptr = nullptr;
  size_t size = 0;
  ~ScratchBuffer() { std::free(ptr); }
  void* get(size_t n) {
    if (n > size) {
      std::free(ptr);
      size_t rounded = (n + 63) / 64 * 64;
      ptr = std::aligned_alloc(64, rounded);
      LATHE_CHECK(ptr != nullptr, "[dnnl] out of memory allocating a ", n, "-byte scratchpad");
      size = rounded;
    }
    return ptr;
  }
};
}  // namespace

void dnnl_execute(const DnnlPrimitive& p, std::unordered_map<int, dnnl::memory> args) {
  thread_local ScratchBuffer scratch;
  dnnl::memory::desc sd = p.pd.scratchpad_desc();
  size_t n = sd.get_size();
  if (n > 0) args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(sd, dnnl_engine(), scratch.get(n)));
  dnnl_prepare_threads();
  p.prim.execute(dnnl_stream(), args);
  dnnl_stream().wait();
}

// ---- allocation-free runs (DnnlArgs) ----

namespace {
// This thread's memory objects by (primitive id, argument); cleared when it grows large (ids of
// primitives dropped from the cache are never reused, so their entries are only dead weight).
constexpr size_t kReusableMemoryCapacity = 16384;
std::unordered_map<uint64_t, dnnl::memory>& reusable_memory() {
  thread_local std::unordered_map<uint64_t, dnnl::memory> m;
  return m;
}
uint64_t reusable_key(uint64_t id, int arg) { return (id << 24) ^ static_cast<uint64_t>(arg); }
}  // namespace

dnnl::memory* DnnlArgs::find_reusable(int arg) {
  auto& m = reusable_memory();
  auto it = m.find(reusable_key(p_.id, arg));
  return it == m.end() ? nullptr : &it->second;
}

dnnl::memory& DnnlArgs::make_reusable(int arg, const dnnl::memory::desc& md) {
  LATHE_CHECK(p_.id != 0, "[dnnl] DnnlArgs needs a primitive from dnnl_cached_primitive");
  auto& m = reusable_memory();
  return m
      .insert_or_assign(reusable_key(p_.id, arg), dnnl::memory(md, dnnl_engine(), DNNL_MEMORY_NONE))
      .first->second;
}

DnnlArgs& DnnlArgs::add_memory(int arg, const dnnl::memory& mem) {
  LATHE_CHECK(n_ < kMaxArgs, "[dnnl] too many arguments for one primitive run");
  args_[n_++] = dnnl_exec_arg_t{arg, mem.get()};
  return *this;
}

void DnnlArgs::run() {
  thread_local ScratchBuffer scratch;
  if (p_.scratchpad_bytes > 0)
    add(DNNL_ARG_SCRATCHPAD, scratch.get(p_.scratchpad_bytes),
        [&] { return p_.pd.scratchpad_desc(); });
  dnnl_prepare_threads();
  const dnnl_status_t st = dnnl_primitive_execute(p_.prim.get(), dnnl_stream().get(), n_, args_);
  LATHE_CHECK(st == dnnl_success, "[dnnl] running ", p_.impl, " failed (status ",
              static_cast<int>(st), ")");
  dnnl_stream().wait();
  // Only between runs: the memory objects of a run are in use until it ends.
  if (reusable_memory().size() > kReusableMemoryCapacity) reusable_memory().clear();
}

// ---- reordered-weight cache ----

namespace {
constexpr size_t kWeightCacheCapacity = 512;

struct WeightEntry {
  std::weak_ptr<Storage> storage;
  const Storage* storage_ptr = nullptr;
  int64_t offset = 0;
  uint64_t version = 0;
  std::vector<int64_t> sizes, strides;
  dnnl::memory::desc user_md, target_md;
  std::shared_ptr<void> buffer;
  dnnl::memory mem;
  uint64_t last_use = 0;
};

struct WeightCache {
  std::mutex mu;
  std::vector<WeightEntry> entries;
  uint64_t clock = 0;
  uint64_t reorders = 0;
};

WeightCache& weight_cache() {
  static WeightCache* c = new WeightCache();
  return *c;
}
}  // namespace

DnnlWeight dnnl_cached_weight(const Tensor& weight,
                              const std::function<dnnl::memory::desc()>& user_md_fn,
                              const dnnl::memory::desc& target_md) {
  const std::shared_ptr<Storage>& storage = weight.impl().storage;
  const uint64_t version = storage->version();
  const auto sizes = weight.shape();
  const auto strides = weight.int_strides();
  WeightCache& c = weight_cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    for (WeightEntry& e : c.entries) {
      if (e.storage_ptr == storage.get() && e.offset == weight.storage_offset() &&
          e.version == version && e.sizes == sizes && e.strides == strides &&
          e.target_md == target_md && e.storage.lock() == storage) {
        e.last_use = ++c.clock;
        return {e.mem, e.buffer};
      }
    }
  }
  // The primitive may want the weight exactly as stored: then no reorder and no cache entry.
  const dnnl::memory::desc user_md = user_md_fn();
  if (user_md == target_md) return {dnnl_mem(user_md, weight), storage};
  // Reorder outside the lock.
  const auto t0 = std::chrono::steady_clock::now();
  WeightEntry e;
  e.storage = storage;
  e.storage_ptr = storage.get();
  e.offset = weight.storage_offset();
  e.version = version;
  e.sizes = sizes;
  e.strides = strides;
  e.user_md = user_md;
  e.target_md = target_md;
  size_t bytes = (target_md.get_size() + 63) / 64 * 64;
  e.buffer = std::shared_ptr<void>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)), std::free);
  LATHE_CHECK(e.buffer != nullptr, "[dnnl] out of memory reordering a weight of ", bytes, " bytes");
  e.mem = dnnl::memory(target_md, dnnl_engine(), e.buffer.get());
  dnnl::memory src = dnnl_mem(user_md, weight);
  dnnl_prepare_threads();
  dnnl::reorder(src, e.mem).execute(dnnl_stream(), src, e.mem);
  dnnl_stream().wait();
  count_weight_reorder(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  std::lock_guard<std::mutex> lock(c.mu);
  ++c.reorders;
  for (WeightEntry& x : c.entries) {  // another thread may have inserted it meanwhile
    // The storage must be the same live object: a dead one may have left its address to ours.
    if (x.storage_ptr == e.storage_ptr && x.offset == e.offset && x.version == version &&
        x.sizes == sizes && x.strides == strides && x.target_md == target_md &&
        x.storage.lock() == storage) {
      x.last_use = ++c.clock;
      return {x.mem, x.buffer};
    }
  }
  e.last_use = ++c.clock;
  // Drop entries whose storage is gone, and older versions of this same weight.
  std::erase_if(c.entries, [&](const WeightEntry& x) {
    if (x.storage.expired()) return true;
    return x.storage_ptr == e.storage_ptr && x.offset == e.offset && x.version != version &&
           x.sizes == sizes && x.strides == strides;
  });
  DnnlWeight result{e.mem, e.buffer};
  c.entries.push_back(std::move(e));
  if (c.entries.size() > kWeightCacheCapacity) {
    auto oldest = std::min_element(
        c.entries.begin(), c.entries.end(),
        [](const WeightEntry& a, const WeightEntry& b) { return a.last_use < b.last_use; });
    c.entries.erase(oldest);
  }
  return result;
}

size_t dnnl_weight_cache_size() {
  WeightCache& c = weight_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  std::erase_if(c.entries, [](const WeightEntry& x) { return x.storage.expired(); });
  return c.entries.size();
}

uint64_t dnnl_weight_reorder_count() {
  WeightCache& c = weight_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.reorders;
}

// ---- strided copies ----

namespace {
template <class T>
void copy_typed(const Tensor& dst, const Tensor& src) {
  auto sz = dst.shape();
  auto ds = dst.int_strides();
  auto ss = src.int_strides();
  const int64_t n = static_cast<int64_t>(sz.size());
  T* dp = static_cast<T*>(dst.raw_data());
  const T* sp = static_cast<const T*>(src.raw_data());
  // The destination's two innermost dims (the smallest strides among sizes > 1) are the inner
  // loops, so writes stream and the other dims' index is decoded once per len0 x len1 block: a
  // transpose with a short innermost dim (an image's nchw -> nhwc, 3 channels) decoded it every
  // 3 elements, at about 1.5 GB/s.
  int64_t d0 = -1, d1 = -1;
  for (int64_t d = n - 1; d >= 0; --d) {
    if (sz[d] <= 1) continue;
    if (d0 < 0 || ds[d] < ds[d0]) {
      d1 = d0;
      d0 = d;
    } else if (d1 < 0 || ds[d] < ds[d1]) {
      d1 = d;
    }
  }
  if (d0 < 0) {  // a single element
    *dp = *sp;
    return;
  }
  std::vector<int64_t> outer_dims;
  for (int64_t d = 0; d < n; ++d)
    if (d != d0 && d != d1 && sz[d] > 1) outer_dims.push_back(d);
  int64_t outer = 1;
  for (int64_t d : outer_dims) outer *= sz[d];
  const int64_t len0 = sz[d0], ds0 = ds[d0], ss0 = ss[d0];
  const int64_t len1 = d1 >= 0 ? sz[d1] : 1, ds1 = d1 >= 0 ? ds[d1] : 0, ss1 = d1 >= 0 ? ss[d1] : 0;
  auto decode = [&](int64_t o, int64_t& doff, int64_t& soff) {
    doff = soff = 0;
    for (int64_t k = static_cast<int64_t>(outer_dims.size()) - 1; k >= 0; --k) {
      const int64_t d = outer_dims[k];
      const int64_t i = o % sz[d];
      o /= sz[d];
      doff += i * ds[d];
      soff += i * ss[d];
    }
  };
  // Rows of len0 elements, (outer index, i1) flattened; each thread takes one contiguous range
  // and decodes its start once.
  const int64_t rows = outer * len1;
  const int nt = rows > 1 && rows * len0 > kParallelGrain ? lathe::num_threads() : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t begin = rows * t / threads, end = rows * (t + 1) / threads;
    if (begin < end) {
      int64_t o = begin / len1, i1 = begin % len1, doff = 0, soff = 0;
      decode(o, doff, soff);
      for (int64_t r = begin; r < end; ++r) {
        T* dq = dp + doff + i1 * ds1;
        const T* sq = sp + soff + i1 * ss1;
        if (ds0 == 1 && ss0 == 1) {
          std::memcpy(dq, sq, static_cast<size_t>(len0) * sizeof(T));
        } else {
          for (int64_t i = 0; i < len0; ++i) dq[i * ds0] = sq[i * ss0];
        }
        if (++i1 == len1 && r + 1 < end) {
          i1 = 0;
          decode(++o, doff, soff);
        }
      }
    }
  }
}
}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  LATHE_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "[copy] ",
              dst.shape_string(), " <- ", src.shape_string(), ": sizes and dtype must match");
  if (dst.numel() == 0) return;
  LATHE_DISPATCH_ALL_AND_HALF(dst.dtype(), "copy", [&] { copy_typed<scalar_t>(dst, src); });
}

Tensor to_contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = empty(t.sizes(), t.dtype());
  copy_into(out, t);
  return out;
}

Tensor to_channels_last_copy(const Tensor& t) {
  LATHE_CHECK(t.dim() == 4, "[channels_last] needs a 4-d tensor, got ", t.shape_string());
  if (t.is_channels_last()) return t;
  Tensor out = empty_strided(t.sizes(), channels_last_strides(t.sizes()), t.dtype());
  copy_into(out, t);
  return out;
}

namespace {
void append_act(dnnl::post_ops& po, PostOps::Act act, float lo, float hi) {
  using A = PostOps::Act;
  if (act == A::relu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (act == A::clip) po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, lo, hi);
  if (act == A::gelu_erf) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  if (act == A::gelu_tanh) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
}
}  // namespace

dnnl::primitive_attr dnnl_post_ops_attr(const PostOps& post) {
  dnnl::primitive_attr attr = dnnl_default_attr();
  if (post.empty()) return attr;
  dnnl::post_ops po;
  append_act(po, post.act, post.act_lo, post.act_hi);
  if (post.sum) po.append_sum(1.f);
  append_act(po, post.act2, post.act2_lo, post.act2_hi);
  attr.set_post_ops(po);
  return attr;
}

void dnnl_add_post_ops_key(DnnlKey& key, const PostOps& post) {
  auto bits = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return static_cast<int64_t>(i);
  };
  key.add(static_cast<int64_t>(post.act)).add(bits(post.act_lo)).add(bits(post.act_hi));
  key.add(post.sum ? 1 : 0);
  key.add(static_cast<int64_t>(post.act2)).add(bits(post.act2_lo)).add(bits(post.act2_hi));
}

}  // namespace lathe::detail
