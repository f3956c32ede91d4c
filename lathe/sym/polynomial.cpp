#include "lathe/sym/polynomial.h"

#include <algorithm>

#include "lathe/sym/sym_error.h"

namespace lathe::sym {

using detail::checked_add;
using detail::checked_mul;
using detail::gcd;

namespace {

bool term_less(const std::pair<const Expr*, int64_t>& a, const std::pair<const Expr*, int64_t>& b) {
  int64_t da = degree(a.first), db = degree(b.first);
  if (da != db) return da > db;
  return compare(a.first, b.first) < 0;
}

}  // namespace

void require_integer(const Expr* e) {
  if (e->is_relation() || e->is_bool())
    throw SymError("[sym] expected an integer expression, got the condition " + to_string(e));
}

Poly PolyOps::to_poly(const Expr* e) {
  require_integer(e);
  Poly p;
  if (e->is_int()) {
    p.constant = e->value();
  } else if (e->kind() == ExprKind::kAdd) {
    p.constant = e->value();
    for (size_t i = 0; i < e->args().size(); ++i) p.terms.push_back({e->arg(i), e->coeffs()[i]});
  } else {
    p.terms.push_back({e, 1});
  }
  return p;
}

// Factors of a monomial as (atom, exponent).
std::vector<std::pair<const Expr*, int64_t>> PolyOps::factors(const Expr* m) {
  std::vector<std::pair<const Expr*, int64_t>> f;
  if (m->kind() == ExprKind::kMul) {
    for (size_t i = 0; i < m->args().size(); ++i) f.push_back({m->arg(i), m->coeffs()[i]});
  } else if (!m->is_int()) {
    f.push_back({m, 1});
  }
  return f;
}

// The monomial of the given factors; nullptr for the empty product (the constant 1).
const Expr* PolyOps::monomial(std::vector<std::pair<const Expr*, int64_t>> f) {
  std::sort(f.begin(), f.end(), [](auto& x, auto& y) { return compare(x.first, y.first) < 0; });
  std::vector<std::pair<const Expr*, int64_t>> merged;
  for (auto& [atom, e] : f) {
    if (!merged.empty() && merged.back().first == atom) {
      merged.back().second = checked_add(merged.back().second, e);
    } else {
      merged.push_back({atom, e});
    }
  }
  std::erase_if(merged, [](auto& x) { return x.second == 0; });
  if (merged.empty()) return nullptr;
  if (merged.size() == 1 && merged[0].second == 1) return merged[0].first;
  std::vector<const Expr*> args;
  std::vector<int64_t> exps;
  for (auto& [atom, e] : merged) {
    args.push_back(atom);
    exps.push_back(e);
  }
  return pool_.node(ExprKind::kMul, std::move(args), std::move(exps));
}

const Expr* PolyOps::mul_monomials(const Expr* a, const Expr* b) {
  auto f = factors(a);
  auto g = factors(b);
  f.insert(f.end(), g.begin(), g.end());
  return monomial(std::move(f));
}

Poly PolyOps::mul(const Poly& a, const Poly& b) {
  Builder r;
  r.constant = checked_mul(a.constant, b.constant);
  for (auto& [m, c] : a.terms) r.add_term(m, checked_mul(c, b.constant));
  for (auto& [m, c] : b.terms) r.add_term(m, checked_mul(c, a.constant));
  for (auto& [ma, ca] : a.terms)
    for (auto& [mb, cb] : b.terms) r.add_term(mul_monomials(ma, mb), checked_mul(ca, cb));
  return r.finish();
}

// Exact division: c * FloorDiv(x, k) * rest == (c / k) * x * rest when k | c and k | x.
bool PolyOps::expand_exact_divisions(Poly& p) {
  bool changed = false;
  Builder out;
  out.constant = p.constant;
  for (auto& [m, c] : p.terms) {
    bool done = false;
    auto f = factors(m);
    for (size_t i = 0; i < f.size() && !done; ++i) {
      const Expr* atom = f[i].first;
      if (atom->kind() != ExprKind::kFloorDiv || !atom->arg(1)->is_int()) continue;
      int64_t k = atom->arg(1)->value();
      if (k <= 1 || c % k != 0 || !pool_.divisible(atom->arg(0), k)) continue;
      auto rest = f;
      if (--rest[i].second == 0) rest.erase(rest.begin() + i);
      Poly rest_poly;
      const Expr* rm = monomial(rest);
      if (rm == nullptr) {
        rest_poly.constant = 1;
      } else {
        rest_poly.terms.push_back({rm, 1});
      }
      out.add(mul(to_poly(atom->arg(0)), rest_poly), c / k);
      done = changed = true;
    }
    if (!done) out.add_term(m, c);
  }
  if (changed) p = out.finish();
  return changed;
}

const Expr* PolyOps::from_poly(Poly p) {
  for (int i = 0; i < 8 && pool_.context() != nullptr && expand_exact_divisions(p); ++i) {
  }
  if (p.terms.empty()) return pool_.integer(p.constant);
  if (p.terms.size() == 1 && p.terms[0].second == 1 && p.constant == 0) return p.terms[0].first;
  std::sort(p.terms.begin(), p.terms.end(), term_less);
  std::vector<const Expr*> args;
  std::vector<int64_t> coeffs;
  for (auto& [m, c] : p.terms) {
    args.push_back(m);
    coeffs.push_back(c);
  }
  return pool_.node(ExprKind::kAdd, std::move(args), std::move(coeffs), p.constant);
}

// gcd of all coefficients and the constant (0 for the zero polynomial).
int64_t PolyOps::content(const Poly& p) {
  int64_t g = p.constant;
  for (auto& [m, c] : p.terms) g = gcd(g, c);
  return gcd(g, 0);
}

Poly PolyOps::divide_exact(const Poly& p, int64_t g) {
  Poly r;
  r.constant = p.constant / g;
  for (auto& [m, c] : p.terms) r.terms.push_back({m, c / g});
  return r;
}

// If monomial m is a multiple of monomial d, m / d (nullptr for 1); else sets ok = false.
const Expr* PolyOps::divide_monomial(const Expr* m, const Expr* d, bool& ok) {
  auto fm = factors(m);
  for (auto& [atom, e] : factors(d)) {
    auto it = std::find_if(fm.begin(), fm.end(), [&](auto& x) { return x.first == atom; });
    if (it == fm.end() || it->second < e) {
      ok = false;
      return nullptr;
    }
    it->second -= e;
  }
  ok = true;
  return monomial(std::move(fm));
}

}  // namespace lathe::sym
