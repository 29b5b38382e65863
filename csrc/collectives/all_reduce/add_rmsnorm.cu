// The all-reduce's epilogue for a transformer layer: residual add, RMSNorm and, optionally, the
// normed row as FP8 e4m3 with a per-token or per-tensor scale, in one kernel after the all-reduce
// (chained with PDL: its launch overlaps the all-reduce's tail). Every rank holds the same summed
// bits, so every rank computes the same epilogue bits. The arithmetic (docs/codec-spec.md, "Add +
// RMSNorm epilogue") fixes every rounding point and the order of the sum of squares, so the numpy
// oracle reproduces it bit for bit: the sum of squares is a pairwise tree over 8-value lanes
// padded to a power of two (at least 256 lanes: blocks = padded / 256 <= 32).
//
// Thread t of the row's CTA holds lanes t, t + 256, t + 512, .. (so a warp's 16-byte accesses are
// consecutive), which makes lane 256 b + t leaf t of block b: each block of 256 consecutive lanes
// is one aligned subtree of the tree, summed as warp shuffles (partners 1, 2, .., 16: adjacent
// leaves first) then the 8 warps in pairs, and the blocks' sums are the tree's top levels, block b
// on warp lane b. Rows up to hidden 16384 (8 lanes a thread) stay in registers from the loads to
// the stores; longer rows go in chunks of 8 lanes a thread and re-read the thread's own lanes.
#include <cuda_fp8.h>

#include "collectives/all_reduce/add_rmsnorm.hpp"
#include "collectives/all_reduce/rmsnorm_row.cuh"
#include "collectives/pdl_launch.cuh"
#include "transport/lanes.cuh"
#include "transport/primitives.cuh"

namespace qr {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxBlocks = 32;        // 256-lane blocks in a row: hidden <= 65536 (host check)
constexpr int kMaxRegisterLanes = 8;  // lanes a thread holds in registers: whole rows up to 16384
static_assert(kMaxBlocks <= 32, "the blocks' sums are combined by one warp, a lane each");

// The tree's 256-lane blocks: the row's lanes padded to a power of two, at least one a thread.
__host__ __device__ int padded_blocks(size_t lanes) {
  int blocks = 1;
  while (size_t(blocks) * kThreads < lanes) blocks *= 2;
  return blocks;
}

__device__ __forceinline__ uint4 load16(const uint16_t* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ void store16(uint16_t* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }

// The row's sum of squares from warp_sums[b][w] (the subtree of block b's 32 lanes on warp w):
// warp lane b sums block b's warps in pairs, then lanes 0 .. blocks-1 combine in pairs (partners
// 1, 2, ..); every thread gets lane 0's total.
__device__ __forceinline__ float row_tree(const float (*warp_sums)[kWarps], int blocks) {
  const int warp_lane = threadIdx.x % 32;
  float w[kWarps];
#pragma unroll
  for (int i = 0; i < kWarps; ++i) w[i] = warp_lane < blocks ? warp_sums[warp_lane][i] : 0.0f;
#pragma unroll
  for (int h = 1; h < kWarps; h *= 2)
#pragma unroll
    for (int i = 0; i < kWarps; i += 2 * h) w[i] = __fadd_rn(w[i], w[i + h]);
  float x = w[0];
#pragma unroll
  for (int m = 1; m < kMaxBlocks; m *= 2)
    if (m < blocks) x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, m));
  return __shfl_sync(0xffffffffu, x, 0);
}

// Max over the CTA of values >= 0 (any order gives the same bits); every thread gets it.
__device__ __forceinline__ float cta_max(float x, float* warp_max) {
#pragma unroll
  for (int m = 1; m < 32; m *= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, m));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = x;
  __syncthreads();
  x = warp_max[0];
#pragma unroll
  for (int i = 1; i < kWarps; ++i) x = fmaxf(x, warp_max[i]);
  return x;
}

