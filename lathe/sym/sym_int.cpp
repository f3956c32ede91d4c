#include "lathe/sym/sym_int.h"

#include <ostream>
#include <sstream>

#include "lathe/sym/expr.h"
#include "lathe/sym/expr_pool.h"
#include "lathe/sym/int_math.h"
#include "lathe/sym/shape_env.h"
#include "lathe/sym/sym_error.h"

namespace lathe::sym {
namespace detail {

[[noreturn]] void throw_unrepresentable(int64_t v) {
  std::ostringstream os;
  os << "[SymInt] integer " << v
     << " cannot be stored inline (values with top bits 101 are reserved for symbolic pointers; "
        "the inline range covers [-2^62, 2^63))";
  throw SymError(os.str());
}

[[noreturn]] void throw_unrepresentable_unsigned(uint64_t v) {
  std::ostringstream os;
  os << "[SymInt] integer " << v << " does not fit in int64";
  throw SymError(os.str());
}

namespace {

// The pool shared by two operands (one of them symbolic), with both as expressions.
ExprPool& common_pool(SymInt a, SymInt b, const Expr*& ea, const Expr*& eb) {
  ExprPool* pa = a.is_symbolic() ? a.expr()->pool() : nullptr;
  ExprPool* pb = b.is_symbolic() ? b.expr()->pool() : nullptr;
  if (pa && pb && pa != pb) {
    throw SymError("[SymInt] operands come from different ShapeEnvs: " + a.to_string() + " and " +
                   b.to_string());
  }
  ExprPool& pool = pa ? *pa : *pb;
  ShapeEnv* env = pool.env();
  ea = a.is_symbolic() ? a.expr() : pool.integer(a.expect_int());
  eb = b.is_symbolic() ? b.expr() : pool.integer(b.expect_int());
  if (env != nullptr) {
    ea = env->simplify(ea);
    eb = env->simplify(eb);
  }
  return pool;
}

ShapeEnv& env_of(const Expr* e, const char* what) {
  ShapeEnv* env = e->pool()->env();
  if (env == nullptr) {
    throw SymError(std::string("[SymInt] ") + what + " of " + to_string(e) +
                   " needs a ShapeEnv, but this expression belongs to a bare ExprPool");
  }
  return *env;
}

}  // namespace

SymInt sym_binary(SymOp op, SymInt a, SymInt b) {
  if (!a.is_symbolic() && !b.is_symbolic()) {
    int64_t x = a.data_, y = b.data_;
    switch (op) {
      case SymOp::kAdd:
        return SymInt(checked_add(x, y));
      case SymOp::kSub:
        return SymInt(checked_sub(x, y));
      case SymOp::kMul:
        return SymInt(checked_mul(x, y));
      case SymOp::kFloorDiv:
        return SymInt(checked_floordiv(x, y));
      case SymOp::kCeilDiv:
        return SymInt(checked_ceildiv(x, y));
      case SymOp::kMod:
        return SymInt(checked_mod(x, y));
      case SymOp::kMin:
        return SymInt(x < y ? x : y);
      case SymOp::kMax:
        return SymInt(x < y ? y : x);
    }
  }
  const Expr *ea, *eb;
  ExprPool& pool = common_pool(a, b, ea, eb);
  switch (op) {
    case SymOp::kAdd:
      return SymInt::from_expr(pool.add(ea, eb));
    case SymOp::kSub:
      return SymInt::from_expr(pool.sub(ea, eb));
    case SymOp::kMul:
      return SymInt::from_expr(pool.mul(ea, eb));
    case SymOp::kFloorDiv:
      return SymInt::from_expr(pool.floordiv(ea, eb));
    case SymOp::kCeilDiv:
      return SymInt::from_expr(pool.ceildiv(ea, eb));
    case SymOp::kMod:
      return SymInt::from_expr(pool.mod(ea, eb));
    case SymOp::kMin:
      return SymInt::from_expr(pool.min(ea, eb));
    case SymOp::kMax:
      return SymInt::from_expr(pool.max(ea, eb));
  }
  return {};
}

SymBool sym_compare(SymCmp op, SymInt a, SymInt b) {
  const Expr *ea, *eb;
  ExprPool& pool = common_pool(a, b, ea, eb);
  static constexpr ExprKind kinds[] = {ExprKind::kEq, ExprKind::kNe, ExprKind::kLt,
                                       ExprKind::kLe, ExprKind::kGt, ExprKind::kGe};
  return SymBool::from_expr(pool.relation(kinds[static_cast<int>(op)], ea, eb));
}

}  // namespace detail

SymInt SymInt::from_expr(const Expr* e) {
  if (e->is_int()) return SymInt(e->value());
  if (e->is_bool() || e->is_relation())
    throw SymError("[SymInt] from_expr: " + sym::to_string(e) + " is a condition, not an integer");
  auto p = reinterpret_cast<uint64_t>(e);
  if ((p & kTagMask) != 0) throw SymError("[SymInt] expression pointer does not fit the tag");
  return raw(static_cast<int64_t>(p | kSymTag));
}

int64_t SymInt::expect_int() const {
  if (is_symbolic())
    throw SymError("[SymInt] expect_int() on the symbolic value " + to_string() +
                   "; use guard_int(reason) to specialize it");
  return data_;
}

int64_t SymInt::hint() const {
  if (!is_symbolic()) return data_;
  return detail::env_of(expr(), "hint()").hint_of(expr());
}

int64_t SymInt::guard_int(std::string_view reason, std::source_location loc) const {
  if (!is_symbolic()) return data_;
  return detail::env_of(expr(), "guard_int()").evaluate_int(*this, reason, loc);
}

std::string SymInt::to_string() const {
  return is_symbolic() ? sym::to_string(expr()) : std::to_string(data_);
}

SymInt ceildiv(SymInt a, SymInt b) { return detail::sym_binary(detail::SymOp::kCeilDiv, a, b); }

SymBool SymBool::from_expr(const Expr* e) {
  if (e->is_bool()) return SymBool(e->value() != 0);
  if (!e->is_relation())
    throw SymError("[SymBool] from_expr: " + sym::to_string(e) + " is not a condition");
  SymBool b;
  b.data_ = reinterpret_cast<uintptr_t>(e) | 1;
  return b;
}

bool SymBool::expect_bool() const {
  if (is_symbolic())
    throw SymError("[SymBool] expect_bool() on the symbolic condition " + to_string() +
                   "; use guard(reason) to decide it");
  return data_ != 0;
}

bool SymBool::hint() const {
  if (!is_symbolic()) return data_ != 0;
  return detail::env_of(expr(), "hint()").hint_of(expr()) != 0;
}

bool SymBool::guard(std::string_view reason, std::source_location loc) const {
  if (!is_symbolic()) return data_ != 0;
  return detail::env_of(expr(), "guard()").evaluate(*this, reason, loc);
}

SymBool SymBool::operator!() const {
  if (!is_symbolic()) return SymBool(data_ == 0);
  return from_expr(expr()->pool()->negate(expr()));
}

std::string SymBool::to_string() const {
  if (!is_symbolic()) return data_ ? "True" : "False";
  return sym::to_string(expr());
}

std::ostream& operator<<(std::ostream& os, SymInt v) { return os << v.to_string(); }
std::ostream& operator<<(std::ostream& os, SymBool v) { return os << v.to_string(); }

}  // namespace lathe::sym
