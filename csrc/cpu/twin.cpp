#include "cpu/twin.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "codecs/dispatch.hpp"

namespace qr {
namespace {

// The block's scale (as decode reads it) and its inverse (as encode uses it); 1 and 1 unscaled.
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
template <class Codec, DType D>
void round_trip_block(float v[kBlockValues]) {
  float scale, inv;
  block_scale_and_inverse<Codec, D>(v, scale, inv);
  for (int l = 0; l < kLanesPerBlock; ++l) {
    auto packed = Codec::template encode<D>(v + l * kLaneValues, inv);
    Codec::template decode<D>(packed, scale, v + l * kLaneValues);
  }
}

// What the owner of a reduced block keeps, the kernels' way: the integer codecs' encode_keep()
// (values from the rounding itself), the others encode and decode.
template <class Codec, DType D>
void owner_block(float v[kBlockValues]) {
  if constexpr (Codec::kKeepsDecoded) {
    float scale, inv;
    block_scale_and_inverse<Codec, D>(v, scale, inv);
    for (int l = 0; l < kLanesPerBlock; ++l) Codec::template encode_keep<D>(v + l * kLaneValues, inv, scale);
  } else {
    round_trip_block<Codec, D>(v);
  }
}

// Visit x in blocks of 32 (the tail zero-padded), calling fn(block, count).
template <class Fn>
void for_each_block(size_t n, Fn&& fn) {
  for (size_t base = 0; base < n; base += kBlockValues) fn(base, std::min<size_t>(kBlockValues, n - base));
}

}  // namespace

void twin_round_trip(const uint16_t* x, uint16_t* out, size_t n, DType dtype, CodecId codec, bool as_owner) {
  dispatch_codec(codec, dtype, [&](auto codec_t, auto d) {
    using Codec = decltype(codec_t);
    constexpr DType D = decltype(d)::value;
    for_each_block(n, [&](size_t base, size_t count) {
      float v[kBlockValues] = {};
      for (size_t i = 0; i < count; ++i) v[i] = to_float<D>(x[base + i]);
      if (as_owner) {
        owner_block<Codec, D>(v);
      } else {
        round_trip_block<Codec, D>(v);
      }
      for (size_t i = 0; i < count; ++i) out[base + i] = from_float<D>(v[i]);
    });
  });
}

void twin_all_reduce(const uint16_t* const* inputs, int world_size, uint16_t* out, size_t n, DType dtype,
                     CodecId codec, size_t slice_values) {
  if (slice_values == 0 || slice_values % kBlockValues) throw std::invalid_argument("slice_values must be a positive multiple of 32");
  dispatch_codec(codec, dtype, [&](auto codec_t, auto d) {
    using Codec = decltype(codec_t);
    constexpr DType D = decltype(d)::value;
    for_each_block(n, [&](size_t base, size_t count) {
      const int owner = int((base / slice_values) % size_t(world_size));
      float acc[kBlockValues] = {};
      for (int r = 0; r < world_size; ++r) {  // first shot, fixed rank order
        float v[kBlockValues] = {};
        for (size_t i = 0; i < count; ++i) v[i] = to_float<D>(inputs[r][base + i]);
        if (r != owner) round_trip_block<Codec, D>(v);  // the owner's own values stay exact
        for (size_t i = 0; i < count; ++i) acc[i] = r == 0 ? v[i] : acc[i] + v[i];  // padding stays 0
      }
      round_trip_block<Codec, D>(acc);  // second shot
      for (size_t i = 0; i < count; ++i) out[base + i] = from_float<D>(acc[i]);
    });
  });
}

void lossless_pack_round_trip(const uint16_t* x, uint16_t* out, uint8_t* fits, size_t n) {
  for_each_block(n, [&](size_t base, size_t count) {
    uint4 lanes[kLanesPerBlock];
    uint32_t e_max = 0;
    for (int l = 0; l < kLanesPerBlock; ++l) {
      uint32_t w[4] = {0, 0, 0, 0};  // the tail is zero-padded, as the kernels' lanes are
      for (int i = 0; i < kLaneValues; ++i) {
        const size_t at = l * kLaneValues + i;
        if (at < count) w[i / 2] |= uint32_t(x[base + at]) << (16 * (i & 1));
      }
      lanes[l].x = w[0], lanes[l].y = w[1], lanes[l].z = w[2], lanes[l].w = w[3];
      e_max = std::max(e_max, LosslessCodec::lane_max_field(lanes[l]));
    }
    bool ok = true;
    for (const uint4& lane : lanes) ok = ok && LosslessCodec::fits(lane, e_max);
    fits[base / kBlockValues] = ok;
    for (int l = 0; l < kLanesPerBlock; ++l) {
      const uint4 back = ok ? LosslessCodec::unpack(LosslessCodec::pack(lanes[l], e_max), e_max) : lanes[l];
      const uint32_t w[4] = {back.x, back.y, back.z, back.w};
      for (int i = 0; i < kLaneValues; ++i) {
        const size_t at = l * kLaneValues + i;
        if (at < count) out[base + at] = uint16_t(w[i / 2] >> (16 * (i & 1)));
      }
    }
  });
}

}  // namespace qr
