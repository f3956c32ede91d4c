// Structural equality and hashing of the pieces of a graph (symbolic sizes, shapes, attributes).
// Symbolic sizes compare by expression structure, so two graphs traced with different ShapeEnvs
// compare equal when their expressions are the same; nothing here guards.
#pragma once

#include <cstdint>
#include <string_view>

#include "lathe/core/sym_int.h"
#include "lathe/ops/attrs.h"

namespace lathe::ir {

// Accumulates a 64-bit hash (splitmix64 steps).
class StructuralHasher {
 public:
  void add(uint64_t v);
  void add(std::string_view s);
  void add(SymInt v);
  void add(const Shape& s);
  void add(const AttrValue& v);
  void add(const Attrs& a);
  uint64_t get() const { return h_; }

 private:
  uint64_t h_ = 0x6c617468652d6972ull;
};

// Same value: equal integers, or expressions of the same structure (same symbols, by number).
bool same_sym(SymInt a, SymInt b);
bool same_shape(const Shape& a, const Shape& b);
// Same alternative and value; doubles compare by bits (so NaN equals itself, -0.0 differs from 0).
bool same_attr(const AttrValue& a, const AttrValue& b);
// Same names with the same values, in the same order.
bool same_attrs(const Attrs& a, const Attrs& b);

}  // namespace lathe::ir
