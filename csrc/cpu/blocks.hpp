// The CPU twin's blockwise codec steps, shared by every collective's twin: one block of 32 values
// through a codec exactly as the kernels do it (encode on the sender, decode on the receiver).
#pragma once
#include <algorithm>
#include <cstddef>

#include "codecs/dispatch.hpp"

namespace qr::twin {

// The block's scale (as decode reads it) and its inverse (as encode uses it); 1 and 1 unscaled.
// D is the scale's 16-bit dtype (scale_dtype() of the tensor's).
template <class Codec, DType D>
void block_scale_and_inverse(const float v[kBlockValues], float& scale, float& inv) {
  scale = inv = 1.0f;
  if constexpr (Codec::kScaled) {
    uint32_t absmax = 0;
    for (int l = 0; l < kLanesPerBlock; ++l) absmax = std::max(absmax, lane_absmax_bits(v + l * kLaneValues));
    scale = to_float<D>(block_scale<D>(absmax, Codec::kDivisor));
    inv = inverse_scale(scale);
  }
}

// Quantize and dequantize one block of 32 fp32 values in place, exactly as the kernels do it
// (the kernels split it: encode on the sender, decode on the receiver).
// Rotated codecs (core/hadamard.hpp): this is the round trip in the rotated domain; the caller
// rotates and rotates back (round_trip_block does both).
template <class Codec, DType D>
void plain_round_trip_block(float v[kBlockValues]) {
  float scale, inv;
  block_scale_and_inverse<Codec, D>(v, scale, inv);
  for (int l = 0; l < kLanesPerBlock; ++l) {
    auto packed = Codec::template encode<D>(v + l * kLaneValues, inv);
    Codec::template decode<D>(packed, scale, v + l * kLaneValues);
  }
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
    float scale, inv;
    block_scale_and_inverse<Codec, D>(v, scale, inv);
    for (int l = 0; l < kLanesPerBlock; ++l) Codec::template encode_keep<D>(v + l * kLaneValues, inv, scale);
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
