#include "lathe/ir/structural.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "lathe/sym/expr.h"

namespace lathe::ir {
namespace {

bool same_expr(const sym::Expr* a, const sym::Expr* b) {
  if (a == b) return true;
  if (a->kind() != b->kind() || a->value() != b->value()) return false;
  if (a->is_symbol() &&
      (a->is_unbacked() != b->is_unbacked() || a->display_index() != b->display_index()))
    return false;
  if (a->args().size() != b->args().size() || a->coeffs().size() != b->coeffs().size())
    return false;
  for (size_t i = 0; i < a->coeffs().size(); ++i)
    if (a->coeffs()[i] != b->coeffs()[i]) return false;
  for (size_t i = 0; i < a->args().size(); ++i)
    if (!same_expr(a->arg(i), b->arg(i))) return false;
  return true;
}

void hash_expr(StructuralHasher& h, const sym::Expr* e) {
  h.add(static_cast<uint64_t>(e->kind()));
  h.add(static_cast<uint64_t>(e->value()));
  if (e->is_symbol()) {
    h.add(static_cast<uint64_t>(e->is_unbacked()));
    h.add(static_cast<uint64_t>(e->display_index()));
  }
  h.add(static_cast<uint64_t>(e->args().size()));
  for (int64_t c : e->coeffs()) h.add(static_cast<uint64_t>(c));
  for (const sym::Expr* a : e->args()) hash_expr(h, a);
}

// A name in one word: its 8-byte chunks (little-endian, zero-padded) rotated and xored, starting
// from its length. A short tail is gathered in a register: copying it into a zeroed stack word
// and loading that back stalled on store forwarding, and most attribute names are that short.
uint64_t fold_name(const char* name) {
  const size_t len = std::strlen(name);
  uint64_t w = len;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t chunk;
    std::memcpy(&chunk, name + i, 8);
    w = std::rotl(w, 23) ^ chunk;
  }
  if (i < len) {
    uint64_t chunk = 0;
    for (size_t k = 0; i + k < len; ++k)
      chunk |= uint64_t{static_cast<unsigned char>(name[i + k])} << (8 * k);
    w = std::rotl(w, 23) ^ chunk;
  }
  return w;
}

}  // namespace

void StructuralHasher::add(std::string_view s) {
  add(static_cast<uint64_t>(s.size()));
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    add(w);
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    add(w);
  }
}

void StructuralHasher::add_expr(const sym::Expr* e) {
  // A marker no inline size or stride takes, then the expression.
  add(uint64_t{0x5bd1e9955bd1e995ull});
  hash_expr(*this, e);
}

void StructuralHasher::add(const AttrValue& v) {
  add(static_cast<uint64_t>(v.index()));
  add_value(v);
}

void StructuralHasher::add_value(const AttrValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t>)
          add(static_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, double>)
          add(std::bit_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, DType>)
          add(static_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, std::string>)
          add(std::string_view(x));
        else
          add(x);  // Shape
      },
      v);
}

void StructuralHasher::add(const Attrs& a) {
  add(static_cast<uint64_t>(a.items().size()));
  for (const auto& [name, v] : a.items()) {
    // The name folded into one word together with the value's alternative, then the value:
    // one serial step per name instead of one per 8 characters plus one for the alternative.
    add(fold_name(name) ^ (static_cast<uint64_t>(v.index()) << 59));
    add_value(v);
  }
}

bool same_sym(SymInt a, SymInt b) {
  const sym::Expr* ea = a.expr();
  const sym::Expr* eb = b.expr();
  if (!ea || !eb) return !ea && !eb && *a.maybe_int() == *b.maybe_int();
  return same_expr(ea, eb);
}

bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_sym(a[i], b[i])) return false;
  return true;
}

bool same_attr(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, double>)
          return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
        else if constexpr (std::is_same_v<T, Shape>)
          return same_shape(x, y);
        else
          return x == y;
      },
      a);
}

bool same_attrs(const Attrs& a, const Attrs& b) {
  if (a.items().size() != b.items().size()) return false;
  for (size_t i = 0; i < a.items().size(); ++i) {
    const auto& [na, va] = a.items()[i];
    const auto& [nb, vb] = b.items()[i];
    if (std::strcmp(na, nb) != 0 || !same_attr(va, vb)) return false;
  }
  return true;
}

}  // namespace lathe::ir