// K lanes a thread per chunk of K * 256 lanes; kWholeRow: the row is one chunk (K = its blocks),
// held in registers throughout.
template <DType D, int K, bool kWholeRow>
__global__ void __launch_bounds__(kThreads) add_rmsnorm_kernel(AddRmsNormArgs a) {
  __shared__ float warp_sums[kWholeRow ? K : kMaxBlocks][kWarps];
  __shared__ float warp_max[kWarps];
  const size_t row = blockIdx.x, H = a.hidden;
  const int lanes = int(H / kLaneValues), t = threadIdx.x;
  const int blocks = kWholeRow ? K : padded_blocks(lanes), chunks = kWholeRow ? 1 : blocks / K;
  const bool add = a.sum != nullptr;  // else `residual` is r, written by the all-reduce itself
  const auto* sum = add ? static_cast<const uint16_t*>(a.sum) + row * H : nullptr;
  const auto* res = static_cast<const uint16_t*>(a.residual) + row * H;
  auto* res_out = static_cast<uint16_t*>(a.residual_out) + row * H;
  auto* out = static_cast<uint16_t*>(a.out) + row * H;
  const auto* weight = static_cast<const uint16_t*>(a.weight);
  auto lane_of = [&](int c, int i) { return (c * K + i) * kThreads + t; };

  uint4 held[K];  // the residual, then r (residual_out's bits), then y (out's bits)
  uint4 weights[K];
  auto load_row = [&] {  // a whole row's residual (or r) and weights
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (lane_of(0, i) < lanes) {
        held[i] = load16(res + lane_of(0, i) * kLaneValues);
        weights[i] = load16(weight + lane_of(0, i) * kLaneValues);
      }
  };
  // Loaded while the all-reduce finishes: the residual and weight are none of its outputs (out
  // and residual_out are only stored after the wait), and its kernels wait for their own
  // predecessors before they let this one launch, so whatever wrote them has completed. Without
  // `sum`, `residual` is r, the all-reduce's own output: loaded after the wait.
  if (kWholeRow && add) load_row();
  grid_dependency_wait();  // the all-reduce's output is complete and visible from here on
  grid_dependents_launch();
  if (kWholeRow && !add) load_row();

  // Pass 1: r = to_T(sum + residual), stored; each lane's squares summed, then its block's
  // subtree as far as the warp (every load of a chunk issued before its first store).
  for (int c = 0; c < chunks; ++c) {
    uint4 sums[K];
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (lane_of(c, i) < lanes) {
        if (add) sums[i] = load16(sum + lane_of(c, i) * kLaneValues);
        if constexpr (!kWholeRow) held[i] = load16(res + lane_of(c, i) * kLaneValues);
      }
    float lane_squares[K];
#pragma unroll
    for (int i = 0; i < K; ++i) {
      lane_squares[i] = 0.0f;
      if (lane_of(c, i) < lanes) {
        float r[kLaneValues];
        unpack_lane<D>(held[i], r);
        if (add) {
          float s[kLaneValues];
          unpack_lane<D>(sums[i], s);
#pragma unroll
          for (int v = 0; v < kLaneValues; ++v) r[v] = add_residual<D>(s[v], r[v]);
          held[i] = pack_lane<D>(r);
          store16(res_out + lane_of(c, i) * kLaneValues, held[i]);
        }
        lane_squares[i] = lane_square_sum(r);
      }
    }
#pragma unroll
    for (int m = 1; m < 32; m *= 2)
#pragma unroll
      for (int i = 0; i < K; ++i)
        lane_squares[i] = __fadd_rn(lane_squares[i], __shfl_xor_sync(0xffffffffu, lane_squares[i], m));
    if (t % 32 == 0)
#pragma unroll
      for (int i = 0; i < K; ++i) warp_sums[c * K + i][t / 32] = lane_squares[i];
  }
  __syncthreads();
  const float squares = row_tree(warp_sums, blocks);
  const float inv_rms = inverse_rms(squares, H, a.eps);

  // Pass 2: y = to_T(to_T(r * inv_rms) * w) (HF / vLLM's rounding), from r's stored bits (a
  // chunked row re-reads its own lanes of residual_out: no barrier needed).
  float amax = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    if constexpr (!kWholeRow) {
#pragma unroll
      for (int i = 0; i < K; ++i)
        if (lane_of(c, i) < lanes) {
          held[i] = load16((add ? res_out : res) + lane_of(c, i) * kLaneValues);
          weights[i] = load16(weight + lane_of(c, i) * kLaneValues);
        }
    }
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (lane_of(c, i) < lanes) {
        float r[kLaneValues], w[kLaneValues];
        unpack_lane<D>(held[i], r);
        unpack_lane<D>(weights[i], w);
#pragma unroll
        for (int v = 0; v < kLaneValues; ++v) {
          r[v] = normed<D>(r[v], inv_rms, w[v]);
          amax = fmaxf(amax, fabsf(r[v]));
        }
        held[i] = pack_lane<D>(r);
        store16(out + lane_of(c, i) * kLaneValues, held[i]);
      }
  }
  if (a.fp8_mode == Fp8Out::kNone) return;

  // FP8 e4m3 of the normed row: scale = amax / 448 per token (1 for an all-zero row), or the
  // caller's per-tensor scale; code = e4m3_satfinite(y * (1 / scale)), from y's stored bits.
  float scale;
  if (a.fp8_mode == Fp8Out::kPerToken) {
    const float m = cta_max(amax, warp_max);
    scale = m > 0.0f ? __fdiv_rn(m, kE4m3Max) : 1.0f;
    if (t == 0) a.fp8_scales[row] = scale;
  } else {
    scale = a.fp8_scales[0];
  }
  const float inv_scale = __fdiv_rn(1.0f, scale);
  for (int c = 0; c < chunks; ++c) {
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (lane_of(c, i) < lanes) {
        float y[kLaneValues];
        unpack_lane<D>(kWholeRow ? held[i] : load16(out + lane_of(c, i) * kLaneValues), y);
        uint32_t codes[4];  // cvt.rn.satfinite.e4m3x2: RNE, saturating at 448, as the fp8 codec
#pragma unroll
        for (int k = 0; k < 4; ++k)
          codes[k] = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(y[2 * k], inv_scale), __fmul_rn(y[2 * k + 1], inv_scale)),
                                              __NV_SATFINITE, __NV_E4M3);
        *reinterpret_cast<uint2*>(a.fp8 + row * H + size_t(lane_of(c, i)) * kLaneValues) =
            make_uint2(codes[0] | codes[1] << 16, codes[2] | codes[3] << 16);
      }
  }
}

