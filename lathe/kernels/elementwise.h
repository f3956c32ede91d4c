// Elementwise compute over strided tensors (same-shape operands; callers broadcast first).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/kernels/loop.h"

namespace lathe::kernels {

// A stride-0 broadcast view of t with `sizes` (numpy rules; the caller has validated them).
// Unlike Tensor::expand it does not go through dispatch: kernels use it on real tensors.
Tensor broadcast_to(const Tensor& t, const Shape& sizes);

// dst = src converted to dst's dtype, any layouts, same shapes.
void copy(const Tensor& dst, const Tensor& src);
// Sets every element of t to v.
void fill(const Tensor& t, double v);

// out[i] = f(a[i]) for tensors of C++ types Out and In.
template <class Out, class In, class F>
void map1(const Tensor& out, const Tensor& a, F f) {
  LoopPlan plan = make_loop_plan({out, a});
  run_loop(plan, [&](char** p, const int64_t* s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const In* x = reinterpret_cast<const In*>(p[1]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const In*>(p[1] + i * s[1]));
    }
  });
}

// out[i] = f(a[i], b[i]).
template <class Out, class In, class F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  LoopPlan plan = make_loop_plan({out, a, b});
  run_loop(plan, [&](char** p, const int64_t* s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const In* x = reinterpret_cast<const In*>(p[1]);
    const In* y = reinterpret_cast<const In*>(p[2]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(In) && s[2] == sizeof(In)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == sizeof(Out) && s[1] == sizeof(In) && s[2] == 0) {
      const In yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(In)) {
      const In xv = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const In*>(p[1] + i * s[1]),
                                                     *reinterpret_cast<const In*>(p[2] + i * s[2]));
    }
  });
}

// out[i] = f(a[i], b[i], c[i]) where a is of type A (e.g. bool condition).
template <class Out, class A, class In, class F>
void map3(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  LoopPlan plan = make_loop_plan({out, a, b, c});
  run_loop(plan, [&](char** p, const int64_t* s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    const In* y = reinterpret_cast<const In*>(p[2]);
    const In* z = reinterpret_cast<const In*>(p[3]);
    // Unit strides, and a broadcast scalar third operand (where(cond, g, 0.0) in the vjps),
    // get loops the compiler vectorizes.
    if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(In) && s[3] == sizeof(In)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i], z[i]);
    } else if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(In) && s[3] == 0) {
      const In zv = *z;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i], zv);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const A*>(p[1] + i * s[1]),
                                                     *reinterpret_cast<const In*>(p[2] + i * s[2]),
                                                     *reinterpret_cast<const In*>(p[3] + i * s[3]));
    }
  });
}

}  // namespace lathe::kernels
