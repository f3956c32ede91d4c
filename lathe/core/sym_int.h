// SymInt: the element type of sizes and strides, from lathe/sym. One machine word: an inline
// int64 in eager code (no allocation), or a symbolic expression owned by a ShapeEnv while tracing.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/sym/sym_int.h"

namespace lathe {

using sym::SymBool;
using sym::SymInt;

// Python floor division and ceiling division on sizes; min and max.
inline SymInt floor_div(SymInt a, SymInt b) { return sym::floordiv(a, b); }
inline SymInt ceil_div(SymInt a, SymInt b) { return sym::ceildiv(a, b); }
using sym::sym_max;
using sym::sym_min;

using Shape = std::vector<SymInt>;

// Concrete sizes of a shape (every element must be concrete).
std::vector<int64_t> to_ints(const Shape& s);
Shape to_shape(const std::vector<int64_t>& v);
// Product of the sizes.
SymInt shape_numel(const Shape& s);

}  // namespace lathe
