// IEEE binary16 and bfloat16 to float, exactly (every 16-bit value has an exact float).
#pragma once

#include <cstdint>
#include <cstring>

namespace lathe::io {

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// bfloat16 is the top half of a float.
inline float bf16_to_float(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000 | (mant << 13));  // inf, NaN
  if (exp == 0) {
    if (mant == 0) return bits_to_float(sign);  // +-0
    // Subnormal: mant * 2^-24, exact in float.
    float v = static_cast<float>(mant) * bits_to_float(0x33800000);  // 2^-24
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace lathe::io