template <DType D>
cudaError_t launch_for(const AddRmsNormArgs& args, cudaStream_t stream) {
  const dim3 grid(unsigned(args.rows)), block(kThreads);
  switch (padded_blocks(args.hidden / kLaneValues)) {
    case 1: return launch_maybe_pdl(add_rmsnorm_kernel<D, 1, true>, grid, block, args, args.pdl, stream);
    case 2: return launch_maybe_pdl(add_rmsnorm_kernel<D, 2, true>, grid, block, args, args.pdl, stream);
    case 4: return launch_maybe_pdl(add_rmsnorm_kernel<D, 4, true>, grid, block, args, args.pdl, stream);
    case 8: return launch_maybe_pdl(add_rmsnorm_kernel<D, 8, true>, grid, block, args, args.pdl, stream);
    case 16:
    case 32: return launch_maybe_pdl(add_rmsnorm_kernel<D, kMaxRegisterLanes, false>, grid, block, args, args.pdl, stream);
    default: return cudaErrorInvalidValue;  // hidden > 65536: more blocks than a warp has lanes
  }
}

}  // namespace

cudaError_t launch_add_rmsnorm(const AddRmsNormArgs& args, DType dtype, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  if (dtype == DType::kBFloat16) return launch_for<DType::kBFloat16>(args, stream);
  if (dtype == DType::kFloat16) return launch_for<DType::kFloat16>(args, stream);
  return cudaErrorInvalidValue;
}

}  // namespace qr
