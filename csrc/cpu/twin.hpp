// CPU twin: the codecs' own __host__ __device__ arithmetic, run on the host, emulating the whole
// all-reduce of docs/codec-spec.md for any world size. The GPU output must equal it bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "codecs/codec_list.hpp"

namespace qr {

// out = to_T(D(Q(x))): one quantize/dequantize round trip, blockwise. as_owner: computed the way
// the two-shot's owner gets its own result (the integer codecs' encode_keep, else encode and
// decode), which must give the same bits, or the owner would hold other bits than the ranks that
// decode its payload.
void twin_round_trip(const uint16_t* x, uint16_t* out, size_t n, DType dtype, CodecId codec, bool as_owner = false);

// out = to_T(D(Q(sum_r c_r))) with the sum in fp32 in rank order, where c_r = x_r for the rank
// that owns the value (value i: rank (i / slice_values) % world_size) and D(Q(x_r)) otherwise.
void twin_all_reduce(const uint16_t* const* inputs, int world_size, uint16_t* out, size_t n, DType dtype,
                     CodecId codec, size_t slice_values);

// The lossless codec's packing, blockwise, as the kernels pack a slice: per block of 32 bf16 values
// fits[b] says whether it packs (every value in the window under the block's largest exponent);
// out is the packed-then-unpacked block where it packs, the input where it does not (the kernels
// then send the slice raw). out must equal x bit for bit either way.
void lossless_pack_round_trip(const uint16_t* x, uint16_t* out, uint8_t* fits, size_t n);

// The segment collectives (docs/codec-spec.md): inputs/outputs are raw bits of dtype (uint16 for
// fp16/bf16, uint32 for fp32), one pointer per rank. splits[r * W + d]: values rank r sends rank d.
void twin_all_to_all(const void* const* inputs, int world_size, void* const* outputs, const size_t* splits,
                     DType dtype, CodecId codec);
void twin_all_gather(const void* const* inputs, int world_size, void* out, size_t k, DType dtype, CodecId codec);
void twin_reduce_scatter(const void* const* inputs, int world_size, void* const* outputs, size_t k, DType dtype,
                         CodecId codec);
// The fp32 all-reduce: reduce-scatter then all-gather over chunks of fp32_all_reduce_chunk() values.
size_t fp32_all_reduce_chunk(size_t n, int world_size);
void twin_all_reduce_fp32(const uint32_t* const* inputs, int world_size, uint32_t* out, size_t n, CodecId codec);

}  // namespace qr
