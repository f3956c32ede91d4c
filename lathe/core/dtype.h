// Element types and PyTorch's promotion rules between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>

namespace lathe {

enum class DType : uint8_t { b8, i32, i64, f32, f64 };

// Bytes per element.
size_t itemsize(DType t);
// "f32", "i64", ... as printed in shapes and errors.
const char* dtype_name(DType t);
bool is_floating(DType t);
// The result dtype of a binary op between two tensors (bool < int32 < int64 < f32 < f64).
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

}  // namespace lathe

// Runs a generic lambda body with `scalar_t` bound to the C++ type of dtype `DT`.
#define LATHE_DISPATCH_ALL(DT, NAME, ...)                                     \
  [&] {                                                                       \
    switch (DT) {                                                             \
      case ::lathe::DType::f32: {                                             \
        using scalar_t = float;                                               \
        return __VA_ARGS__();                                                 \
      }                                                                       \
      case ::lathe::DType::f64: {                                             \
        using scalar_t = double;                                              \
        return __VA_ARGS__();                                                 \
      }                                                                       \
      case ::lathe::DType::i64: {                                             \
        using scalar_t = int64_t;                                             \
        return __VA_ARGS__();                                                 \
      }                                                                       \
      case ::lathe::DType::i32: {                                             \
        using scalar_t = int32_t;                                             \
        return __VA_ARGS__();                                                 \
      }                                                                       \
      case ::lathe::DType::b8: {                                              \
        using scalar_t = bool;                                                \
        return __VA_ARGS__();                                                 \
      }                                                                       \
    }                                                                         \
    throw ::lathe::Error(::lathe::detail::str("[", NAME, "] unknown dtype")); \
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
