// Private to toeplitz: 16-bit float storage of F̂ (bfloat16 and IEEE float16), converted on the
// host with round-to-nearest-even (plan time) and back to float32 (every product).
#pragma once

#include <cstdint>
#include <cstring>

namespace strux::cpu::toeplitz {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float from_bf16(uint16_t h) { return float_of(uint32_t(h) << 16); }

// float -> float16, round to nearest even; overflow to inf, underflow through the subnormals.
inline uint16_t to_f16(float f) {
  uint32_t x = bits_of(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  uint32_t o;
  if (x >= 0x47800000u) {  // >= 2^16, inf or NaN
    o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (x < 0x38800000u) {  // below 2^-14: subnormal or zero; adding 0.5 aligns the bits
    o = bits_of(float_of(x) + 0.5f) - 0x3f000000u;
  } else {
    const uint32_t odd = (x >> 13) & 1u;
    x += (uint32_t(15 - 127) << 23) + 0xfffu + odd;
    o = x >> 13;
  }
  return uint16_t(o | sign);
}
inline float from_f16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, em = h & 0x7fffu;
  uint32_t b;
  if (em >= 0x7c00u)
    b = 0x7f800000u | ((em & 0x3ffu) << 13);
  else if (em >= 0x0400u)
    b = (em << 13) + 0x38000000u;
  else
    b = bits_of(float(em) * 5.9604644775390625e-8f);  // subnormal: em * 2^-24
  return float_of(b | sign);
}

}  // namespace strux::cpu::toeplitz
