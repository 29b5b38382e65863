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

// Lanes a thread has in flight in cta_add_rmsnorm_rows: their loads are issued together, so a pass
// waits for one memory latency, not one a lane (4 made the fused two-shot spill 72-136 bytes at 64
// registers).
constexpr int kRowBatchLanes = 2;

// The rows' statistic from the subtree sums `s` of one row (`stored` of them, the rest of the tree's
// `top` leaves zero): warp lane j takes leaf j (two when top = 64), and the shuffles finish the
// spec's tree; the warp must be converged. Returns 1 / rms.
__device__ __forceinline__ float row_inverse_rms(const float* s, int stored, int top, uint32_t hidden, float eps) {
  const int warp_lane = threadIdx.x % 32;
  auto entry = [&](int i) { return i < stored ? s[i] : 0.0f; };
  float x = top > 32 ? __fadd_rn(entry(2 * warp_lane), entry(2 * warp_lane + 1))
                     : (warp_lane < top ? entry(warp_lane) : 0.0f);
#pragma unroll
  for (int m = 1; m < 32; m *= 2)
    if (m < top) x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, m));
  return inverse_rms(__shfl_sync(0xffffffffu, x, 0), hidden, eps);
}

// Rows [row_begin, row_end) of summed values held in `out` through the epilogue, by a whole CTA
// (blockDim.x a multiple of 32; every thread calls), in the two-shot's epilogue step: r goes to
// residual_out, the normed row over the sum in `out`. hidden is a multiple of 256, so a warp's 32
// consecutive lanes are one aligned subtree of one row's pairwise tree (shuffles, partners 1..16,
// as add_rmsnorm.cu). A pass takes as many whole rows as kRowBatchLanes lanes a thread cover (one
// row, in batches, when it is longer): the lanes' loads go out together, the subtree sums meet in
// `subtrees` (2 x kCtaRowMaxSubtrees, double-buffered by pass: one barrier a pass), each warp sums
// its row's in the tree's order itself, and r stays in registers for the norm unless the row took
// several batches. The sums were stored by other threads of this CTA (the caller's barrier orders
// them) and r by this thread: both are read from L2 (ld.cg), never from an L1 line an in-place
// input left.
template <DType D>
__device__ __forceinline__ void cta_add_rmsnorm_rows(uint16_t* out, const uint16_t* residual, const uint16_t* weight,
                                                     uint16_t* residual_out, size_t row_begin, size_t row_end,
                                                     uint32_t hidden, float eps, float* subtrees) {
  constexpr int B = kRowBatchLanes;
  const int T = blockDim.x, t = threadIdx.x, warp_lane = t % 32;
  const int lanes = int(hidden / kLaneValues), stored = lanes / 32;
  int padded = 256;  // the spec's tree: lanes padded to a power of two, at least 256
  while (padded < lanes) padded *= 2;
  const int top = padded / 32;  // leaves of the tree above the warps' subtrees (8 .. 64)
  const int per_pass = max(1, B * T / lanes);
  int parity = 0;
  for (size_t first_row = row_begin; first_row < row_end; first_row += per_pass, parity ^= 1) {
    const int pass_lanes = int(min(size_t(per_pass), row_end - first_row)) * lanes;
    const bool one_batch = pass_lanes <= B * T;
    float* sub = subtrees + parity * kCtaRowMaxSubtrees;
    uint16_t* pass_out = out + first_row * hidden;
    uint16_t* pass_res_out = residual_out + first_row * hidden;
    const uint16_t* pass_res = residual + first_row * hidden;
    uint4 held[B];
    for (int batch = 0; batch < pass_lanes; batch += B * T) {
      uint4 sums[B];
#pragma unroll
      for (int k = 0; k < B; ++k) {
        const int lane = batch + k * T + t;
        if (lane < pass_lanes) {
          sums[k] = __ldcg(reinterpret_cast<const uint4*>(pass_out) + lane);
          held[k] = *(reinterpret_cast<const uint4*>(pass_res) + lane);
        }
      }
#pragma unroll
      for (int k = 0; k < B; ++k) {
        const int lane = batch + k * T + t;
        if (lane < pass_lanes) {  // the same for a whole warp (pass_lanes is a multiple of 32)
          float s[kLaneValues], r[kLaneValues];
          unpack_lane<D>(sums[k], s);
          unpack_lane<D>(held[k], r);
#pragma unroll
          for (int v = 0; v < kLaneValues; ++v) r[v] = add_residual<D>(s[v], r[v]);
          held[k] = pack_lane<D>(r);
          *(reinterpret_cast<uint4*>(pass_res_out) + lane) = held[k];
          float q = lane_square_sum(r);
#pragma unroll
          for (int m = 1; m < 32; m *= 2) q = __fadd_rn(q, __shfl_xor_sync(0xffffffffu, q, m));
          if (warp_lane == 0) sub[lane / 32] = q;  // (row in the pass) x stored + subtree
        }
      }
    }
    __syncthreads();
    for (int batch = 0; batch < pass_lanes; batch += B * T) {
      uint4 weights[B];
#pragma unroll
      for (int k = 0; k < B; ++k) {
        const int lane = batch + k * T + t;
        if (lane < pass_lanes) {
          if (!one_batch) held[k] = __ldcg(reinterpret_cast<const uint4*>(pass_res_out) + lane);
          weights[k] = *(reinterpret_cast<const uint4*>(weight) + lane % lanes);
        }
      }
#pragma unroll
      for (int k = 0; k < B; ++k) {
        const int lane = batch + k * T + t;
        if (lane < pass_lanes) {
          const float inv_rms = row_inverse_rms(sub + lane / lanes * stored, stored, top, hidden, eps);
          float r[kLaneValues], w[kLaneValues];
          unpack_lane<D>(held[k], r);
          unpack_lane<D>(weights[k], w);
#pragma unroll
          for (int v = 0; v < kLaneValues; ++v) r[v] = normed<D>(r[v], inv_rms, w[v]);
          *(reinterpret_cast<uint4*>(pass_out) + lane) = pack_lane<D>(r);
        }
      }
    }
  }
}

}  // namespace qr
