#pragma once
// SymInt and SymBool: one machine word each. Inline on the fast path (eager code never allocates
// or follows a pointer), or a tagged pointer to an expression owned by a ShapeEnv.
//
// This header only forward-declares the expression type so it can serve as the shape element type
// of lathe/core. Symbolic values live as long as the ShapeEnv that made them.

#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>

namespace lathe::sym {

class Expr;
class SymInt;
class SymBool;

namespace detail {
enum class SymOp : uint8_t { kAdd, kSub, kMul, kFloorDiv, kCeilDiv, kMod, kMin, kMax };
enum class SymCmp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
// Out-of-line slow paths: symbolic operands, overflow, division by zero.
SymInt sym_binary(SymOp op, SymInt a, SymInt b);
SymBool sym_compare(SymCmp op, SymInt a, SymInt b);
[[noreturn]] void throw_unrepresentable(int64_t v);
[[noreturn]] void throw_unrepresentable_unsigned(uint64_t v);
}  // namespace detail

// An integer that is either a plain int64 or a symbolic expression (s0, 2*s1, FloorDiv(s0, 8)).
// Inline values are the int64s whose top three bits are not 101 (the tag of a pointer): every
// value in [-2^62, 2^63) and more. Arithmetic checks int64 overflow and throws SymError.
class SymInt {
 public:
  constexpr SymInt() = default;  // 0
  template <std::integral T>
  requires(!std::same_as<T, bool>)
      SymInt(T v) {  // NOLINT: implicit, SymInt is a drop-in for int64_t
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      if (v > static_cast<T>(INT64_MAX)) [[unlikely]]
        detail::throw_unrepresentable_unsigned(v);
    }
    data_ = static_cast<int64_t>(v);
    if (is_tagged(data_)) [[unlikely]]
      detail::throw_unrepresentable(data_);
  }

  // Wraps an expression; a constant expression becomes an inline SymInt.
  static SymInt from_expr(const Expr* e);

  bool is_symbolic() const { return is_tagged(data_); }
  // The value when inline, nullopt when symbolic.
  std::optional<int64_t> maybe_int() const {
    if (is_symbolic()) return std::nullopt;
    return data_;
  }
  // The value; throws SymError when symbolic.
  int64_t expect_int() const;
  // The expression when symbolic, nullptr when inline.
  const Expr* expr() const {
    return is_symbolic() ? reinterpret_cast<const Expr*>(static_cast<uint64_t>(data_) & ~kTagMask)
                         : nullptr;
  }
  // The value at trace time (from the symbols' hints), without recording a guard. Throws for
  // unbacked symbols.
  int64_t hint() const;
  // Specializes: records the guard `this == hint` with the reason and returns the hint.
  int64_t guard_int(std::string_view reason,
                    std::source_location loc = std::source_location::current()) const;
  explicit operator int64_t() const { return is_symbolic() ? guard_int("int64_t(SymInt)") : data_; }

  // "5", "s0*s1 + 2*s2", "FloorDiv(s0, 8)".
  std::string to_string() const;

  SymInt& operator+=(SymInt o);
  SymInt& operator-=(SymInt o);
  SymInt& operator*=(SymInt o);

  friend SymInt operator+(SymInt a, SymInt b);
  friend SymInt operator-(SymInt a, SymInt b);
  friend SymInt operator*(SymInt a, SymInt b);
  friend SymInt floordiv(SymInt a, SymInt b);
  friend SymInt mod(SymInt a, SymInt b);
  friend SymInt sym_min(SymInt a, SymInt b);
  friend SymInt sym_max(SymInt a, SymInt b);
  friend SymBool operator==(SymInt a, SymInt b);
  friend SymBool operator!=(SymInt a, SymInt b);
  friend SymBool operator<(SymInt a, SymInt b);
  friend SymBool operator<=(SymInt a, SymInt b);
  friend SymBool operator>(SymInt a, SymInt b);
  friend SymBool operator>=(SymInt a, SymInt b);
  friend SymInt detail::sym_binary(detail::SymOp op, SymInt a, SymInt b);

 private:
  static constexpr uint64_t kTagMask = uint64_t{7} << 61;
  static constexpr uint64_t kSymTag = uint64_t{5} << 61;
  static bool is_tagged(int64_t v) { return (static_cast<uint64_t>(v) & kTagMask) == kSymTag; }
  static SymInt raw(int64_t v) {
    SymInt s;
    s.data_ = v;
    return s;
  }
  int64_t data_ = 0;
};

// A boolean that is either a plain bool or a symbolic relation (s0 > 4). Converting a symbolic
// SymBool to bool asks its ShapeEnv, which may record a guard.
class SymBool {
 public:
  constexpr SymBool() = default;  // false
  template <typename T>
  requires std::same_as<T, bool>
  constexpr SymBool(T b) : data_(b ? 2 : 0) {}  // NOLINT: implicit, a drop-in for bool

