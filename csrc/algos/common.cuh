// Per-thread loads/stores of one lane (8 values = 16 bytes) of a user tensor, tails included.
#pragma once
#include "core/block.hpp"

namespace qr {

// The 16 bytes of one lane (zeros past the end of the tensor), without converting them yet, so a
// caller can have several loads in flight before it needs any.
__device__ __forceinline__ uint4 load_raw(const uint16_t* in, size_t idx, size_t numel) {
  if (idx + kLaneValues <= numel) return *reinterpret_cast<const uint4*>(in + idx);
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t lo = idx + 2 * i < numel ? in[idx + 2 * i] : 0u;
    uint32_t hi = idx + 2 * i + 1 < numel ? in[idx + 2 * i + 1] : 0u;
    w[i] = lo | (hi << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <DType D>
__device__ __forceinline__ void unpack(const uint4& raw, float v[kLaneValues]) {
  const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = to_float<D>(uint16_t(u[i] & 0xffffu));
    v[2 * i + 1] = to_float<D>(uint16_t(u[i] >> 16));
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
