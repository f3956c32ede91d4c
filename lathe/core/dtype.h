// Element types and PyTorch's promotion rules between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>

#include "lathe/core/half.h"

namespace lathe {

// bf16 and f16 (lathe/core/half.h) come last so that the older values keep their numbers; the
// promotion order is promote_types'.
enum class DType : uint8_t { b8, i32, i64, f32, f64, bf16, f16 };

// Bytes per element.
size_t itemsize(DType t);
// "f32", "i64", ... as printed in shapes and errors.
const char* dtype_name(DType t);
bool is_floating(DType t);
// bf16 and f16: stored in 16 bits, computed in f32 (kernels read them widened and round once).
inline bool is_low_precision(DType t) { return t == DType::bf16 || t == DType::f16; }
// The result dtype of a binary op between two tensors, as PyTorch's: bool < int32 < int64 <
// bf16, f16 < f32 < f64, with bf16 and f16 together giving f32.
DType promote_types(DType a, DType b);
// The result dtype of a tensor op with a Python-style scalar (float scalar on an integer
// tensor gives f32; an int scalar keeps the tensor's dtype; bool tensors become i64).
DType promote_with_scalar(DType t, bool scalar_is_floating);

std::ostream& operator<<(std::ostream& os, DType t);

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::b8;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::f16;
};

}  // namespace lathe

// Runs a generic lambda body with `scalar_t` bound to the C++ type of dtype `DT`.
#define LATHE_DISPATCH_ALL(DT, NAME, ...)                                                     \
  [&] {                                                                                       \
    switch (DT) {                                                                             \
      case ::lathe::DType::f32: {                                                             \
        using scalar_t = float;                                                               \
        return __VA_ARGS__();                                                                 \
      }                                                                                       \
      case ::lathe::DType::f64: {                                                             \
        using scalar_t = double;                                                              \
        return __VA_ARGS__();                                                                 \
      }                                                                                       \
      case ::lathe::DType::i64: {                                                             \
        using scalar_t = int64_t;                                                             \
        return __VA_ARGS__();                                                                 \
      }                                                                                       \
      case ::lathe::DType::i32: {                                                             \
        using scalar_t = int32_t;                                                             \
        return __VA_ARGS__();                                                                 \
      }                                                                                       \
      case ::lathe::DType::b8: {                                                              \
        using scalar_t = bool;                                                                \
        return __VA_ARGS__();                                                                 \
      }                                                                                       \
      default:                                                                                \
        break;                                                                                \
    }                                                                                         \
    throw ::lathe::Error(::lathe::detail::str("[", NAME, "] dtype ", ::lathe::dtype_name(DT), \
                                              " is not supported here"));                     \
  }()

// LATHE_DISPATCH_ALL and the 16-bit floats (scalar_t = BFloat16 / Half): for kernels that only
// move, convert or fill values (copies, casts, factories, printing).
#define LATHE_DISPATCH_ALL_AND_HALF(DT, NAME, ...)        \
  [&] {                                                   \
    switch (DT) {                                         \
      case ::lathe::DType::bf16: {                        \
        using scalar_t = ::lathe::BFloat16;               \
        return __VA_ARGS__();                             \
      }                                                   \
      case ::lathe::DType::f16: {                         \
        using scalar_t = ::lathe::Half;                   \
        return __VA_ARGS__();                             \
      }                                                   \
      default:                                            \
        return LATHE_DISPATCH_ALL(DT, NAME, __VA_ARGS__); \
    }                                                     \
  }()

#define LATHE_DISPATCH_FLOATING(DT, NAME, ...)                                                    \
  [&] {                                                                                           \
    switch (DT) {                                                                                 \
      case ::lathe::DType::f32: {                                                                 \
        using scalar_t = float;                                                                   \
        return __VA_ARGS__();                                                                     \
      }                                                                                           \
      case ::lathe::DType::f64: {                                                                 \
        using scalar_t = double;                                                                  \
        return __VA_ARGS__();                                                                     \
      }                                                                                           \
      default:                                                                                    \
        throw ::lathe::Error(::lathe::detail::str("[", NAME, "] dtype ", ::lathe::dtype_name(DT), \
                                                  " is not supported (needs f32 or f64)"));       \
    }                                                                                             \
  }()
