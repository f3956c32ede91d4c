#include "lathe/kernels/elementwise.h"

#include <cstring>

#include "lathe/kernels/parallel_chunks.h"

namespace lathe::kernels {

Tensor broadcast_to(const Tensor& t, const Shape& sizes) {
  if (t.sizes() == sizes) return t;
  const int64_t n = static_cast<int64_t>(sizes.size()), k = t.dim();
  Shape st(n, 0);
  for (int64_t i = 0; i < k; ++i) {
    int64_t o = n - k + i;
    st[o] = t.sizes()[i] == sizes[o] ? t.strides()[i] : SymInt(0);
  }
  return make_view(t, sizes, std::move(st), t.storage_offset());
}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    const size_t nbytes = dst.nbytes();
    char* d = static_cast<char*>(dst.raw_data());
    const char* s = static_cast<const char*>(src.raw_data());
    int threads = dst.numel() >= kParallelGrain * 8 ? num_threads() : 1;
    const int64_t n = static_cast<int64_t>(nbytes);
    parallel_chunks(n, chunk_size(n, threads, 4096, 64), threads,
                    [&](int64_t b, int64_t e) { std::memcpy(d + b, s + b, e - b); });
    return;
  }
  LATHE_DISPATCH_ALL_AND_HALF(dst.dtype(), "copy", [&] {
    using Out = scalar_t;
    LATHE_DISPATCH_ALL_AND_HALF(src.dtype(), "copy", [&] {
      using In = scalar_t;
      map1<Out, In>(dst, src, [](In v) { return static_cast<Out>(v); });
    });
  });
}

void fill(const Tensor& t, double v) {
  LATHE_DISPATCH_ALL_AND_HALF(t.dtype(), "fill", [&] {
    scalar_t val = static_cast<scalar_t>(v);
    LoopPlan plan = make_loop_plan({t});
    run_loop(plan, [&](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<scalar_t*>(p[0] + i * s[0]) = val;
    });
  });
}

}  // namespace lathe::kernels
