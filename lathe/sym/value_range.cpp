#include "lathe/sym/value_range.h"

#include <algorithm>
#include <sstream>

namespace lathe::sym {
namespace {

using Wide = __int128;
constexpr int64_t kNegInf = ValueRange::kNegInf;
constexpr int64_t kPosInf = ValueRange::kPosInf;

bool is_inf(int64_t v) { return v == kNegInf || v == kPosInf; }

// Clamps an exact wide result back to int64, where the two extremes mean infinity.
int64_t saturate(Wide v) {
  if (v >= kPosInf) return kPosInf;
  if (v <= kNegInf) return kNegInf;
  return static_cast<int64_t>(v);
}

int sign(int64_t v) { return (v > 0) - (v < 0); }

int64_t ext_neg(int64_t v) {
  if (v == kNegInf) return kPosInf;
  if (v == kPosInf) return kNegInf;
  return -v;
}

int64_t ext_mul(int64_t x, int64_t y) {
  if (x == 0 || y == 0) return 0;
  if (is_inf(x) || is_inf(y)) return sign(x) * sign(y) > 0 ? kPosInf : kNegInf;
  return saturate(static_cast<Wide>(x) * y);
}

Wide floor_div_wide(Wide x, Wide y) {
  Wide q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
  return q;
}

// Every value floor(x / y) can take at one corner of the box; y is never 0.
ValueRange corner_floordiv(int64_t x, int64_t y) {
  if (!is_inf(y)) {
    if (is_inf(x)) {
      int64_t v = sign(x) * sign(y) > 0 ? kPosInf : kNegInf;
      return {v, v};
    }
    int64_t q = saturate(floor_div_wide(x, y));
    return {q, q};
  }
  if (is_inf(x)) return ValueRange::unknown();
  if (x == 0) return ValueRange::exact(0);
  // |x / y| is arbitrarily small: the floor is 0 for a positive quotient, -1 for a negative one.
  return ValueRange::exact(sign(x) * sign(y) > 0 ? 0 : -1);
}

ValueRange floordiv_piece(const ValueRange& a, const ValueRange& b) {
  ValueRange r = corner_floordiv(a.lo, b.lo);
  r = r.unite(corner_floordiv(a.lo, b.hi));
  r = r.unite(corner_floordiv(a.hi, b.lo));
  r = r.unite(corner_floordiv(a.hi, b.hi));
  return r;
}

int64_t py_mod(int64_t x, int64_t k) {
  int64_t m = x % k;
  if (m != 0 && ((m < 0) != (k < 0))) m += k;
  return m;
}

ValueRange mod_piece(const ValueRange& a, const ValueRange& b) {
  ValueRange r;
  if (b.lo >= 1) {
    r = {0, b.hi == kPosInf ? kPosInf : b.hi - 1};
    if (a.lo >= 0) r.hi = std::min(r.hi, a.hi);
  } else {
    r = {b.lo == kNegInf ? kNegInf : b.lo + 1, 0};
    if (a.hi <= 0) r.lo = std::max(r.lo, a.lo);
  }
  if (b.is_exact() && !is_inf(a.lo) && !is_inf(a.hi)) {
    int64_t k = b.lo;
    if (floor_div_wide(a.lo, k) == floor_div_wide(a.hi, k)) {
      int64_t m0 = py_mod(a.lo, k), m1 = py_mod(a.hi, k);
      r = r.intersect({std::min(m0, m1), std::max(m0, m1)});
    }
  }
  return r;
}

}  // namespace

ValueRange ValueRange::intersect(const ValueRange& r) const {
  return {std::max(lo, r.lo), std::min(hi, r.hi)};
}

ValueRange ValueRange::unite(const ValueRange& r) const {
  if (is_empty()) return r;
  if (r.is_empty()) return *this;
  return {std::min(lo, r.lo), std::max(hi, r.hi)};
}

std::string ValueRange::to_string() const {
  std::ostringstream os;
  os << '[';
  if (lo == kNegInf)
    os << "-inf";
  else
    os << lo;
  os << ", ";
  if (hi == kPosInf)
    os << "inf";
  else
    os << hi;
  os << ']';
  return os.str();
}

ValueRange range_add(const ValueRange& a, const ValueRange& b) {
  int64_t lo = (a.lo == kNegInf || b.lo == kNegInf) ? kNegInf : saturate(Wide(a.lo) + b.lo);
  int64_t hi = (a.hi == kPosInf || b.hi == kPosInf) ? kPosInf : saturate(Wide(a.hi) + b.hi);
  return {lo, hi};
}

ValueRange range_neg(const ValueRange& a) { return {ext_neg(a.hi), ext_neg(a.lo)}; }

ValueRange range_mul(const ValueRange& a, const ValueRange& b) {
  int64_t c[4] = {ext_mul(a.lo, b.lo), ext_mul(a.lo, b.hi), ext_mul(a.hi, b.lo),
                  ext_mul(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

ValueRange range_scale(const ValueRange& a, int64_t k) {
  return range_mul(a, ValueRange::exact(k));
}

ValueRange range_pow(const ValueRange& a, int64_t exponent) {
  if (exponent <= 0) return ValueRange::exact(1);
  auto p = [&](int64_t x) {
    int64_t r = 1;
    for (int64_t i = 0; i < exponent; ++i) r = ext_mul(r, x);
    return r;
  };
  if (exponent % 2 == 1) return {p(a.lo), p(a.hi)};
  if (a.lo >= 0) return {p(a.lo), p(a.hi)};
  if (a.hi <= 0) return {p(a.hi), p(a.lo)};
  return {0, std::max(p(a.lo), p(a.hi))};
}

ValueRange range_floordiv(const ValueRange& a, const ValueRange& b) {
  ValueRange result{kPosInf, kNegInf};  // empty
  ValueRange pos = b.intersect({1, kPosInf});
  ValueRange neg = b.intersect({kNegInf, -1});
  if (!pos.is_empty()) result = result.unite(floordiv_piece(a, pos));
  if (!neg.is_empty()) result = result.unite(floordiv_piece(a, neg));
  return result.is_empty() ? ValueRange::unknown() : result;
}

ValueRange range_ceildiv(const ValueRange& a, const ValueRange& b) {
  return range_neg(range_floordiv(range_neg(a), b));
}

ValueRange range_mod(const ValueRange& a, const ValueRange& b) {
  ValueRange result{kPosInf, kNegInf};
  ValueRange pos = b.intersect({1, kPosInf});
  ValueRange neg = b.intersect({kNegInf, -1});
  if (!pos.is_empty()) result = result.unite(mod_piece(a, pos));
  if (!neg.is_empty()) result = result.unite(mod_piece(a, neg));
  return result.is_empty() ? ValueRange::unknown() : result;
}

ValueRange range_min(const ValueRange& a, const ValueRange& b) {
  return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
}

ValueRange range_max(const ValueRange& a, const ValueRange& b) {
  return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
}

}  // namespace lathe::sym
