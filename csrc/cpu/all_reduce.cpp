// CPU twin of the all-reduce (docs/codec-spec.md, "All-reduce").
#include <stdexcept>

#include "cpu/blocks.hpp"
#include "cpu/twin.hpp"

namespace qr {
using namespace twin;

void twin_all_reduce(const uint16_t* const* inputs, int world_size, uint16_t* out, size_t n, DType dtype,
                     CodecId codec, size_t slice_values) {
  if (slice_values == 0 || slice_values % kBlockValues) throw std::invalid_argument("slice_values must be a positive multiple of 32");
  dispatch_codec(codec, dtype, [&](auto codec_t, auto d) {
    using Codec = decltype(codec_t);
    constexpr DType D = decltype(d)::value;
    for_each_block(n, [&](size_t base, size_t count) {
      const int owner = int((base / slice_values) % size_t(world_size));
      float acc[kBlockValues] = {};
      // Rotated codecs sum in the rotated domain (the padding is rotated too: every value of a
      // block counts) and rotate back once, after the second shot.
      constexpr bool kRot = kIsRotated<Codec>;
      const size_t summed = kRot ? size_t(kBlockValues) : count;
      for (int r = 0; r < world_size; ++r) {  // first shot, fixed rank order
        float v[kBlockValues] = {};
        for (size_t i = 0; i < count; ++i) v[i] = to_float<D>(inputs[r][base + i]);
        if constexpr (kRot) rotate_block(v);
        if (r != owner) plain_round_trip_block<Codec, D>(v);  // the owner's own values stay exact
        for (size_t i = 0; i < summed; ++i) acc[i] = r == 0 ? v[i] : acc[i] + v[i];  // padding stays 0
      }
      plain_round_trip_block<Codec, D>(acc);  // second shot
      if constexpr (kRot) unrotate_block(acc);
      for (size_t i = 0; i < count; ++i) out[base + i] = from_float<D>(acc[i]);
    });
  });
}

}  // namespace qr
