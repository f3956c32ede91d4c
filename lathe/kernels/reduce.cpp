#include "lathe/kernels/reduce.h"

#include <cmath>
#include <limits>

#include "lathe/core/threads.h"
#include "lathe/kernels/elementwise.h"
#include "lathe/kernels/parallel_chunks.h"

namespace lathe::kernels {
namespace {

// Accumulator type: double for floats (accuracy), int64 for integers.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// x with its dims in the order `perm`, as one contiguous block (copied unless already so).
Tensor permuted_contiguous(const Tensor& x, const std::vector<int64_t>& perm) {
  Shape sizes, strides;
  for (int64_t d : perm) {
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  Tensor view = make_view(x, sizes, strides, x.storage_offset());
  if (view.is_contiguous()) return view;
  Tensor out = empty(sizes, x.dtype());
  copy(out, view);
  return out;
}

template <class T, class Out>
void reduce_rows(const T* x, Out* out, int64_t M, int64_t R, ReduceKind kind, int64_t correction) {
  int threads = M * R >= 65536 && M > 1 ? num_threads() : 1;
  parallel_items(M, threads, [&](int64_t m) {
    const T* row = x + m * R;
    switch (kind) {
      case ReduceKind::sum:
      case ReduceKind::mean: {
        Acc<T> acc = 0;
        for (int64_t r = 0; r < R; ++r) acc += static_cast<Acc<T>>(row[r]);
        if (kind == ReduceKind::mean)
          out[m] = static_cast<Out>(R ? static_cast<double>(acc) / static_cast<double>(R)
                                      : std::numeric_limits<double>::quiet_NaN());
        else
          out[m] = static_cast<Out>(acc);
        break;
      }
      case ReduceKind::amax:
      case ReduceKind::amin:
      case ReduceKind::argmax:
      case ReduceKind::argmin: {
        bool is_max = kind == ReduceKind::amax || kind == ReduceKind::argmax;
        T best = row[0];
        int64_t best_i = 0;
        for (int64_t r = 1; r < R; ++r) {
          T v = row[r];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(best)) break;
            if (std::isnan(v)) {
              best = v;
              best_i = r;
              break;
            }
          }
          if (is_max ? v > best : v < best) {
            best = v;
            best_i = r;
          }
        }
        if (kind == ReduceKind::argmax || kind == ReduceKind::argmin)
          out[m] = static_cast<Out>(best_i);
        else
          out[m] = static_cast<Out>(best);
        break;
      }
      case ReduceKind::var:
      case ReduceKind::std: {
        double mean = 0;
        for (int64_t r = 0; r < R; ++r) mean += static_cast<double>(row[r]);
        mean /= static_cast<double>(R);
        double ss = 0;
        for (int64_t r = 0; r < R; ++r) {
          double d = static_cast<double>(row[r]) - mean;
          ss += d * d;
        }
        double denom = static_cast<double>(R - correction);
        double v = denom > 0 ? ss / denom : std::numeric_limits<double>::quiet_NaN();
        out[m] = static_cast<Out>(kind == ReduceKind::std ? std::sqrt(v) : v);
        break;
      }
    }
  });
}

}  // namespace

Tensor reduce(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, ReduceKind kind,
              DType out_dtype, int64_t correction) {
  const int64_t nd = x.dim();
  std::vector<bool> red(nd, false);
  for (int64_t d : dims) red[d] = true;
  std::vector<int64_t> perm;
  Shape kept_sizes, out_sizes;
  int64_t M = 1, R = 1;
  for (int64_t d = 0; d < nd; ++d) {
    int64_t s = x.size(d).expect_int();
    if (!red[d]) {
      perm.push_back(d);
      kept_sizes.push_back(s);
      out_sizes.push_back(s);
      M *= s;
    } else if (keepdim) {
      out_sizes.push_back(1);
    }
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (red[d]) {
      perm.push_back(d);
      R *= x.size(d).expect_int();
    }
  }
  bool needs_element = kind != ReduceKind::sum && kind != ReduceKind::mean &&
                       kind != ReduceKind::var && kind != ReduceKind::std;
  LATHE_CHECK(!(needs_element && R == 0 && M > 0), "[",
              kind == ReduceKind::amax ? "amax" : "reduce", "] cannot reduce over an empty dim of ",
              x.shape_string(), ": the operation has no identity");
  Tensor xp = permuted_contiguous(x, perm);
  Tensor out = empty(kept_sizes, out_dtype);
  LATHE_DISPATCH_ALL(x.dtype(), "reduce", [&] {
    using T = scalar_t;
    const T* px = static_cast<const T*>(xp.raw_data());
    LATHE_DISPATCH_ALL(out_dtype, "reduce", [&] {
      using O = scalar_t;
      if (M > 0) reduce_rows<T, O>(px, static_cast<O*>(out.raw_data()), M, R, kind, correction);
    });
  });
  return make_view(out, out_sizes, contiguous_strides(out_sizes), 0);
}

}  // namespace lathe::kernels
