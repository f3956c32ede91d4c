#pragma once
// Checked int64 arithmetic with Python floor semantics, shared by folding, evaluation and guard
// checks. The try_ forms return false on overflow or division by zero; the others throw SymError.

#include <cstdint>

namespace lathe::sym::detail {

inline bool try_add(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
inline bool try_sub(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_sub_overflow(a, b, out);
}
inline bool try_mul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// floor(a / b); fails for b == 0 and INT64_MIN / -1.
inline bool try_floordiv(int64_t a, int64_t b, int64_t* out) {
  if (b == 0 || (b == -1 && a == INT64_MIN)) return false;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  *out = q;
  return true;
}

// ceil(a / b); fails for b == 0 and INT64_MIN / -1.
inline bool try_ceildiv(int64_t a, int64_t b, int64_t* out) {
  if (b == 0 || (b == -1 && a == INT64_MIN)) return false;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) == (b < 0))) ++q;
  *out = q;
  return true;
}

// a - b * floor(a / b): the result has the sign of b. Fails only for b == 0.
inline bool try_mod(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return false;
  if (b == -1) {
    *out = 0;
    return true;
  }
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  *out = m;
  return true;
}

inline bool try_pow(int64_t base, int64_t exponent, int64_t* out) {
  int64_t r = 1;
  for (int64_t i = 0; i < exponent; ++i)
    if (!try_mul(r, base, &r)) return false;
  *out = r;
  return true;
}

// Throwing forms: "[sym] integer overflow: 9223372036854775807 + 1", "[sym] division by zero".
int64_t checked_add(int64_t a, int64_t b);
int64_t checked_sub(int64_t a, int64_t b);
int64_t checked_mul(int64_t a, int64_t b);
int64_t checked_neg(int64_t a);
int64_t checked_pow(int64_t base, int64_t exponent);
int64_t checked_floordiv(int64_t a, int64_t b);
int64_t checked_ceildiv(int64_t a, int64_t b);
int64_t checked_mod(int64_t a, int64_t b);

int64_t gcd(int64_t a, int64_t b);  // non-negative; gcd(0, 0) == 0; never overflows

}  // namespace lathe::sym::detail
