// The block rotation of the rotated codecs (int4h, int6h; docs/codec-spec.md, "Rotated codecs"):
// a fixed sign flip, then a 32-point Walsh-Hadamard transform, in a fixed butterfly order so the
// kernels, the CPU twin and the numpy oracle round alike. Forward r = H (2^-5 s . x), inverse
// x = s . 2^3 H (2^-3 r): H H = 32 I, and the power-of-two factors are exact. They come before the
// butterflies so no partial sum exceeds the largest input (|r| <= max|x|): bf16 blocks near
// FLT_MAX must not overflow to inf in the transform (GPU test codec_edge_values), and the scale absmax/qmax stays inside fp16's range.
// Rotating spreads one outlier over its block, so the other 31 values keep their resolution.
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/block.hpp"

namespace qr {

// Bit i % 8: whether value i of a block is negated before the transform (a fixed pseudo-random
// pattern of 8 bits, the same for each of a block's 4 lanes, so 0xB9B9B9B9 over the block as the
// spec and the oracle write it: on the GPU every sign is then a compile-time constant and folds into
// the power-of-two multiplies, where a pattern per lane took two integer ops a value each way;
// quality as the 32-bit 0x9E3779B9 had, measured with the numpy oracle).
constexpr uint32_t kRotationLaneSigns = 0xB9u;
constexpr float kRotateScale = 0.03125f;      // 2^-5, before the forward butterflies
constexpr float kUnrotatePreScale = 0.125f;   // 2^-3, before the inverse butterflies
constexpr float kUnrotatePostScale = 8.0f;    // 2^3, after them

// Butterflies h = 1, 2, 4 inside one lane of 8 values: (a, b) -> (a + b, a - b) for i & h == 0.
QR_HD void hadamard_lane_stages(float v[kLaneValues]) {
#pragma unroll
  for (int h = 1; h < kLaneValues; h *= 2)
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i)
      if ((i & h) == 0) {
        const float a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
}

// Sign flip of a lane's 8 values (any lane of a block: the pattern repeats), an XOR of the sign bit.
QR_HD void flip_signs(float v[kLaneValues]) {
#pragma unroll
  for (int i = 0; i < kLaneValues; ++i)
    v[i] = bits_float(float_bits(v[i]) ^ ((kRotationLaneSigns << (31 - i)) & 0x80000000u));
}
// The factor s_i * f of value i of a lane: flipping then multiplying by a power of two f is this one
// exact multiply, bit for bit (a NaN may come out as another NaN).
QR_HD constexpr float signed_factor(int i, float f) { return (kRotationLaneSigns >> i) & 1u ? -f : f; }

// The whole-block transform on the host (the twin): the lane stages of each lane, then the
// cross-lane butterflies h = 8, 16, in the order the kernels' shuffles take.
inline void hadamard_block(float v[kBlockValues]) {
  for (int l = 0; l < kLanesPerBlock; ++l) hadamard_lane_stages(v + l * kLaneValues);
  for (int h = kLaneValues; h < kBlockValues; h *= 2)
    for (int i = 0; i < kBlockValues; ++i)
      if ((i & h) == 0) {
        const float a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
}
inline void rotate_block(float v[kBlockValues]) {
  for (int l = 0; l < kLanesPerBlock; ++l) flip_signs(v + l * kLaneValues);
  for (int i = 0; i < kBlockValues; ++i) v[i] *= kRotateScale;
  hadamard_block(v);
}
inline void unrotate_block(float v[kBlockValues]) {
  for (int i = 0; i < kBlockValues; ++i) v[i] *= kUnrotatePreScale;
  hadamard_block(v);
  for (int i = 0; i < kBlockValues; ++i) v[i] *= kUnrotatePostScale;
  for (int l = 0; l < kLanesPerBlock; ++l) flip_signs(v + l * kLaneValues);
}

// Whether a codec rotates its blocks (Codec::kRotated, false where a codec does not say).
template <class Codec, class = void>
struct IsRotated { static constexpr bool value = false; };
template <class Codec>
struct IsRotated<Codec, std::void_t<decltype(Codec::kRotated)>> { static constexpr bool value = Codec::kRotated; };
template <class Codec>
constexpr bool kIsRotated = IsRotated<Codec>::value;

}  // namespace qr
