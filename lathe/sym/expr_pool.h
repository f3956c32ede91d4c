#pragma once
// ExprPool: owns and hash-conses expressions, and simplifies them as they are built.
//
// Every constructor returns the canonical form (see expr.h) after the rules of docs/sym.md:
// constant folding with overflow detection, like terms collected, multiples of a divisor pulled
// out of FloorDiv/CeilDiv/Mod, gcd cancellation, nested FloorDiv merged, identities with 0 and 1,
// Min/Max of comparable arguments decided, and, given a SimplifyContext, rules that need value
// ranges or divisibility facts.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "lathe/sym/expr.h"
#include "lathe/sym/value_range.h"

namespace lathe::sym {

class ShapeEnv;

// What the simplifier may know beyond structure. The ShapeEnv implements it.
class SimplifyContext {
 public:
  virtual ~SimplifyContext() = default;
  // The current range of a symbol.
  virtual ValueRange symbol_range(const Expr* symbol) const = 0;
  // True when e % k == 0 is a recorded fact (k > 1).
  virtual bool known_divisible(const Expr* e, int64_t k) const = 0;
};

class ExprPool {
 public:
  // env: the ShapeEnv that owns the pool (reached from SymInt's slow path); may be null.
  explicit ExprPool(ShapeEnv* env = nullptr, const SimplifyContext* context = nullptr);
  ~ExprPool();
  ExprPool(const ExprPool&) = delete;
  ExprPool& operator=(const ExprPool&) = delete;

  ShapeEnv* env() const { return env_; }
  const SimplifyContext* context() const { return context_; }

  const Expr* integer(int64_t v);
  const Expr* boolean(bool b);
  // A fresh symbol node; id indexes the owner's symbol table. Symbols are made by ShapeEnv.
  const Expr* new_symbol(int64_t id, int64_t display_index, bool unbacked);

  const Expr* add(const Expr* a, const Expr* b);
  const Expr* sub(const Expr* a, const Expr* b);
  const Expr* neg(const Expr* a);
  const Expr* mul(const Expr* a, const Expr* b);
  const Expr* floordiv(const Expr* a, const Expr* b);
  const Expr* ceildiv(const Expr* a, const Expr* b);
  const Expr* mod(const Expr* a, const Expr* b);
  const Expr* min(const Expr* a, const Expr* b);
  const Expr* max(const Expr* a, const Expr* b);
  // kind is kEq..kGe; decides to a kBool constant when the ranges prove it.
  const Expr* relation(ExprKind kind, const Expr* a, const Expr* b);
  // The opposite relation (a kBool is flipped).
  const Expr* negate(const Expr* rel);

  // Rebuilds e bottom-up with each symbol mapped through f, re-simplifying every node with the
  // current context. f may return its argument unchanged.
  const Expr* substitute(const Expr* e, const std::function<const Expr*(const Expr*)>& f);

  // Bounds of e from the symbol ranges of the context (unknown ranges without one).
  ValueRange bound(const Expr* e) const;
  // The value of a relation when the ranges prove it, else nullopt.
  std::optional<bool> decide(const Expr* rel);
  // True when e % k == 0 holds for every value of the symbols (structure or recorded facts).
  bool divisible(const Expr* e, int64_t k) const;

  // Number of distinct expressions created so far.
  size_t size() const { return nodes_.size(); }

 private:
  struct NodeHash {
    size_t operator()(const Expr* e) const { return e->hash(); }
  };
  struct NodeEq {
    bool operator()(const Expr* a, const Expr* b) const;
  };
  friend class PolyOps;

  const Expr* intern(Expr&& candidate);
  const Expr* node(ExprKind kind, std::vector<const Expr*> args, std::vector<int64_t> coeffs = {},
                   int64_t value = 0);
  enum class DivOp { kFloor, kCeil, kMod };
  const Expr* divide(DivOp op, const Expr* a, const Expr* b);
  const Expr* divide_by_constant(DivOp op, const Expr* a, int64_t k);
  // divide_by_constant's last step, for the residual x (no term a multiple of k) and k > 0:
  // x % k, and x // k or ceil(x / k), simplified by ranges, divisibility and nesting.
  const Expr* residual_mod(const Expr* x, int64_t k);
  const Expr* residual_div(DivOp op, const Expr* x, int64_t k);
  const Expr* divide_by_expr(DivOp op, const Expr* a, const Expr* b);
  const Expr* min_max(ExprKind kind, const Expr* a, const Expr* b);

  ShapeEnv* env_;
  const SimplifyContext* context_;
  std::vector<std::unique_ptr<Expr>> nodes_;
  std::unordered_set<const Expr*, NodeHash, NodeEq> interned_;
  const Expr* true_ = nullptr;
  const Expr* false_ = nullptr;
};

}  // namespace lathe::sym
