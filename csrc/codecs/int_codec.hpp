// Symmetric integer codecs (int8, int6, int4): q = rint(clamp(v / scale, -qmax, qmax)),
// scale = absmax / qmax. Symmetric because the error of the asymmetric [-2^(b-1), 2^(b-1)-1] grid
// is no smaller for zero-mean activations and the symmetric one needs no zero point.
#pragma once
#include "core/block.hpp"

namespace qr {

template <int kBits>
struct IntQuant {
  static constexpr int kQMax = (1 << (kBits - 1)) - 1;
  static constexpr float kDivisor = float(kQMax);
  // Round-to-nearest-even by the adder instead of rint + float->int conversion (conversions run
  // at 1/8 of the FP32 rate on Hopper and dominated the codec's time): adding 1.5 * 2^23 leaves
  // round(c) in the low mantissa bits for |c| < 2^22. Same result as rint, on host and device.
  static constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  static constexpr uint32_t kMagicBits = 0x4B400000u;
  // Biased code in [0, 2*qmax]: unsigned fields pack without sign extension.
  QR_HD static uint32_t quantize(float v, float inv_scale) {
    float c = clampf(v * inv_scale, -kDivisor, kDivisor);
    return float_bits(c + kMagic) - kMagicBits + uint32_t(kQMax);
  }
  // (code - qmax) as a float, exactly, by the inverse trick: an integer add and a float add.
  QR_HD static float dequantize(uint32_t code, float scale) {
    return (bits_float(kMagicBits + code) - (kMagic + kDivisor)) * scale;
  }
};

struct Int8Codec {
  static constexpr bool kScaled = true;
  using Q = IntQuant<8>;
  static constexpr float kDivisor = Q::kDivisor;
  using PlaneA = uint2;  // 8 x 8 bits
  struct Packed { PlaneA a; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = 0;

  template <DType D>
  QR_HD static Packed encode(const float v[kLaneValues], float inv) {
    Packed p;
    p.a.x = Q::quantize(v[0], inv) | Q::quantize(v[1], inv) << 8 | Q::quantize(v[2], inv) << 16 | Q::quantize(v[3], inv) << 24;
    p.a.y = Q::quantize(v[4], inv) | Q::quantize(v[5], inv) << 8 | Q::quantize(v[6], inv) << 16 | Q::quantize(v[7], inv) << 24;
    return p;
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float s, float v[kLaneValues]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[i] = Q::dequantize((p.a.x >> (8 * i)) & 0xffu, s);
      v[4 + i] = Q::dequantize((p.a.y >> (8 * i)) & 0xffu, s);
    }
  }
};

struct Int4Codec {
  static constexpr bool kScaled = true;
  using Q = IntQuant<4>;
  static constexpr float kDivisor = Q::kDivisor;
  using PlaneA = uint32_t;  // 8 x 4 bits
  struct Packed { PlaneA a; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = 0;

  template <DType D>
  QR_HD static Packed encode(const float v[kLaneValues], float inv) {
    Packed p{0};
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) p.a |= Q::quantize(v[i], inv) << (4 * i);
    return p;
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float s, float v[kLaneValues]) {
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) v[i] = Q::dequantize((p.a >> (4 * i)) & 0xfu, s);
  }
};

// 6 bits split into two planes, the low 4 bits (like int4) and the high 2 bits, so every store
// stays a power-of-two width (4 + 2 bytes per 8 values).
struct Int6Codec {
  static constexpr bool kScaled = true;
  using Q = IntQuant<6>;
  static constexpr float kDivisor = Q::kDivisor;
  using PlaneA = uint32_t;
  using PlaneB = uint16_t;
  struct Packed { PlaneA a; PlaneB b; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = sizeof(PlaneB);

  template <DType D>
  QR_HD static Packed encode(const float v[kLaneValues], float inv) {
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) {
      uint32_t q = Q::quantize(v[i], inv);
      lo |= (q & 0xfu) << (4 * i);
      hi |= (q >> 4) << (2 * i);
    }
    return Packed{lo, uint16_t(hi)};
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float s, float v[kLaneValues]) {
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) {
      uint32_t q = ((p.a >> (4 * i)) & 0xfu) | (((uint32_t(p.b) >> (2 * i)) & 3u) << 4);
      v[i] = Q::dequantize(q, s);
    }
  }
};

}  // namespace qr
