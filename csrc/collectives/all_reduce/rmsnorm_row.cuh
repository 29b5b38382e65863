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
