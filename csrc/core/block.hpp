// Block-scale arithmetic shared by every scaled codec (docs/codec-spec.md).
// A block is 32 values; a thread owns 8 of them (one "lane group"), so 4 threads share a scale.
#pragma once
#include <cfloat>
#include <cstdint>

#include "core/numerics.hpp"

namespace qr {

constexpr int kBlockValues = 32;  // values sharing one 16-bit scale
constexpr int kLaneValues = 8;    // values one thread encodes: 16 bytes of fp16/bf16
constexpr int kLanesPerBlock = kBlockValues / kLaneValues;

// |v| as ordered bits: NaN > +inf > finite, so a max over them carries a NaN through.
QR_HD uint32_t abs_bits(float v) { return float_bits(v) & 0x7fffffffu; }

QR_HD uint32_t lane_absmax_bits(const float v[kLaneValues]) {
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < kLaneValues; ++i) m = abs_bits(v[i]) > m ? abs_bits(v[i]) : m;
  return m;
}

// The stored scale (in the tensor's own dtype, so bf16 data never overflows it) from the
// block's absmax; a block with a NaN/Inf gets a NaN scale, which decodes the whole block to NaN.
// absmax times fl(1/divisor), not a division: an IEEE division is a ~10-instruction subroutine on
// the GPU, and the 16-bit rounding after it hides the difference but for rare 1-ulp cases.
// Tiny blocks: where that scale would fall below S's smallest normal (fp16 blocks below ~1e-5,
// bf16 blocks near 1e-37) it would lose its precision or flush to 0 and take the block with it; such
// a block is lifted by 2^K (kTinyLift) before it is scaled and dropped by 2^-K after decoding,
// flagged by the scale's sign bit (a scale is never negative). Exact powers of two: the values
// are kept, and normal blocks take the same path bit for bit as before.
constexpr uint16_t kTinyScaleBit = 0x8000;
template <DType S>
constexpr float kTinyLift = S == DType::kFloat16 ? 16777216.0f : 4294967296.0f;  // 2^24, 2^32
template <DType S>
constexpr float kTinyDrop = S == DType::kFloat16 ? 5.9604644775390625e-08f : 2.3283064365386963e-10f;  // 2^-24, 2^-32
template <DType S>
constexpr float kSmallestNormal = S == DType::kFloat16 ? 6.103515625e-05f : FLT_MIN;  // 2^-14, 2^-126

template <DType D>
QR_HD uint16_t block_scale(uint32_t absmax_bits, float divisor) {
  float absmax = bits_float(absmax_bits);
  if (!is_finite(absmax)) return kHalfNaN;  // same bits for fp16 and bf16
  const float inv_divisor = 1.0f / divisor;  // folds to a constant: divisor is the codec's
  const uint16_t scale = from_float<D>(absmax * inv_divisor);
  if (absmax > 0.0f && to_float<D>(scale) < kSmallestNormal<D>)
    return from_float<D>(absmax * kTinyLift<D> * inv_divisor) | kTinyScaleBit;
  return scale;
}
QR_HD bool is_tiny_scale(uint16_t scale) { return (scale & kTinyScaleBit) != 0; }
// The scale a codec multiplies by (a tiny block's lifted scale, without its flag).
template <DType D>
QR_HD float scale_value(uint16_t scale) { return to_float<D>(scale & uint16_t(~kTinyScaleBit)); }

// 1/scale, or 0 where the scale is NaN, zero or below FLT_MIN (1/scale would overflow to inf and
// 0 * inf = NaN would turn finite zeros into NaN). With inv = 0 every value encodes to code 0, so a
// tiny block decodes to zeros and a NaN-scaled block to NaN.
QR_HD float inverse_scale(float scale) { return (scale >= FLT_MIN && scale <= FLT_MAX) ? 1.0f / scale : 0.0f; }

QR_HD float clampf(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }

}  // namespace qr
