// Minifloat codecs: fp8 e4m3 and fp4 e2m1, each value scaled so the block's absmax lands on the
// format's largest magnitude (448 and 6). The scale is a 16-bit float (not E8M0): the MI355 work
// measured a real-valued scale more accurate, and the format max is reached exactly.
#pragma once
#include "core/block.hpp"

namespace qr {

struct Fp8Codec {
  static constexpr bool kScaled = true;
  static constexpr bool kKeepsDecoded = false;  // no encode_keep(): the owner decodes its payload
  static constexpr float kDivisor = kE4m3Max;
  using PlaneA = uint2;  // 8 x e4m3
  struct Packed { PlaneA a; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = 0;

  template <DType D>
  QR_HD static Packed encode(const float v[kLaneValues], float inv) {
    uint32_t w[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#if QR_DEVICE_COMPILE
      // cvt.rn.satfinite.e4m3x2.f32: two values per instruction; low byte = first value.
      __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * j] * inv, v[4 * j + 1] * inv), __NV_SATFINITE, __NV_E4M3);
      __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * j + 2] * inv, v[4 * j + 3] * inv), __NV_SATFINITE, __NV_E4M3);
      w[j] = uint32_t(lo) | (uint32_t(hi) << 16);
#else
      w[j] = 0;
      for (int i = 0; i < 4; ++i) w[j] |= uint32_t(float_to_e4m3(v[4 * j + i] * inv)) << (8 * i);
#endif
    }
    return Packed{make_uint2_hd(w[0], w[1])};
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float s, float v[kLaneValues]) {
    const uint32_t w[2] = {p.a.x, p.a.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint16_t pair = uint16_t(w[j / 2] >> (16 * (j % 2)));
#if QR_DEVICE_COMPILE
      float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
#else
      float2 f = {e4m3_to_float(uint8_t(pair)), e4m3_to_float(uint8_t(pair >> 8))};
#endif
      v[2 * j] = f.x * s;
      v[2 * j + 1] = f.y * s;
    }
  }

 private:
  QR_HD static uint2 make_uint2_hd(uint32_t x, uint32_t y) {
    uint2 r;
    r.x = x;
    r.y = y;
    return r;
  }
};

// fp4: u = v * inv is first rounded to fp16 (spec), then to e2m1. On [0, 6] RNE onto the e2m1 grid
// plus 1536 is rint(min(2a + 1536, a + 1538, a/2 + 1540, 1543)), a = |u16|: a concave piecewise-linear
// map whose pieces each round once on fp16's integer grid (ulp 1 in [1024, 2048)), so the GPU does
// two values per instruction with paired fp16 fma/min: ~7 instructions per value instead of ~19
// for the scalar float_to_e2m1. Codes keep u16's sign (a negative value that rounds to 0 gives -0).
// Nibble order: nibble k holds value 2k, nibble k + 4 value 2k + 1 (what the paired encode packs
// with three shift-ors).
struct Fp4Codec {
  static constexpr bool kScaled = true;
  static constexpr bool kKeepsDecoded = false;  // no encode_keep(): the owner decodes its payload
  static constexpr float kDivisor = 6.0f;
  using PlaneA = uint32_t;  // 8 x e2m1
  struct Packed { PlaneA a; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = 0;
  QR_HD static constexpr int nibble_of(int i) { return i / 2 + 4 * (i % 2); }

  // The e2m1 code (sign at bit 3) of u, exactly as the paired device encode computes it.
  QR_HD static uint32_t code(float u) {
    const float u16 = half_to_float(float_to_half(u));
    const double a = fabs(double(u16));  // lines below are exact in double; nearbyint = fp16 rounding
    double t = fmin(fmin(nearbyint(2.0 * a + 1536.0), nearbyint(a + 1538.0)), nearbyint(0.5 * a + 1540.0));
    t = fmin(t, 1543.0);  // saturate at 6 (code 7); NaN lines give way to it too
    return uint32_t(t - 1536.0) | (float_bits(u16) >> 28 & 8u);
  }

  template <DType D>
  QR_HD static Packed encode(const float v[kLaneValues], float inv) {
#if QR_DEVICE_COMPILE
    const __half2 two = __float2half2_rn(2.0f), one = __float2half2_rn(1.0f), half = __float2half2_rn(0.5f);
    const __half2 c1536 = __float2half2_rn(1536.0f), c1538 = __float2half2_rn(1538.0f),
                  c1540 = __float2half2_rn(1540.0f), c1543 = __float2half2_rn(1543.0f);
    uint32_t pairs[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // values 2j, 2j + 1 -> codes at bits 0 and 16
      const __half2 u = __floats2half2_rn(v[2 * j] * inv, v[2 * j + 1] * inv);
      const uint32_t ub = *reinterpret_cast<const uint32_t*>(&u);
      const uint32_t ab = ub & 0x7fff7fffu;
      const __half2 a = *reinterpret_cast<const __half2*>(&ab);
      __half2 t = __hmin2(__hmin2(__hfma2(a, two, c1536), __hfma2(a, one, c1538)), __hfma2(a, half, c1540));
      t = __hmin2(t, c1543);
      pairs[j] = (*reinterpret_cast<const uint32_t*>(&t) - 0x66006600u) | ((ub >> 12) & 0x00080008u);
    }
    return Packed{pairs[0] | pairs[1] << 4 | pairs[2] << 8 | pairs[3] << 12};
#else
    Packed p{0};
    for (int i = 0; i < kLaneValues; ++i) p.a |= code(v[i] * inv) << (4 * nibble_of(i));
    return p;
#endif
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float s, float v[kLaneValues]) {
#if QR_DEVICE_COMPILE
    // An e2m1 nibble s.e1e0.m moved to bits 7 and 4..2 of a byte is the e4m3 value 2^-6 times as
    // large (biases 1 and 7), and the hardware converts e4m3 pairs to fp16 in one instruction:
    // ~4 instructions per value instead of ~10 for the bit-by-bit decode. x64 in fp16 and the
    // fp32 multiply by s are exact / rounded once, as e2m1_to_float(c) * s is.
    auto to_e4m3 = [](uint32_t nibbles) {  // nibble k in byte k -> e4m3 byte k
      return ((nibbles << 2) & 0x1c1c1c1cu) | ((nibbles << 4) & 0x80808080u);
    };
    const uint32_t even = to_e4m3(p.a & 0x0f0f0f0fu);        // nibbles 0, 2, 4, 6: values 0, 4, 1, 5
    const uint32_t odd = to_e4m3((p.a >> 4) & 0x0f0f0f0fu);  // nibbles 1, 3, 5, 7: values 2, 6, 3, 7
    const __half2 x64 = __float2half2_rn(64.0f);
    const uint32_t pairs[4] = {even & 0xffffu, odd & 0xffffu, even >> 16, odd >> 16};
    constexpr int kFirst[4] = {0, 2, 1, 3};  // pair j holds values kFirst[j] and kFirst[j] + 4
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      __half2 h = __hmul2(__half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(pairs[j]), __NV_E4M3)), x64);
      float2 f = __half22float2(h);
      v[kFirst[j]] = f.x * s;
      v[kFirst[j] + 4] = f.y * s;
    }
#else
    for (int i = 0; i < kLaneValues; ++i) v[i] = e2m1_to_float((p.a >> (4 * nibble_of(i))) & 0xfu) * s;
#endif
  }
};

}  // namespace qr
