#pragma once
// Symbolic integer expressions: immutable, hash-consed nodes owned by an ExprPool.
//
// Canonical form: a polynomial (kAdd) is a constant plus integer multiples of monomials; a
// monomial (kMul) is a product of atoms with positive exponents; atoms are symbols and the
// non-polynomial nodes FloorDiv, CeilDiv, Mod, Min, Max. Relations (kEq ... kGe) compare two
// expressions and are the symbolic booleans. Structurally equal expressions are one object, so
// equality is a pointer compare.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

namespace lathe::sym {

class ExprPool;

enum class ExprKind : uint8_t {
  kInt,       // integer constant: value()
  kBool,      // boolean constant: value() is 0 or 1
  kSymbol,    // a symbol: value() is its id in the ShapeEnv
  kAdd,       // value() + sum(coeffs()[i] * args()[i]); args are monomials
  kMul,       // product of args()[i] ** coeffs()[i]; args are atoms
  kFloorDiv,  // floor(args[0] / args[1])  (Python //)
  kCeilDiv,   // ceil(args[0] / args[1])
  kMod,       // args[0] - args[1] * floor(args[0] / args[1])  (Python %)
  kMin,       // minimum of args (2 or more)
  kMax,       // maximum of args (2 or more)
  kEq,        // args[0] == args[1]
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
};

class Expr {
 public:
  ExprKind kind() const { return kind_; }
  int64_t value() const { return value_; }
  std::span<const Expr* const> args() const { return args_; }
  std::span<const int64_t> coeffs() const { return coeffs_; }
  const Expr* arg(size_t i) const { return args_[i]; }
  ExprPool* pool() const { return pool_; }
  size_t hash() const { return hash_; }

  bool is_int() const { return kind_ == ExprKind::kInt; }
  bool is_bool() const { return kind_ == ExprKind::kBool; }
  bool is_symbol() const { return kind_ == ExprKind::kSymbol; }
  bool is_relation() const { return kind_ >= ExprKind::kEq; }
  // Symbols only: unbacked symbols (data-dependent sizes) have no hint and print as u<n>.
  bool is_unbacked() const { return flag_; }
  // Symbols only: the number in the printed name (s3 -> 3).
  int64_t display_index() const { return aux_; }

 private:
  friend class ExprPool;
  Expr() = default;
  ExprKind kind_ = ExprKind::kInt;
  bool flag_ = false;
  int64_t value_ = 0;
  int64_t aux_ = 0;
  size_t hash_ = 0;
  ExprPool* pool_ = nullptr;
  std::vector<const Expr*> args_;
  std::vector<int64_t> coeffs_;
};

// How to print: kFunctional writes FloorDiv(a, b) and Mod(a, b); kPython writes a // b and a % b.
// A symbol namer, when given, writes each symbol (guards print sources instead of s0).
struct PrintOptions {
  enum class Style { kFunctional, kPython };
  Style style = Style::kFunctional;
  std::function<void(std::ostream&, const Expr* symbol)> symbol_namer;
};

// Readable, deterministic text: "s0*s1 + 2*s2 - 1", "FloorDiv(s0, 8)", "s0 > 4".
std::string to_string(const Expr* e, const PrintOptions& options = {});
void print(std::ostream& os, const Expr* e, const PrintOptions& options = {});

// A total order consistent with structural equality (0 iff a == b); orders terms and factors.
int compare(const Expr* a, const Expr* b);

// Degree of a monomial (sum of exponents; an atom has degree 1, a constant 0).
int64_t degree(const Expr* monomial);

// Evaluates with Python semantics given symbol_values[symbol id]. Relations give 0 or 1. Throws
// SymError on division by zero or int64 overflow.
int64_t evaluate(const Expr* e, std::span<const int64_t> symbol_values);

// Appends the distinct symbols of e in first-seen order.
void collect_symbols(const Expr* e, std::vector<const Expr*>& out);

// The negated relation: Eq <-> Ne, Lt <-> Ge, Le <-> Gt.
ExprKind negate_relation(ExprKind k);
// "==", "!=", "<", "<=", ">", ">=".
const char* relation_symbol(ExprKind k);

}  // namespace lathe::sym
