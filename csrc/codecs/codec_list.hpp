// The codec registry: the only place codec ids, names and profile numbers are assigned.
// QR_CODEC(Enum, "name", profile, CodecType, bits_per_value_x2)
// Profiles follow the seeds' numbering (1=fp16, 2=fp8, 3=int8, 4=int6, 5=int4, 6=fp4).
// bits_per_value_x2 counts payload plus the 16-bit scale per 32 values, times 2 (17 = 8.5 bits).
#pragma once
#include "codecs/float_codec.hpp"
#include "codecs/int_codec.hpp"
#include "codecs/passthrough.hpp"

#define QR_CODEC_LIST(QR_CODEC)                            \
  QR_CODEC(kPassthrough, "fp16", 1, PassthroughCodec, 32) \
  QR_CODEC(kFp8, "fp8", 2, Fp8Codec, 17)                  \
  QR_CODEC(kInt8, "int8", 3, Int8Codec, 17)               \
  QR_CODEC(kInt6, "int6", 4, Int6Codec, 13)               \
  QR_CODEC(kInt4, "int4", 5, Int4Codec, 9)                \
  QR_CODEC(kFp4, "fp4", 6, Fp4Codec, 9)

namespace qr {

enum class CodecId : int {
#define QR_ENUM(e, name, profile, type, bits2) e = profile,
  QR_CODEC_LIST(QR_ENUM)
#undef QR_ENUM
};

struct CodecInfo {
  CodecId id;
  const char* name;
  int profile;
  float bits_per_value;
};

constexpr CodecInfo kCodecs[] = {
#define QR_INFO(e, name, profile, type, bits2) {CodecId::e, name, profile, bits2 / 2.0f},
    QR_CODEC_LIST(QR_INFO)
#undef QR_INFO
};
constexpr int kNumCodecs = sizeof(kCodecs) / sizeof(kCodecs[0]);

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

}  // namespace qr
