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
    case DType::bf16:
    case DType::f16:
      return 2;
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
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}

namespace {
int promotion_rank(DType t) {
  switch (t) {
    case DType::b8:
      return 0;
    case DType::i32:
      return 1;
    case DType::i64:
      return 2;
    case DType::bf16:
    case DType::f16:
      return 3;
    case DType::f32:
      return 4;
    case DType::f64:
      return 5;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ra = promotion_rank(a), rb = promotion_rank(b);
  if (ra == rb) return DType::f32;  // bf16 with f16: neither holds the other
  return ra > rb ? a : b;
}

DType promote_with_scalar(DType t, bool scalar_is_floating) {
  if (scalar_is_floating) return is_floating(t) ? t : DType::f32;
  return t == DType::b8 ? DType::i64 : t;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace lathe
