// Elementwise work fused into a convolution or a linear layer (oneDNN post-ops), applied in this
// order to each output element v:
//   v = act(v); if (sum) v += (the value out held before the call); v = act2(v).
// A default PostOps is a plain convolution / linear.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace lathe::detail {

struct PostOps {
  enum class Act : uint8_t { none, relu, clip, gelu_erf, gelu_tanh };
  Act act = Act::none;
  float act_lo = 0, act_hi = 0;  // clip bounds
  bool sum = false;
  Act act2 = Act::none;
  float act2_lo = 0, act2_hi = 0;
  bool empty() const { return act == Act::none && !sum && act2 == Act::none; }
};

// The activation on one value (the reference for the direct loops; oneDNN runs its own).
template <class T>
T apply_post_act(T v, PostOps::Act act, float lo, float hi) {
  switch (act) {
    case PostOps::Act::relu:
      return v > T(0) || v != v ? v : T(0);  // NaN stays NaN
    case PostOps::Act::clip:
      return std::min<T>(std::max<T>(v, T(lo)), T(hi));
    case PostOps::Act::gelu_erf:
      return T(0.5) * v * (T(1) + std::erf(v / std::sqrt(T(2))));
    case PostOps::Act::gelu_tanh: {
      const T k = std::sqrt(T(2) / T(3.14159265358979323846));
      return T(0.5) * v * (T(1) + std::tanh(k * (v + T(0.044715) * v * v * v)));
    }
    case PostOps::Act::none:
      break;
  }
  return v;
}

}  // namespace lathe::detail
