// The add + RMSNorm epilogue's per-value arithmetic (docs/codec-spec.md, "Add + RMSNorm epilogue"),
// shared by the epilogue kernel (add_rmsnorm.cu) and the fused one-shot (one_shot.cuh), so both give
// the bits the spec and the numpy oracle give.
#pragma once
#include "transport/lanes.cuh"
#include "transport/workspace.hpp"

namespace qr {

// r = to_T(s + residual): the residual add in the tensor's dtype, as torch's `s + residual`.
template <DType D>
__device__ __forceinline__ float add_residual(float s, float residual) {
  return to_float<D>(from_float<D>(__fadd_rn(s, residual)));
}

// q_j: a lane's squares summed in order, the leaf of the row's pairwise tree.
__device__ __forceinline__ float lane_square_sum(const float v[kLaneValues]) {
  float s = __fmul_rn(v[0], v[0]);
#pragma unroll
  for (int i = 1; i < kLaneValues; ++i) s = __fadd_rn(s, __fmul_rn(v[i], v[i]));
  return s;
}

// 1 / sqrt(ss / H + eps), IEEE square root and divisions.
__device__ __forceinline__ float inverse_rms(float squares, size_t hidden, float eps) {
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(squares, float(hidden)), eps)));
}

// y = to_T(to_T(r * inv_rms) * w): HF's LlamaRMSNorm and vLLM's rounding.
template <DType D>
__device__ __forceinline__ float normed(float r, float inv_rms, float w) {
  return to_float<D>(from_float<D>(__fmul_rn(to_float<D>(from_float<D>(__fmul_rn(r, inv_rms))), w)));
}

}  // namespace qr

namespace qr {

// Rows [row_begin, row_end) of summed values held in `out` through the epilogue, by a whole CTA
// (blockDim.x a multiple of 32; every thread calls), in the two-shot's epilogue step: r goes to
// residual_out, the normed row over the sum in `out`. Thread t takes lanes t, t + T, ..; a warp's
// 32 lanes are one aligned subtree of the spec's pairwise tree (shuffles, partners 1..16, as
// add_rmsnorm.cu), the subtree sums meet in `subtrees` (double-buffered by row, so one barrier a
// row) and every warp sums them in the tree's order itself. The sums were stored by other threads
// of this CTA (the caller's barrier orders them) and r by this thread: both are read from L2
// (ld.cg), never from an L1 line an in-place input left.
template <DType D>
__device__ __noinline__ void cta_add_rmsnorm_rows(uint16_t* out, const uint16_t* residual, const uint16_t* weight,
                                     uint16_t* residual_out, size_t row_begin, size_t row_end, uint32_t hidden,
                                     float eps, float (*subtrees)[kCtaRowMaxSubtrees]) {
  const int T = blockDim.x, t = threadIdx.x, warp = t / 32, warp_lane = t % 32;
  const int lanes = int(hidden / kLaneValues);
  int padded = 256;  // the spec's tree: lanes padded to a power of two, at least 256
  while (padded < lanes) padded *= 2;
  const int top = padded / 32;                     // subtrees in the tree (8 .. 64)
  const int written = (lanes + T - 1) / T * (T / 32);  // subtree sums the chunks store (zeros past the row)
  for (size_t row = row_begin; row < row_end; ++row) {
    float* sub = subtrees[row & 1];
    const size_t base = row * hidden;
    for (int first = 0; first < lanes; first += T) {
      const int lane = first + t;
      float q = 0.0f;
      if (lane < lanes) {
        const size_t at = base + size_t(lane) * kLaneValues;
        float s[kLaneValues], r[kLaneValues];
        unpack_lane<D>(__ldcg(reinterpret_cast<const uint4*>(out + at)), s);
        unpack_lane<D>(*reinterpret_cast<const uint4*>(residual + at), r);
#pragma unroll
        for (int v = 0; v < kLaneValues; ++v) r[v] = add_residual<D>(s[v], r[v]);
        *reinterpret_cast<uint4*>(residual_out + at) = pack_lane<D>(r);
        q = lane_square_sum(r);
      }
#pragma unroll
      for (int m = 1; m < 32; m *= 2) q = __fadd_rn(q, __shfl_xor_sync(0xffffffffu, q, m));
      if (warp_lane == 0) sub[first / 32 + warp] = q;
    }
    __syncthreads();
    auto entry = [&](int i) { return i < written ? sub[i] : 0.0f; };
    float x = top > 32 ? __fadd_rn(entry(2 * warp_lane), entry(2 * warp_lane + 1))
                       : (warp_lane < top ? entry(warp_lane) : 0.0f);
#pragma unroll
    for (int m = 1; m < 32; m *= 2)
      if (m < top) x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, m));
    const float inv_rms = inverse_rms(__shfl_sync(0xffffffffu, x, 0), hidden, eps);
    for (int lane = t; lane < lanes; lane += T) {
      const size_t at = base + size_t(lane) * kLaneValues;
      float r[kLaneValues], w[kLaneValues];
      unpack_lane<D>(__ldcg(reinterpret_cast<const uint4*>(residual_out + at)), r);
      unpack_lane<D>(*reinterpret_cast<const uint4*>(weight + size_t(lane) * kLaneValues), w);
#pragma unroll
      for (int v = 0; v < kLaneValues; ++v) r[v] = normed<D>(r[v], inv_rms, w[v]);
      *reinterpret_cast<uint4*>(out + at) = pack_lane<D>(r);
    }
  }
}

}  // namespace qr
