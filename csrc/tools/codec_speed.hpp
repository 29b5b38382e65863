// One codec's encode and decode over a whole tensor on one GPU (tools/codec_speed.cu).
#pragma once
#include <cstddef>
#include <cstdint>

#include "codecs/codec_list.hpp"

namespace qr {
// Bytes the encoded tensor takes (its planes and scales, as one slice).
size_t codec_wire_bytes(size_t numel, CodecId codec);
// Encodes `in` (numel values of a 16-bit dtype) into `wire` and/or decodes `wire` into `out`, on
// `stream`; block-scaled codecs only (the rotated ones rotate, as in the collectives).
void codec_speed_launch(uintptr_t in, uintptr_t wire, uintptr_t out, size_t numel, DType dtype, CodecId codec,
                        uintptr_t stream, bool encode, bool decode);
}  // namespace qr
