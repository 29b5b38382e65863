// CPU twin of the segment collectives (docs/codec-spec.md, "Segments" to "All-reduce of fp32
// tensors"): all-gather, all-to-all and reduce-scatter, over raw bits of any tensor dtype.
#include <stdexcept>
#include <vector>

#include "cpu/blocks.hpp"
#include "cpu/twin.hpp"

namespace qr {
using namespace twin;

void twin_all_to_all(const void* const* inputs, int world_size, void* const* outputs, const size_t* splits,
                     DType dtype, CodecId codec) {
  const int W = world_size;
  dispatch_codec_any_dtype(codec, dtype, [&](auto codec_t, auto d) {
    using Codec = decltype(codec_t);
    constexpr DType T = decltype(d)::value;
    std::vector<float> seg;
    for (int r = 0; r < W; ++r) {
      size_t in_at = 0;
      for (int dst = 0; dst < W; ++dst) {
        const size_t n = splits[r * W + dst];
        size_t out_at = 0;  // rank dst's output holds its sources in rank order
        for (int s = 0; s < r; ++s) out_at += splits[s * W + dst];
        seg.assign(n, 0.0f);
        if (r == dst)  // its own segment never crosses the link: exact
          for (size_t i = 0; i < n; ++i) seg[i] = load_value<T>(inputs[r], in_at + i);
        else
          segment_round_trip<Codec, T>(inputs[r], in_at, n, seg.data());
        for (size_t i = 0; i < n; ++i) store_value<T>(outputs[dst], out_at + i, seg[i]);
        in_at += n;
      }
    }
  });
}

void twin_all_gather(const void* const* inputs, int world_size, void* out, size_t k, DType dtype, CodecId codec) {
  dispatch_codec_any_dtype(codec, dtype, [&](auto codec_t, auto d) {
    using Codec = decltype(codec_t);
    constexpr DType T = decltype(d)::value;
    std::vector<float> seg(k);
    for (int r = 0; r < world_size; ++r) {
      segment_round_trip<Codec, T>(inputs[r], 0, k, seg.data());
      for (size_t i = 0; i < k; ++i) store_value<T>(out, r * k + i, seg[i]);
    }
  });
}

// Rank `owner`'s fp32 sum of its chunk [at, at + n) (own values exact, every other rank's through
// one DQ), into acc.
// Rotated codecs: every term is rotated blockwise (the owner's exact values too), the sum is in
// the rotated domain, and it is rotated back once at the end.
template <class Codec, DType T>
static void reduce_chunk(const void* const* inputs, int world_size, int owner, size_t at, size_t n, float* acc) {
  using Wire = WireCodec<Codec, T>;
  constexpr bool kRot = kIsRotated<Codec>;
  for_each_block(n, [&](size_t base, size_t count) {
    float sum[kBlockValues] = {};
    const size_t summed = kRot ? size_t(kBlockValues) : count;  // a rotated tail block mixes its padding in
    for (int s = 0; s < world_size; ++s) {
      float v[kBlockValues] = {};
      for (size_t i = 0; i < count; ++i) v[i] = load_value<T>(inputs[s], at + base + i);
      if constexpr (kRot) rotate_block(v);
      if (s != owner) plain_round_trip_block<Wire, scale_dtype(T)>(v);
      for (size_t i = 0; i < summed; ++i) sum[i] = s == 0 ? v[i] : sum[i] + v[i];  // fp32, rank order
    }
    if constexpr (kRot) unrotate_block(sum);
    for (size_t i = 0; i < count; ++i) acc[base + i] = sum[i];
  });
}

void twin_reduce_scatter(const void* const* inputs, int world_size, void* const* outputs, size_t k, DType dtype,
                         CodecId codec) {
  dispatch_codec_any_dtype(codec, dtype, [&](auto codec_t, auto d) {
    using Codec = decltype(codec_t);
    constexpr DType T = decltype(d)::value;
    std::vector<float> acc(k);
    for (int r = 0; r < world_size; ++r) {
      reduce_chunk<Codec, T>(inputs, world_size, r, r * k, k, acc.data());
      for (size_t i = 0; i < k; ++i) store_value<T>(outputs[r], i, acc[i]);
    }
  });
}

size_t fp32_all_reduce_chunk(size_t n, int world_size) {
  const size_t blocks = (n + size_t(kBlockValues) * world_size - 1) / (size_t(kBlockValues) * world_size);
  return blocks * kBlockValues;
}

void twin_all_reduce_fp32(const uint32_t* const* inputs, int world_size, uint32_t* out, size_t n, CodecId codec) {
  dispatch_codec_any_dtype(codec, DType::kFloat32, [&](auto codec_t, auto) {
    using Codec = decltype(codec_t);
    constexpr DType T = DType::kFloat32;
    const size_t K = fp32_all_reduce_chunk(n, world_size);
    std::vector<float> acc(K), back(K);
    for (int c = 0; c < world_size; ++c) {
      const size_t at = std::min(n, c * K), len = std::min(n, at + K) - at;
      reduce_chunk<Codec, T>(reinterpret_cast<const void* const*>(inputs), world_size, c, at, len, acc.data());
      segment_round_trip<Codec, T>(acc.data(), 0, len, back.data());  // the all-gather's one quantization
      for (size_t i = 0; i < len; ++i) out[at + i] = float_bits(back[i]);
    }
  });
}

}  // namespace qr
