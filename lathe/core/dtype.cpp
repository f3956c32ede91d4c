#include "lathe/core/dtype.h"

#include <ostream>

#include "lathe/core/error.h"

namespace lathe {

size_t itemsize(DType t) {
  switch (t) {
    case DType::b8:
      return 1;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::b8:
      return "bool";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }

DType promote_types(DType a, DType b) {
  // The enum is ordered by promotion rank.
  return static_cast<uint8_t>(a) >= static_cast<uint8_t>(b) ? a : b;
}

DType promote_with_scalar(DType t, bool scalar_is_floating) {
  if (scalar_is_floating) return is_floating(t) ? t : DType::f32;
  return t == DType::b8 ? DType::i64 : t;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace lathe
