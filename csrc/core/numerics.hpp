// Number formats used by the codecs, identical on host and device.
// Every conversion is IEEE round-to-nearest-even. On the device the hardware instruction is used;
// on the host a software version that gives the same bits (checked by the GPU-vs-twin tests).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/macros.hpp"
#include <vector_types.h>  // uint2/uint4/float2 for host and device alike

#if QR_DEVICE_COMPILE
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace qr {

// Tensor dtypes. fp32 tensors keep their values in fp32 and their block scales in bf16 (fp32's
// range in 16 bits); scale_dtype() says which 16-bit format a block scale is stored in.
enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };
QR_HD constexpr DType scale_dtype(DType d) { return d == DType::kFloat32 ? DType::kBFloat16 : d; }
QR_HD constexpr int dtype_bytes(DType d) { return d == DType::kFloat32 ? 4 : 2; }

constexpr uint16_t kHalfNaN = 0x7fff;  // the canonical NaN both formats get from the hardware
constexpr uint16_t kBf16NaN = 0x7fff;

QR_HD uint32_t float_bits(float f) {
#if QR_DEVICE_COMPILE
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
QR_HD float bits_float(uint32_t u) {
#if QR_DEVICE_COMPILE
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
QR_HD bool is_nan(float f) { return (float_bits(f) & 0x7fffffffu) > 0x7f800000u; }
QR_HD bool is_finite(float f) { return (float_bits(f) & 0x7f800000u) != 0x7f800000u; }

// ---- bf16 ----
QR_HD float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }
QR_HD uint16_t float_to_bf16(float f) {
#if QR_DEVICE_COMPILE
  __nv_bfloat16 h = __float2bfloat16_rn(f);
  return *reinterpret_cast<uint16_t*>(&h);
#else
  uint32_t u = float_bits(f);
  if (is_nan(f)) return kBf16NaN;
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
#endif
}

// ---- fp16 ----
QR_HD float half_to_float(uint16_t h) {
#if QR_DEVICE_COMPILE
  return __half2float(__ushort_as_half(h));
#else
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in fp32
    float v = float(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
#endif
}
QR_HD uint16_t float_to_half(float f) {
#if QR_DEVICE_COMPILE
  return __half_as_ushort(__float2half_rn(f));
#else
  uint32_t u = float_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return kHalfNaN;
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (a < 0x38800000u) {                        // below 2^-14: fp16 subnormal (or zero)
    // value / 2^-24 rounded to nearest even; exact since the fp32 product is exact here.
    float v = bits_float(a) * 16777216.0f;
    float r = std::nearbyint(v);
    return sign | uint16_t(r);
  }
  uint32_t man = a & 0x7fffffu, exp = (a >> 23) - 112u;  // rebias 127 -> 15
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1;  // may carry into the exponent
  return sign | uint16_t(h);
#endif
}

template <DType D>
QR_HD float to_float(uint16_t v) {
  if constexpr (D == DType::kFloat16) return half_to_float(v);
  else return bf16_to_float(v);
}
template <DType D>
QR_HD uint16_t from_float(float f) {
  if constexpr (D == DType::kFloat16) return float_to_half(f);
  else return float_to_bf16(f);
}

// Two floats -> two 16-bit values in one word (low half = a), one paired conversion on the device.
template <DType D>
QR_HD uint32_t pack2(float a, float b) {
#if QR_DEVICE_COMPILE
  if constexpr (D == DType::kFloat16) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
#else
  return uint32_t(from_float<D>(a)) | (uint32_t(from_float<D>(b)) << 16);
#endif
}

// ---- fp8 e4m3fn (OCP): max 448, no inf, NaN = 0x7f ----
constexpr float kE4m3Max = 448.0f;
QR_HD uint8_t float_to_e4m3(float f) {  // RNE, saturating to +-448 (satfinite)
  uint32_t u = float_bits(f);
  uint8_t sign = uint8_t((u >> 24) & 0x80u);
  if (is_nan(f)) return 0x7fu | sign;
  float a = bits_float(u & 0x7fffffffu);
  if (a >= kE4m3Max) return 0x7eu | sign;
  if (a < 0.015625f) {  // subnormal range: multiples of 2^-9
    float r = std::nearbyint(a * 512.0f);
    return uint8_t(r) | sign;  // r == 8 is the smallest normal, encoded the same way
  }
  uint32_t au = float_bits(a);
  uint32_t exp = (au >> 23) - 120u;  // rebias 127 -> 7
  uint32_t man = au & 0x7fffffu;
  uint32_t code = (exp << 3) | (man >> 20);
  uint32_t rest = man & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) code += 1;
  if (code > 0x7eu) code = 0x7eu;
  return uint8_t(code) | sign;
}
QR_HD float e4m3_to_float(uint8_t c) {
  uint32_t sign = uint32_t(c & 0x80u) << 24;
  uint32_t e = (c >> 3) & 0xfu, m = c & 7u;
  if ((c & 0x7fu) == 0x7fu) return bits_float(0x7fc00000u);
  if (e == 0) {
    float v = float(m) * 0.001953125f;  // m * 2^-9
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 120u) << 23) | (m << 20));
}

// ---- fp4 e2m1: magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}; encoding lives in Fp4Codec ----
QR_HD float e2m1_to_float(uint32_t c) {
  uint32_t e = (c >> 1) & 3u, m = c & 1u;
  // e == 0: 0 or 0.5; else (1 + m/2) * 2^(e-1)
  uint32_t mag = e ? (((e + 126u) << 23) | (m << 22)) : (m ? 0x3f000000u : 0u);
  return bits_float(mag | ((c & 8u) << 28));
}

}  // namespace qr
