// The CPU twin's blockwise codec steps, shared by every collective's twin: one block of 32 values
// through a codec exactly as the kernels do it (encode on the sender, decode on the receiver).
#pragma once
#include <algorithm>
#include <cstddef>

#include "codecs/dispatch.hpp"

namespace qr::twin {

// The block's scale word, its value (as decode reads it) and inverse (as encode uses it), and
// the factors a tiny block is lifted by before encoding and dropped by after decoding (1 and 1
// for a normal block; core/block.hpp). Unscaled codecs: all 1.
// D is the scale's 16-bit dtype (scale_dtype() of the tensor's).
struct BlockScale {
  float scale = 1.0f, inv = 1.0f, lift = 1.0f, drop = 1.0f;
};
template <class Codec, DType D>
BlockScale block_scale_of(const float v[kBlockValues]) {
  BlockScale b;
  if constexpr (Codec::kScaled) {
    uint32_t absmax = 0;
    for (int l = 0; l < kLanesPerBlock; ++l) absmax = std::max(absmax, lane_absmax_bits(v + l * kLaneValues));
    const uint16_t word = block_scale<D>(absmax, Codec::kDivisor);
    b.scale = scale_value<D>(word);
    b.inv = inverse_scale(b.scale);
    if (is_tiny_scale(word)) b.lift = kTinyLift<D>, b.drop = kTinyDrop<D>;
  }
  return b;
}
inline void scale_block(float v[kBlockValues], float by) {
  if (by != 1.0f)
    for (int i = 0; i < kBlockValues; ++i) v[i] *= by;
}

// Quantize and dequantize one block of 32 fp32 values in place, exactly as the kernels do it
// (the kernels split it: encode on the sender, decode on the receiver).
// Rotated codecs (core/hadamard.hpp): this is the round trip in the rotated domain; the caller
// rotates and rotates back (round_trip_block does both).
template <class Codec, DType D>
void plain_round_trip_block(float v[kBlockValues]) {
  const BlockScale b = block_scale_of<Codec, D>(v);
  scale_block(v, b.lift);
  for (int l = 0; l < kLanesPerBlock; ++l) {
    auto packed = Codec::template encode<D>(v + l * kLaneValues, b.inv);
    Codec::template decode<D>(packed, b.scale, v + l * kLaneValues);
  }
  scale_block(v, b.drop);
}
// One value's whole trip through the codec: DQ (rotated codecs: unrot(DQ(rot(v)))).
template <class Codec, DType D>
void round_trip_block(float v[kBlockValues]) {
  if constexpr (kIsRotated<Codec>) rotate_block(v);
  plain_round_trip_block<Codec, D>(v);
  if constexpr (kIsRotated<Codec>) unrotate_block(v);
}

// What the owner of a reduced block keeps, the kernels' way: the integer codecs' encode_keep()
// (values from the rounding itself), the others encode and decode.
// (Rotated codecs: in the rotated domain, as plain_round_trip_block.)
template <class Codec, DType D>
void owner_block(float v[kBlockValues]) {
  if constexpr (Codec::kKeepsDecoded) {
    const BlockScale b = block_scale_of<Codec, D>(v);
    scale_block(v, b.lift);
    for (int l = 0; l < kLanesPerBlock; ++l) Codec::template encode_keep<D>(v + l * kLaneValues, b.inv, b.scale);
    scale_block(v, b.drop);
  } else {
    plain_round_trip_block<Codec, D>(v);
  }
}

// Visit x in blocks of 32 (the tail zero-padded), calling fn(block, count).
template <class Fn>
void for_each_block(size_t n, Fn&& fn) {
  for (size_t base = 0; base < n; base += kBlockValues) fn(base, std::min<size_t>(kBlockValues, n - base));
}

// Element i of a tensor of dtype T (raw bits: uint16 for fp16/bf16, uint32 for fp32) as fp32, and
// back with to_T's rounding (the identity for fp32).
template <DType T>
float load_value(const void* x, size_t i) {
  if constexpr (T == DType::kFloat32) return bits_float(static_cast<const uint32_t*>(x)[i]);
  else return to_float<T>(static_cast<const uint16_t*>(x)[i]);
}
template <DType T>
void store_value(void* x, size_t i, float v) {
  if constexpr (T == DType::kFloat32) static_cast<uint32_t*>(x)[i] = float_bits(v);
  else static_cast<uint16_t*>(x)[i] = from_float<T>(v);
}

// DQ of a segment (docs/codec-spec.md, "Segments"): n values of x from element `at` through the
// codec (Codec: the registry's; T: the tensor dtype), blockwise from the segment's start, into
// out[0..n) as fp32.
template <class Codec, DType T>
void segment_round_trip(const void* x, size_t at, size_t n, float* out) {
  using Wire = WireCodec<Codec, T>;
  for_each_block(n, [&](size_t base, size_t count) {
    float v[kBlockValues] = {};
    for (size_t i = 0; i < count; ++i) v[i] = load_value<T>(x, at + base + i);
    round_trip_block<Wire, scale_dtype(T)>(v);
    for (size_t i = 0; i < count; ++i) out[base + i] = v[i];
  });
}

}  // namespace qr::twin
