#pragma once
// Polynomial arithmetic on the canonical form of expressions (internal to lathe_sym): sums of
// integer multiples of monomials, and monomials as products of atoms.

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lathe/sym/expr.h"
#include "lathe/sym/expr_pool.h"
#include "lathe/sym/int_math.h"

namespace lathe::sym {

// A polynomial: distinct monomials with nonzero coefficients, plus a constant.
struct Poly {
  int64_t constant = 0;
  std::vector<std::pair<const Expr*, int64_t>> terms;
};

// Throws SymError when e is a condition rather than an integer expression.
void require_integer(const Expr* e);

class PolyOps {
 public:
  explicit PolyOps(ExprPool& pool) : pool_(pool) {}

  // Collects like terms: sum of scale_i * p_i.
  struct Builder {
    int64_t constant = 0;
    std::unordered_map<const Expr*, int64_t> coeff;
    std::vector<const Expr*> order;
    void add_term(const Expr* m, int64_t c) {
      if (m == nullptr) {
        constant = detail::checked_add(constant, c);
        return;
      }
      auto [it, inserted] = coeff.try_emplace(m, 0);
      if (inserted) order.push_back(m);
      it->second = detail::checked_add(it->second, c);
    }
    void add(const Poly& p, int64_t scale) {
      constant = detail::checked_add(constant, detail::checked_mul(p.constant, scale));
      for (auto& [m, c] : p.terms) add_term(m, detail::checked_mul(c, scale));
    }
    Poly finish() const {
      Poly p;
      p.constant = constant;
      for (const Expr* m : order) {
        int64_t c = coeff.at(m);
        if (c != 0) p.terms.push_back({m, c});
      }
      return p;
    }
  };

  // The polynomial view of an integer expression (a constant, a sum or one monomial).
  static Poly to_poly(const Expr* e);
  // Factors of a monomial as (atom, exponent).
  static std::vector<std::pair<const Expr*, int64_t>> factors(const Expr* m);
  // The monomial of the given factors; nullptr for the empty product (the constant 1).
  const Expr* monomial(std::vector<std::pair<const Expr*, int64_t>> f);
  const Expr* mul_monomials(const Expr* a, const Expr* b);
  // The product, like terms collected.
  Poly mul(const Poly& a, const Poly& b);
  // Exact division: c * FloorDiv(x, k) * rest == (c / k) * x * rest when k | c and k | x.
  bool expand_exact_divisions(Poly& p);
  // The canonical expression of p: a constant, a bare monomial or a sorted kAdd node.
  const Expr* from_poly(Poly p);
  // gcd of all coefficients and the constant (0 for the zero polynomial).
  static int64_t content(const Poly& p);
  // p / g for a g that divides every coefficient and the constant.
  static Poly divide_exact(const Poly& p, int64_t g);
  // If monomial m is a multiple of monomial d, m / d (nullptr for 1); else sets ok = false.
  const Expr* divide_monomial(const Expr* m, const Expr* d, bool& ok);

 private:
  ExprPool& pool_;
};

}  // namespace lathe::sym
