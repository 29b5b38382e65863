// Per-thread loads/stores of one lane (8 values = 16 bytes) of a user tensor, tails included.
#pragma once
#include "core/block.hpp"

namespace qr {

template <DType D>
__device__ __forceinline__ void load_lane(const uint16_t* in, size_t idx, size_t numel, float v[kLaneValues]) {
  if (idx + kLaneValues <= numel) {
    uint4 w = *reinterpret_cast<const uint4*>(in + idx);
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = to_float<D>(uint16_t(u[i] & 0xffffu));
      v[2 * i + 1] = to_float<D>(uint16_t(u[i] >> 16));
    }
  } else {
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) v[i] = idx + i < numel ? to_float<D>(in[idx + i]) : 0.0f;
  }
}

template <DType D>
__device__ __forceinline__ void store_lane(uint16_t* out, size_t idx, size_t numel, const float v[kLaneValues]) {
  if (idx + kLaneValues <= numel) {
    uint4 w;
    w.x = from_float<D>(v[0]) | (uint32_t(from_float<D>(v[1])) << 16);
    w.y = from_float<D>(v[2]) | (uint32_t(from_float<D>(v[3])) << 16);
    w.z = from_float<D>(v[4]) | (uint32_t(from_float<D>(v[5])) << 16);
    w.w = from_float<D>(v[6]) | (uint32_t(from_float<D>(v[7])) << 16);
    *reinterpret_cast<uint4*>(out + idx) = w;
  } else {
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i)
      if (idx + i < numel) out[idx + i] = from_float<D>(v[i]);
  }
}

}  // namespace qr
