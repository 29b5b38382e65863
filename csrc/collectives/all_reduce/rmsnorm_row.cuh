// The add + RMSNorm epilogue's per-value arithmetic (docs/codec-spec.md, "Add + RMSNorm epilogue"),
// shared by the epilogue kernel (add_rmsnorm.cu) and the fused one-shot (one_shot.cuh), so both give
// the bits the spec and the numpy oracle give.
#pragma once
#include "transport/lanes.cuh"

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

// 1 / rms of a row from the sums of squares of its 32-lane subtrees (`stored` of them, leaf(i)
// reads subtree i; the rest of the tree's `top` leaves, top = the row's lanes padded to a power of
// two of at least 256, over 32, are zero): warp lane j takes leaf j (two when top = 64) and the
// shuffles finish the spec's pairwise tree. A converged warp calls it; every lane gets the result.
template <class Leaf>
__device__ __forceinline__ float row_inverse_rms(Leaf leaf, int stored, int top, uint32_t hidden, float eps) {
  const int warp_lane = threadIdx.x % 32;
  auto entry = [&](int i) { return i < stored ? leaf(i) : 0.0f; };
  float x = top > 32 ? __fadd_rn(entry(2 * warp_lane), entry(2 * warp_lane + 1))
                     : (warp_lane < top ? entry(warp_lane) : 0.0f);
#pragma unroll
  for (int m = 1; m < 32; m *= 2)
    if (m < top) x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, m));
  return inverse_rms(__shfl_sync(0xffffffffu, x, 0), hidden, eps);
}

}  // namespace qr
