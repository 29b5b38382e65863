// The two-shot's launch, a template over kResidual (AllReduceArgs::residual) instantiated in two
// translation units: the plain kernels in dispatch.cu, the residual-adding ones in
// dispatch_two_shot_residual.cu, so the two sets compile in parallel.
#pragma once
#include <cuda_runtime_api.h>

#include "codecs/dispatch.hpp"
#include "collectives/all_reduce/two_shot.cuh"
#include "collectives/args.hpp"
#include "collectives/pdl_launch.cuh"

namespace qr {

// CTAs of `kernel` (at `threads` a CTA) that fit at once on the current device (dispatch.cu).
int resident_blocks(const void* kernel, int threads);

// The two-shot kernel for this world size: specialised for 2, 4 and 8, generic otherwise.
template <class Codec, DType D, bool kResidual>
auto two_shot_for(int world_size, int threads) {
  switch (world_size) {
    case 2:
      return threads == kTwoShotMaxThreads ? two_shot_kernel<Codec, D, 2, kTwoShotMaxThreads, kResidual>
                                           : two_shot_kernel<Codec, D, 2, 0, kResidual>;
    case 4: return two_shot_kernel<Codec, D, 4, 0, kResidual>;
    case 8: return two_shot_kernel<Codec, D, 8, 0, kResidual>;
    default: return two_shot_kernel<Codec, D, 0, 0, kResidual>;
  }
}

// The grid never exceeds the resident CTAs (every CTA a peer waits for runs in the first wave) nor
// the tiles.
template <bool kResidual>
cudaError_t launch_two_shot_kernels(AllReduceArgs args, DType dtype, CodecId codec, cudaStream_t stream) {
  return dispatch_codec(codec, dtype, [&](auto codec_t, auto d) {
    using Codec = decltype(codec_t);
    auto kernel = two_shot_for<Codec, decltype(d)::value, kResidual>(args.world_size, args.threads);
    const size_t tile_values = size_t(args.threads) * kLaneValues * args.world_size;
    const size_t tiles = (args.numel + tile_values - 1) / tile_values;
    const int limit = resident_blocks(reinterpret_cast<const void*>(kernel), args.threads);
    if (args.blocks <= 0 || args.blocks > limit) args.blocks = limit;
    if (size_t(args.blocks) > tiles) args.blocks = int(tiles);
    return launch_maybe_pdl(kernel, dim3(args.blocks), dim3(args.threads), args, args.pdl, stream);
  });
}
extern template cudaError_t launch_two_shot_kernels<false>(AllReduceArgs, DType, CodecId, cudaStream_t);
extern template cudaError_t launch_two_shot_kernels<true>(AllReduceArgs, DType, CodecId, cudaStream_t);

}  // namespace qr
