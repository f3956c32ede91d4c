#include "lathe/sym/int_math.h"

#include <sstream>
#include <string>

#include "lathe/sym/sym_error.h"

namespace lathe::sym::detail {
namespace {

[[noreturn]] void overflow(int64_t a, const char* op, int64_t b) {
  std::ostringstream os;
  os << "[sym] integer overflow: " << a << ' ' << op << ' ' << b << " does not fit in int64";
  throw SymError(os.str());
}

[[noreturn]] void division_by_zero(int64_t a, const char* op) {
  std::ostringstream os;
  os << "[sym] division by zero: " << a << ' ' << op << " 0";
  throw SymError(os.str());
}

}  // namespace

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (!try_add(a, b, &r)) overflow(a, "+", b);
  return r;
}

int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (!try_sub(a, b, &r)) overflow(a, "-", b);
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (!try_mul(a, b, &r)) overflow(a, "*", b);
  return r;
}

int64_t checked_neg(int64_t a) { return checked_sub(0, a); }

int64_t checked_pow(int64_t base, int64_t exponent) {
  int64_t r;
  if (!try_pow(base, exponent, &r)) overflow(base, "**", exponent);
  return r;
}

int64_t checked_floordiv(int64_t a, int64_t b) {
  if (b == 0) division_by_zero(a, "//");
  int64_t r;
  if (!try_floordiv(a, b, &r)) overflow(a, "//", b);
  return r;
}

int64_t checked_ceildiv(int64_t a, int64_t b) {
  if (b == 0) division_by_zero(a, "ceildiv");
  int64_t r;
  if (!try_ceildiv(a, b, &r)) overflow(a, "ceildiv", b);
  return r;
}

int64_t checked_mod(int64_t a, int64_t b) {
  if (b == 0) division_by_zero(a, "%");
  int64_t r;
  try_mod(a, b, &r);
  return r;
}

int64_t gcd(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
  uint64_t y = b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b);
  while (y != 0) {
    uint64_t t = x % y;
    x = y;
    y = t;
  }
  // gcd(INT64_MIN, 0) is 2^63, which int64 cannot hold; callers only use it to cancel factors,
  // so report the largest factor that is safe.
  return x > static_cast<uint64_t>(INT64_MAX) ? (int64_t{1} << 62) : static_cast<int64_t>(x);
}

}  // namespace lathe::sym::detail
