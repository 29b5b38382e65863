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

// A lane of 8 values of a tensor of dtype T starting at element `at` (valid: how many lie inside
// the segment), as fp32; `vec`: the lane is 16-byte aligned, so a full lane loads as vectors.
template <DType T>
__device__ __forceinline__ void load_values(const void* base, size_t at, ptrdiff_t valid, bool vec,
                                            float v[kLaneValues]) {
  if constexpr (T == DType::kFloat32) {
    const float* p = static_cast<const float*>(base) + at;
    if (vec && valid >= kLaneValues) {
      const float4 lo = reinterpret_cast<const float4*>(p)[0], hi = reinterpret_cast<const float4*>(p)[1];
      v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
    } else {
#pragma unroll
      for (int i = 0; i < kLaneValues; ++i) v[i] = i < valid ? p[i] : 0.0f;
    }
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(base) + at;
    if (vec) {
      load_lane<T>(p, valid, v);
    } else {
#pragma unroll
      for (int i = 0; i < kLaneValues; ++i) v[i] = i < valid ? to_float<T>(p[i]) : 0.0f;
    }
  }
}

// A whole lane's raw bytes (16 for 16-bit values, 32 for fp32), for loads issued before their values are
// needed: several lanes in flight a thread cost 4 or 8 registers each instead of 8 floats.
template <DType T>
struct RawLane {
  uint4 w[T == DType::kFloat32 ? 2 : 1];
};
// A lane wholly inside the tensor, 16-byte aligned.
template <DType T>
__device__ __forceinline__ RawLane<T> load_raw_lane(const void* base, size_t at) {
  RawLane<T> r;
  const uint4* p = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(base) + at * dtype_bytes(T));
#pragma unroll
  for (int k = 0; k < int(sizeof(r.w) / sizeof(uint4)); ++k) r.w[k] = p[k];
  return r;
}
template <DType T>
__device__ __forceinline__ void store_raw_lane(void* base, size_t at, const RawLane<T>& r) {
  uint4* p = reinterpret_cast<uint4*>(static_cast<uint8_t*>(base) + at * dtype_bytes(T));
#pragma unroll
  for (int k = 0; k < int(sizeof(r.w) / sizeof(uint4)); ++k) p[k] = r.w[k];
}
template <DType T>
__device__ __forceinline__ void unpack_raw_lane(const RawLane<T>& r, float v[kLaneValues]) {
  if constexpr (T == DType::kFloat32) {
    const uint32_t u[8] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w, r.w[1].x, r.w[1].y, r.w[1].z, r.w[1].w};
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) v[i] = __uint_as_float(u[i]);
  } else {
    unpack_lane<T>(r.w[0], v);
  }
}

// Stores the lane's values that lie inside the segment, rounded to T (to_T; exact for fp32).
template <DType T>
__device__ __forceinline__ void store_values(void* base, size_t at, ptrdiff_t valid, bool vec,
                                             const float v[kLaneValues]) {
  if constexpr (T == DType::kFloat32) {
    float* p = static_cast<float*>(base) + at;
    if (vec && valid >= kLaneValues) {
      reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
      for (int i = 0; i < kLaneValues; ++i)
        if (i < valid) p[i] = v[i];
    }
  } else {
    uint16_t* p = static_cast<uint16_t*>(base) + at;
    if (vec) {
      store_lane<T>(p, valid, v);
    } else {
#pragma unroll
      for (int i = 0; i < kLaneValues; ++i)
        if (i < valid) p[i] = from_float<T>(v[i]);
    }
  }
}

}  // namespace qr
