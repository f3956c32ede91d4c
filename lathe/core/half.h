// The 16-bit floating types: bfloat16 (DType::bf16) and IEEE binary16 (DType::f16). Storage
// types: they convert to float exactly and from float by rounding to nearest even (NaN stays a
// NaN, quiet, with its sign), as PyTorch's c10::BFloat16 / c10::Half do. Arithmetic on them goes
// through float; kernels compute in f32 and round once when they store.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace lathe {

namespace detail {

inline float float_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint32_t bits_from_float(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// bfloat16 is the top half of a float.
inline float bf16_bits_to_float(uint16_t h) {
  return float_from_bits(static_cast<uint32_t>(h) << 16);
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x = bits_from_float(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest, ties to even; overflow gives inf
  return static_cast<uint16_t>(x >> 16);
}

inline float f16_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return float_from_bits(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {
    if (mant == 0) return float_from_bits(sign);                        // +-0
    float v = static_cast<float>(mant) * float_from_bits(0x33800000u);  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  return float_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_f16_bits(float f) {
  const uint32_t x = bits_from_float(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)  // NaN: quiet, keeping the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (ax < 0x38800000u) {
    // Below the smallest normal (2^-14): a subnormal m * 2^-24. Adding 0.5, whose ulp is
    // 2^-24, rounds |f| to that grid (to nearest even) in the float unit itself.
    float t = float_from_bits(ax) + 0.5f;
    return static_cast<uint16_t>(sign | (bits_from_float(t) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 - 15), then round the 13 dropped mantissa bits.
  uint32_t r = ax - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace detail

// A bfloat16 value: 1 sign, 8 exponent, 7 mantissa bits (float's range, 3 significant digits).
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(detail::float_to_bf16_bits(f)) {}  // NOLINT: implicit, as a float
  operator float() const { return detail::bf16_bits_to_float(bits); }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 v;
    v.bits = b;
    return v;
  }
  BFloat16& operator+=(float o) { return *this = float(*this) + o; }
  BFloat16& operator-=(float o) { return *this = float(*this) - o; }
  BFloat16& operator*=(float o) { return *this = float(*this) * o; }
  BFloat16& operator/=(float o) { return *this = float(*this) / o; }
};

// An IEEE binary16 value: 1 sign, 5 exponent, 10 mantissa bits (max 65504).
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(detail::float_to_f16_bits(f)) {}  // NOLINT: implicit, as a float
  operator float() const { return detail::f16_bits_to_float(bits); }
  static Half from_bits(uint16_t b) {
    Half v;
    v.bits = b;
    return v;
  }
  Half& operator+=(float o) { return *this = float(*this) + o; }
  Half& operator-=(float o) { return *this = float(*this) - o; }
  Half& operator*=(float o) { return *this = float(*this) * o; }
  Half& operator/=(float o) { return *this = float(*this) / o; }
};

static_assert(sizeof(BFloat16) == 2 && sizeof(Half) == 2);

}  // namespace lathe

template <>
class std::numeric_limits<lathe::BFloat16> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static lathe::BFloat16 lowest() { return lathe::BFloat16::from_bits(0xff7f); }
  static lathe::BFloat16 max() { return lathe::BFloat16::from_bits(0x7f7f); }
  static lathe::BFloat16 min() { return lathe::BFloat16::from_bits(0x0080); }
  static lathe::BFloat16 epsilon() { return lathe::BFloat16::from_bits(0x3c00); }
  static lathe::BFloat16 infinity() { return lathe::BFloat16::from_bits(0x7f80); }
  static lathe::BFloat16 quiet_NaN() { return lathe::BFloat16::from_bits(0x7fc0); }
};

template <>
class std::numeric_limits<lathe::Half> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 11;
  static lathe::Half lowest() { return lathe::Half::from_bits(0xfbff); }
  static lathe::Half max() { return lathe::Half::from_bits(0x7bff); }
  static lathe::Half min() { return lathe::Half::from_bits(0x0400); }
  static lathe::Half epsilon() { return lathe::Half::from_bits(0x1400); }
  static lathe::Half infinity() { return lathe::Half::from_bits(0x7c00); }
  static lathe::Half quiet_NaN() { return lathe::Half::from_bits(0x7e00); }
};
