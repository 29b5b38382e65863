// The codec registry: the only place codec ids, names and profile numbers are assigned.
// QR_CODEC(Enum, "name", profile, CodecType, bits_per_value_x4, kind, "rotated_of")
// kind: kExact (the result's bits do not depend on the codec: passthrough, lossless packing) or kScaled
// (one 16-bit scale per 32 values, lossy); rotated_of: the plain codec a rotated one transforms ("" if
// none). Python reads both (quickreduce.codecs) instead of keeping its own lists.
// Profiles follow the seeds' numbering (1=fp16, 2=fp8, 3=int8, 4=int6, 5=int4, 6=fp4); 7 is ours:
// the lossless packing of bf16 (codecs/lossless.hpp); 8 and 9 the rotated int4 and int6
// (core/hadamard.hpp).
// bits_per_value_x4 counts payload plus the 16-bit scale per 32 values, times 4 (34 = 8.5 bits;
// lossless: 13 bits a value plus an 8-bit exponent per 32 = 13.25 when a slice packs, 16 raw).
#pragma once
#include "codecs/float_codec.hpp"
#include "codecs/int_codec.hpp"
#include "codecs/lossless.hpp"
#include "codecs/passthrough.hpp"

#define QR_CODEC_LIST(QR_CODEC)                                              \
  QR_CODEC(kPassthrough, "fp16", 1, PassthroughCodec, 64, kExact, "")       \
  QR_CODEC(kFp8, "fp8", 2, Fp8Codec, 34, kScaled, "")                       \
  QR_CODEC(kInt8, "int8", 3, Int8Codec, 34, kScaled, "")                    \
  QR_CODEC(kInt6, "int6", 4, Int6Codec, 26, kScaled, "")                    \
  QR_CODEC(kInt4, "int4", 5, Int4Codec, 18, kScaled, "")                    \
  QR_CODEC(kFp4, "fp4", 6, Fp4Codec, 18, kScaled, "")                       \
  QR_CODEC(kLossless, "lossless", 7, LosslessCodec, 53, kExact, "")         \
  QR_CODEC(kInt4H, "int4h", 8, Int4HCodec, 18, kScaled, "int4")             \
  QR_CODEC(kInt6H, "int6h", 9, Int6HCodec, 26, kScaled, "int6")

namespace qr {

enum class CodecId : int {
#define QR_ENUM(e, name, profile, type, bits4, kind, rotated_of) e = profile,
  QR_CODEC_LIST(QR_ENUM)
#undef QR_ENUM
};

enum class CodecKind : int { kExact, kScaled };

struct CodecInfo {
  CodecId id;
  const char* name;
  int profile;
  float bits_per_value;
  CodecKind kind;
  const char* rotated_of;  // "" unless a rotated form of that plain codec
};

constexpr CodecInfo kCodecs[] = {
#define QR_INFO(e, name, profile, type, bits4, kind, rotated_of) \
  {CodecId::e, name, profile, bits4 / 4.0f, CodecKind::kind, rotated_of},
    QR_CODEC_LIST(QR_INFO)
#undef QR_INFO
};
constexpr int kNumCodecs = sizeof(kCodecs) / sizeof(kCodecs[0]);
// Whether a registry id is a scaled (lossy, block-scaled) codec; false for ids outside the registry.
constexpr bool codec_is_scaled(CodecId id) {
  for (const auto& c : kCodecs)
    if (c.id == id) return c.kind == CodecKind::kScaled;
  return false;
}

// Bits of codes one lane of 8 values carries, its block's scale apart (the coded small path's wire,
// transport/workspace.hpp: coded_packet_vectors).
template <class Codec>
constexpr int kLaneCodeBits = (Codec::kPlaneABytes + Codec::kPlaneBBytes) * 8;
constexpr int codec_lane_code_bits(CodecId id) {
#define QR_LANE_BITS(e, name, profile, type, bits4, kind, rotated_of) \
  if (id == CodecId::e) return kLaneCodeBits<type>;
  QR_CODEC_LIST(QR_LANE_BITS)
#undef QR_LANE_BITS
  return 0;
}

// The codec that actually travels for a registry codec and a tensor dtype: fp32 tensors take the
// exact passthrough in 32 bits (the lossless packing is bf16's), every scaled codec is itself
// (its arithmetic runs on fp32 values; the scale is stored in scale_dtype(D)).
template <class Codec, DType D>
struct WireCodecFor { using type = Codec; };
template <>
struct WireCodecFor<PassthroughCodec, DType::kFloat32> { using type = Fp32PassthroughCodec; };
template <>
struct WireCodecFor<LosslessCodec, DType::kFloat32> { using type = Fp32PassthroughCodec; };
template <class Codec, DType D>
using WireCodec = typename WireCodecFor<Codec, D>::type;

// Bytes one slice of `values` values occupies on the wire: planes padded to 16 bytes so every
// plane and the scale array start 16-byte aligned.
template <class Codec>
struct SliceLayout {
  size_t lanes;  // values / kLaneValues
  size_t plane_a, plane_b, scales, total;
  QR_HD static constexpr SliceLayout make(size_t values) {
    size_t lanes = values / kLaneValues;
    size_t a = (lanes * Codec::kPlaneABytes + 15) / 16 * 16;
    size_t b = (lanes * Codec::kPlaneBBytes + 15) / 16 * 16;
    size_t s = Codec::kScaled ? ((values / kBlockValues) * 2 + 15) / 16 * 16 : 0;
    return SliceLayout{lanes, a, b, s, a + b + s};
  }
};

// A lossless slot holds the raw values or the packed planes (A: sign|mantissa bytes, B: code
// nibbles, C: code high bits, E: a byte of e_max a block); `total` (the slot's stride) is the
// larger, raw form, so slots stay where the passthrough's are; a packed slice sends `packed` bytes.
template <>
struct SliceLayout<LosslessCodec> {
  size_t lanes;
  size_t plane_a, plane_b, plane_c, plane_e;  // bytes of each plane, in this order
  size_t packed, raw, total;
  QR_HD static constexpr SliceLayout make(size_t values) {
    const size_t lanes = values / kLaneValues;
    const size_t a = (lanes * 8 + 15) / 16 * 16, b = (lanes * 4 + 15) / 16 * 16, c = (lanes + 15) / 16 * 16;
    const size_t e = (values / kBlockValues + 15) / 16 * 16;
    return SliceLayout{lanes, a, b, c, e, a + b + c + e, lanes * 16, lanes * 16};
  }
};

}  // namespace qr
