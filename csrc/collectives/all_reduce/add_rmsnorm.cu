// The all-reduce's epilogue for a transformer layer: residual add, RMSNorm and, optionally, the
// normed row as FP8 e4m3 with a per-token or per-tensor scale, in one kernel after the all-reduce
// (chained with PDL: its launch overlaps the all-reduce's tail). Every rank holds the same summed
// bits, so every rank computes the same epilogue bits. The arithmetic (docs/codec-spec.md, "Add +
// RMSNorm epilogue") fixes every rounding point and the order of the sum of squares, so the numpy
// oracle reproduces it bit for bit: the sum of squares is a pairwise tree over 8-value lanes
// padded to a power of two, which this kernel walks as in-thread levels, then warp shuffles
// (partners 1, 2, .., 16: adjacent subtrees first), then the 8 warps in pairs.
#include <cuda_fp8.h>

#include "collectives/all_reduce/add_rmsnorm.hpp"
#include "collectives/pdl_launch.cuh"
#include "transport/lanes.cuh"
#include "transport/primitives.cuh"

namespace qr {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ float lane_square_sum(const float v[kLaneValues]) {
  float s = __fmul_rn(v[0], v[0]);
#pragma unroll
  for (int i = 1; i < kLaneValues; ++i) s = __fadd_rn(s, __fmul_rn(v[i], v[i]));
  return s;
}

// Sum (or max) over the CTA as a pairwise tree of thread values in thread order; every thread
// gets the result.
template <bool kMax>
__device__ float cta_tree(float x, float* smem) {
#pragma unroll
  for (int m = 1; m < 32; m *= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, x, m);
    x = kMax ? fmaxf(x, o) : __fadd_rn(x, o);
  }
  const int warp = threadIdx.x / 32;
  __syncthreads();  // smem reuse across calls
  if (threadIdx.x % 32 == 0) smem[warp] = x;
  __syncthreads();
  float w[kWarps];
#pragma unroll
  for (int i = 0; i < kWarps; ++i) w[i] = smem[i];
#pragma unroll
  for (int h = 1; h < kWarps; h *= 2)
#pragma unroll
    for (int i = 0; i < kWarps; i += 2 * h) w[i] = kMax ? fmaxf(w[i], w[i + h]) : __fadd_rn(w[i], w[i + h]);
  return w[0];
}

template <DType D>
__global__ void __launch_bounds__(kThreads) add_rmsnorm_kernel(AddRmsNormArgs a) {
  grid_dependency_wait();  // the all-reduce's output is complete and visible from here on
  grid_dependents_launch();
  __shared__ float smem[kWarps];
  const size_t row = blockIdx.x, H = a.hidden, lanes = H / kLaneValues;
  size_t padded = kThreads;  // lanes padded to a power of two, at least one a thread
  while (padded < lanes) padded *= 2;
  const size_t per_thread = padded / kThreads;  // a power of two: thread t holds lanes [t*k, t*k + k)
  const auto* sum = static_cast<const uint16_t*>(a.sum) + row * H;
  const auto* res = static_cast<const uint16_t*>(a.residual) + row * H;
  auto* res_out = static_cast<uint16_t*>(a.residual_out) + row * H;
  auto* out = static_cast<uint16_t*>(a.out) + row * H;
  const auto* weight = static_cast<const uint16_t*>(a.weight);

  // Pass 1: r = to_T(sum + residual), stored; the thread's lane sums of r^2 reduced as a tree.
  float partial[32];  // per_thread <= 32 for hidden <= 65536 (checked by the host)
  for (size_t j = 0; j < per_thread; ++j) {
    const size_t lane = threadIdx.x * per_thread + j;
    partial[j] = 0.0f;
    if (lane < lanes) {
      float s[kLaneValues], r[kLaneValues];
      load_lane<D>(sum + lane * kLaneValues, kLaneValues, s);
      load_lane<D>(res + lane * kLaneValues, kLaneValues, r);
#pragma unroll
      for (int i = 0; i < kLaneValues; ++i) r[i] = to_float<D>(from_float<D>(__fadd_rn(s[i], r[i])));
      store_lane<D>(res_out + lane * kLaneValues, kLaneValues, r);
      partial[j] = lane_square_sum(r);
    }
  }
  for (size_t h = 1; h < per_thread; h *= 2)
    for (size_t j = 0; j < per_thread; j += 2 * h) partial[j] = __fadd_rn(partial[j], partial[j + h]);
  const float squares = cta_tree<false>(partial[0], smem);
  const float inv_rms = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(squares, float(H)), a.eps)));

  // Pass 2: y = to_T(to_T(r * inv_rms) * w) (HF / vLLM's rounding), from the r this thread stored
  // (each thread reads back only its own lanes, so no barrier is needed).
  float amax = 0.0f;
  for (size_t j = 0; j < per_thread; ++j) {
    const size_t lane = threadIdx.x * per_thread + j;
    if (lane >= lanes) break;
    float r[kLaneValues], w[kLaneValues];
    load_lane<D>(res_out + lane * kLaneValues, kLaneValues, r);
    load_lane<D>(weight + lane * kLaneValues, kLaneValues, w);
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) {
      r[i] = to_float<D>(from_float<D>(__fmul_rn(to_float<D>(from_float<D>(__fmul_rn(r[i], inv_rms))), w[i])));
      amax = fmaxf(amax, fabsf(r[i]));
    }
    store_lane<D>(out + lane * kLaneValues, kLaneValues, r);
  }
  if (a.fp8_mode == Fp8Out::kNone) return;

  // FP8 e4m3 of the normed row: scale = amax / 448 per token (1 for an all-zero row), or the
  // caller's per-tensor scale; code = e4m3_satfinite(y * (1 / scale)).
  float scale;
  if (a.fp8_mode == Fp8Out::kPerToken) {
    const float m = cta_tree<true>(amax, smem);
    scale = m > 0.0f ? __fdiv_rn(m, kE4m3Max) : 1.0f;
    if (threadIdx.x == 0) a.fp8_scales[row] = scale;
  } else {
    scale = a.fp8_scales[0];
  }
  const float inv_scale = __fdiv_rn(1.0f, scale);
  for (size_t j = 0; j < per_thread; ++j) {
    const size_t lane = threadIdx.x * per_thread + j;
    if (lane >= lanes) break;
    float y[kLaneValues];
    load_lane<D>(out + lane * kLaneValues, kLaneValues, y);
    uint32_t codes[4];  // cvt.rn.satfinite.e4m3x2: RNE, saturating at 448, as the fp8 codec
#pragma unroll
    for (int i = 0; i < 4; ++i)
      codes[i] = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(y[2 * i], inv_scale), __fmul_rn(y[2 * i + 1], inv_scale)),
                                          __NV_SATFINITE, __NV_E4M3);
    *reinterpret_cast<uint2*>(a.fp8 + row * H + lane * kLaneValues) =
        make_uint2(codes[0] | codes[1] << 16, codes[2] | codes[3] << 16);
  }
}

}  // namespace

cudaError_t launch_add_rmsnorm(const AddRmsNormArgs& args, DType dtype, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  const dim3 grid(unsigned(args.rows)), block(kThreads);
  if (dtype == DType::kBFloat16)
    return launch_maybe_pdl(add_rmsnorm_kernel<DType::kBFloat16>, grid, block, args, args.pdl, stream);
  if (dtype == DType::kFloat16)
    return launch_maybe_pdl(add_rmsnorm_kernel<DType::kFloat16>, grid, block, args, args.pdl, stream);
  return cudaErrorInvalidValue;
}

}  // namespace qr
