// Structural equality and hashing of the pieces of a graph (symbolic sizes, shapes, attributes).
// Symbolic sizes compare by expression structure, so two graphs traced with different ShapeEnvs
// compare equal when their expressions are the same; nothing here guards.
#pragma once

#include <cstdint>
#include <string_view>

#include "lathe/core/sym_int.h"
#include "lathe/ops/attrs.h"

namespace lathe::ir {

// Accumulates a 64-bit hash: each word is spread by an odd multiply and folded into the state,
// which goes through splitmix64's finalizer (a bijection with full avalanche). Inline: the lazy
// device hashes every recorded op (attributes, input sources, output sizes) with it.
class StructuralHasher {
 public:
  void add(uint64_t v) {
    uint64_t x = (h_ ^ (v * 0xd6e8feb86659fd93ull)) + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    h_ = x ^ (x >> 31);
  }
  void add(std::string_view s);
  // Inline sizes are one word each; a symbolic one is a marker and its expression.
  void add(SymInt v) {
    if (const sym::Expr* e = v.expr()) [[unlikely]]
      add_expr(e);
    else
      add(static_cast<uint64_t>(*v.maybe_int()));
  }
  void add(const Shape& s) {
    add(static_cast<uint64_t>(s.size()));
    for (SymInt v : s) add(v);
  }
  void add(const AttrValue& v);
  void add(const Attrs& a);
  uint64_t get() const { return h_; }

 private:
  void add_value(const AttrValue& v);  // the value alone (its alternative hashed by the caller)
  void add_expr(const sym::Expr* e);   // a symbolic size: a marker, then the expression
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
