#pragma once
// Integer intervals used to bound symbolic expressions.

#include <cstdint>
#include <limits>
#include <string>

namespace lathe::sym {

// A closed interval [lo, hi] of int64 values. INT64_MIN and INT64_MAX stand for -inf and +inf:
// every operation saturates to them, so a range is always a sound over-approximation.
struct ValueRange {
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();

  int64_t lo = kNegInf;
  int64_t hi = kPosInf;

  static ValueRange unknown() { return {}; }
  static ValueRange exact(int64_t v) { return {v, v}; }
  static ValueRange at_least(int64_t v) { return {v, kPosInf}; }

  bool is_exact() const { return lo == hi && lo != kNegInf && hi != kPosInf; }
  bool is_empty() const { return lo > hi; }
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
  bool contains(const ValueRange& r) const { return lo <= r.lo && r.hi <= hi; }
  ValueRange intersect(const ValueRange& r) const;
  ValueRange unite(const ValueRange& r) const;
  bool operator==(const ValueRange&) const = default;

  // "[2, inf]", "[-inf, 5]", "[3, 3]".
  std::string to_string() const;
};

// Interval arithmetic with Python floor semantics for division and modulo. A divisor range
// containing 0 is treated as excluding 0 (division by zero never produces a value).
ValueRange range_add(const ValueRange& a, const ValueRange& b);
ValueRange range_neg(const ValueRange& a);
ValueRange range_mul(const ValueRange& a, const ValueRange& b);
ValueRange range_scale(const ValueRange& a, int64_t k);
ValueRange range_pow(const ValueRange& a, int64_t exponent);
ValueRange range_floordiv(const ValueRange& a, const ValueRange& b);
ValueRange range_ceildiv(const ValueRange& a, const ValueRange& b);
ValueRange range_mod(const ValueRange& a, const ValueRange& b);
ValueRange range_min(const ValueRange& a, const ValueRange& b);
ValueRange range_max(const ValueRange& a, const ValueRange& b);

}  // namespace lathe::sym
