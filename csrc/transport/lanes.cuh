// Per-thread loads/stores of one lane (8 values = 16 bytes) of a user tensor, tails included.
// `valid` = how many of the lane's 8 values lie inside the tensor (may be <= 0 or >= 8): callers
// that know a whole tile is inside pass kLaneValues and the tail branch folds away.
#pragma once
#include <cstddef>

#include "core/block.hpp"

namespace qr {

// The j-th rank after `me` in ring order (j = 1..W-1 visits every peer once, in the same order on
// every rank).
__device__ __forceinline__ int rank_after(int me, int j, int W) { return me + j < W ? me + j : me + j - W; }

// A whole lane's 16 bytes as 8 floats.
template <DType D>
__device__ __forceinline__ void unpack_lane(const uint4& w, float v[kLaneValues]) {
  const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = to_float<D>(uint16_t(u[i] & 0xffffu));
    v[2 * i + 1] = to_float<D>(uint16_t(u[i] >> 16));
  }
}

// 8 floats rounded to D as a whole lane's 16 bytes (what store_lane writes for a full lane).
template <DType D>
__device__ __forceinline__ uint4 pack_lane(const float v[kLaneValues]) {
  return make_uint4(pack2<D>(v[0], v[1]), pack2<D>(v[2], v[3]), pack2<D>(v[4], v[5]), pack2<D>(v[6], v[7]));
}

template <DType D>
__device__ __forceinline__ void load_lane(const uint16_t* p, ptrdiff_t valid, float v[kLaneValues]) {
  if (valid >= kLaneValues) {
    unpack_lane<D>(*reinterpret_cast<const uint4*>(p), v);
  } else {
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) v[i] = i < valid ? to_float<D>(p[i]) : 0.0f;
  }
}

template <DType D>
__device__ __forceinline__ void store_lane(uint16_t* p, ptrdiff_t valid, const float v[kLaneValues]) {
  if (valid >= kLaneValues) {
    *reinterpret_cast<uint4*>(p) = pack_lane<D>(v);
  } else {
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i)
      if (i < valid) p[i] = from_float<D>(v[i]);
  }
}

}  // namespace qr
