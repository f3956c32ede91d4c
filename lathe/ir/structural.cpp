#include "lathe/ir/structural.h"

#include <bit>
#include <cstring>

#include "lathe/sym/expr.h"

namespace lathe::ir {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

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

}  // namespace

void StructuralHasher::add(uint64_t v) { h_ = splitmix(h_ ^ splitmix(v)); }

void StructuralHasher::add(std::string_view s) {
  add(static_cast<uint64_t>(s.size()));
  uint64_t w = 0;
  size_t n = 0;
  for (char c : s) {
    w = (w << 8) | static_cast<unsigned char>(c);
    if (++n == 8) {
      add(w);
      w = 0;
      n = 0;
    }
  }
  if (n) add(w);
}

void StructuralHasher::add(SymInt v) {
  if (const sym::Expr* e = v.expr()) {
    add(uint64_t{1});
    hash_expr(*this, e);
  } else {
    add(uint64_t{0});
    add(static_cast<uint64_t>(*v.maybe_int()));
  }
}

void StructuralHasher::add(const Shape& s) {
  add(static_cast<uint64_t>(s.size()));
  for (SymInt v : s) add(v);
}

void StructuralHasher::add(const AttrValue& v) {
  add(static_cast<uint64_t>(v.index()));
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
    add(std::string_view(name));
    add(v);
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
