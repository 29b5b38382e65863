// CPU twin of the codecs alone: one round trip, and the lossless packing.
#include <algorithm>

#include "cpu/blocks.hpp"
#include "cpu/twin.hpp"

namespace qr {
using namespace twin;

void twin_round_trip(const uint16_t* x, uint16_t* out, size_t n, DType dtype, CodecId codec, bool as_owner) {
  dispatch_codec(codec, dtype, [&](auto codec_t, auto d) {
    using Codec = decltype(codec_t);
    constexpr DType D = decltype(d)::value;
    for_each_block(n, [&](size_t base, size_t count) {
      float v[kBlockValues] = {};
      for (size_t i = 0; i < count; ++i) v[i] = to_float<D>(x[base + i]);
      if (as_owner) {
        if constexpr (kIsRotated<Codec>) rotate_block(v);
        owner_block<Codec, D>(v);
        if constexpr (kIsRotated<Codec>) unrotate_block(v);
      } else {
        round_trip_block<Codec, D>(v);
      }
      for (size_t i = 0; i < count; ++i) out[base + i] = from_float<D>(v[i]);
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
