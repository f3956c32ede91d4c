// DimHints: what mark_dynamic / mark_static said about each dim of a tensor. Stored in the
// tensor's TensorSlot::compile_hints extension and read when a compiled function traces it.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe {

struct DimHints final : TensorExtension {
  enum class Kind : uint8_t { kNone, kDynamic, kStatic };
  struct Dim {
    Kind kind = Kind::kNone;
    int64_t min = 2;
    int64_t max = INT64_MAX;
  };
  std::vector<Dim> dims;  // indexed by dim; shorter than the rank means kNone for the rest

  // The hints of t, or null when none were given.
  static const DimHints* of(const Tensor& t) {
    return static_cast<const DimHints*>(t.impl().extension(TensorSlot::compile_hints).get());
  }
};

}  // namespace lathe
