// CPU twin: the codecs' own __host__ __device__ arithmetic, run on the host, emulating the whole
// all-reduce of docs/codec-spec.md for any world size. The GPU output must equal it bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "codecs/codec_list.hpp"

namespace qr {

// out = to_T(D(Q(x))): one quantize/dequantize round trip, blockwise.
void twin_round_trip(const uint16_t* x, uint16_t* out, size_t n, DType dtype, CodecId codec);

// out = to_T(D(Q(sum_r D(Q(x_r))))) with the sum in fp32 in rank order.
void twin_all_reduce(const uint16_t* const* inputs, int world_size, uint16_t* out, size_t n, DType dtype,
                     CodecId codec);

}  // namespace qr
