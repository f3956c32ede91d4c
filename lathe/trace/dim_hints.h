// DimHints: what mark_dynamic / mark_static said about each dim of a tensor. Stored on the
// TensorImpl (TensorImpl::dim_hints) and read when a compiled function traces the tensor.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

struct DimHints {
  enum class Kind : uint8_t { kNone, kDynamic, kStatic };
  struct Dim {
    Kind kind = Kind::kNone;
    int64_t min = 2;
    int64_t max = INT64_MAX;
  };
  std::vector<Dim> dims;  // indexed by dim; shorter than the rank means kNone for the rest
};

}  // namespace lathe
