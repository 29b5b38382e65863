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
    w.x = pack2<D>(v[0], v[1]);
    w.y = pack2<D>(v[2], v[3]);
    w.z = pack2<D>(v[4], v[5]);
    w.w = pack2<D>(v[6], v[7]);
    *reinterpret_cast<uint4*>(out + idx) = w;
  } else {
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i)
      if (idx + i < numel) out[idx + i] = from_float<D>(v[i]);
  }
}

}  // namespace qr