  // Wraps a relation; a constant becomes an inline SymBool.
  static SymBool from_expr(const Expr* e);

  bool is_symbolic() const { return (data_ & 1) != 0; }
  std::optional<bool> maybe_bool() const {
    if (is_symbolic()) return std::nullopt;
    return data_ != 0;
  }
  // The value; throws SymError when symbolic.
  bool expect_bool() const;
  const Expr* expr() const {
    return is_symbolic() ? reinterpret_cast<const Expr*>(data_ & ~uintptr_t{1}) : nullptr;
  }
  // The value at trace time from the hints, recording no guard.
  bool hint() const;
  // Decides through the ShapeEnv: statically when provable, else from the hints, recording a
  // guard with the reason (e.g. "[conv2d] padding fits input") and the caller's location.
  bool guard(std::string_view reason,
             std::source_location loc = std::source_location::current()) const;
  explicit operator bool() const { return is_symbolic() ? guard("bool(SymBool)") : data_ != 0; }
  SymBool operator!() const;

  std::string to_string() const;

 private:
  uintptr_t data_ = 0;  // inline: value << 1; symbolic: pointer | 1
};

std::ostream& operator<<(std::ostream& os, SymInt v);
std::ostream& operator<<(std::ostream& os, SymBool v);

// Python floor division and modulo, ceiling division, min and max.
SymInt ceildiv(SymInt a, SymInt b);

inline SymInt operator+(SymInt a, SymInt b) {
  int64_t r;
  if (!a.is_symbolic() && !b.is_symbolic() && !__builtin_add_overflow(a.data_, b.data_, &r) &&
      !SymInt::is_tagged(r)) [[likely]]
    return SymInt::raw(r);
  return detail::sym_binary(detail::SymOp::kAdd, a, b);
}

inline SymInt operator-(SymInt a, SymInt b) {
  int64_t r;
  if (!a.is_symbolic() && !b.is_symbolic() && !__builtin_sub_overflow(a.data_, b.data_, &r) &&
      !SymInt::is_tagged(r)) [[likely]]
    return SymInt::raw(r);
  return detail::sym_binary(detail::SymOp::kSub, a, b);
}

inline SymInt operator-(SymInt a) { return SymInt(0) - a; }

inline SymInt operator*(SymInt a, SymInt b) {
  int64_t r;
  if (!a.is_symbolic() && !b.is_symbolic() && !__builtin_mul_overflow(a.data_, b.data_, &r) &&
      !SymInt::is_tagged(r)) [[likely]]
    return SymInt::raw(r);
  return detail::sym_binary(detail::SymOp::kMul, a, b);
}

inline SymInt floordiv(SymInt a, SymInt b) {
  if (!a.is_symbolic() && !b.is_symbolic() && b.data_ > 0) [[likely]] {
    int64_t q = a.data_ / b.data_;
    if (a.data_ % b.data_ != 0 && a.data_ < 0) --q;
    return SymInt::raw(q);
  }
  return detail::sym_binary(detail::SymOp::kFloorDiv, a, b);
}

inline SymInt mod(SymInt a, SymInt b) {
  if (!a.is_symbolic() && !b.is_symbolic() && b.data_ > 0) [[likely]] {
    int64_t m = a.data_ % b.data_;
    if (m < 0) m += b.data_;
    return SymInt::raw(m);
  }
  return detail::sym_binary(detail::SymOp::kMod, a, b);
}

inline SymInt sym_min(SymInt a, SymInt b) {
  if (!a.is_symbolic() && !b.is_symbolic()) [[likely]]
    return a.data_ < b.data_ ? a : b;
  return detail::sym_binary(detail::SymOp::kMin, a, b);
}

inline SymInt sym_max(SymInt a, SymInt b) {
  if (!a.is_symbolic() && !b.is_symbolic()) [[likely]]
    return a.data_ < b.data_ ? b : a;
  return detail::sym_binary(detail::SymOp::kMax, a, b);
}

#define LATHE_SYM_COMPARE(OP, CMP)                         \
  inline SymBool operator OP(SymInt a, SymInt b) {         \
    if (!a.is_symbolic() && !b.is_symbolic()) [[likely]]   \
      return SymBool(a.data_ OP b.data_);                  \
    return detail::sym_compare(detail::SymCmp::CMP, a, b); \
  }
LATHE_SYM_COMPARE(==, kEq)
LATHE_SYM_COMPARE(!=, kNe)
LATHE_SYM_COMPARE(<, kLt)
LATHE_SYM_COMPARE(<=, kLe)
LATHE_SYM_COMPARE(>, kGt)
LATHE_SYM_COMPARE(>=, kGe)
#undef LATHE_SYM_COMPARE

inline SymInt& SymInt::operator+=(SymInt o) { return *this = *this + o; }
inline SymInt& SymInt::operator-=(SymInt o) { return *this = *this - o; }
inline SymInt& SymInt::operator*=(SymInt o) { return *this = *this * o; }

}  // namespace lathe::sym
