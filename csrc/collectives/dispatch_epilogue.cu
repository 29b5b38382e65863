// Instantiates and launches the all-reduces with the add + RMSNorm epilogue inside: the one-shot
// (a thread-block cluster a row) and the two-shot (each tile's rows in its gather), for every
// (dtype, codec) the two-shot takes. Its own translation unit: the fused two-shot doubles the
// two-shot's instantiations, and two files build side by side.
#include <algorithm>
#include <vector>

#include "collectives/launch.hpp"
#include "collectives/pdl_launch.cuh"
#include "collectives/all_reduce/one_shot.cuh"
#include "collectives/all_reduce/two_shot.cuh"
#include "codecs/dispatch.hpp"

namespace qr {

namespace {
// Clusters of 9-16 CTAs are H100's non-portable size: the attribute that allows them is set per
// kernel and per device (it applies to the device current when it is set), once for each pair.
cudaError_t allow_nonportable_clusters(const void* kernel) {
  struct Entry {
    const void* kernel;
    int device;
  };
  static thread_local std::vector<Entry> allowed;
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  for (const Entry& e : allowed)
    if (e.kernel == kernel && e.device == device) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e == cudaSuccess) allowed.push_back({kernel, device});
  return e;
}
}  // namespace

cudaError_t fused_one_shot_resident_ctas(int* resident) {
  int device = 0, sms = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
  *resident = 0;
  for (const void* kernel : {reinterpret_cast<const void*>(one_shot_add_rmsnorm_kernel<DType::kBFloat16>),
                             reinterpret_cast<const void*>(one_shot_add_rmsnorm_kernel<DType::kFloat16>)}) {
    int per_sm = 0;
    if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, kernel, kOneShotThreads + kOneShotControlThreads, 0); e != cudaSuccess)
      return e;
    *resident = *resident == 0 ? sms * per_sm : std::min(*resident, sms * per_sm);
  }
  return cudaSuccess;
}

cudaError_t launch_one_shot_add_rmsnorm(const AllReduceArgs& args, const RowEpilogueArgs& epilogue, DType dtype,
                                        cudaStream_t stream) {
  return dispatch_dtype(dtype, [&](auto d) {  // fp16 and bf16 (dispatch_dtype throws for others)
    auto* kernel = one_shot_add_rmsnorm_kernel<decltype(d)::value>;
    const unsigned ctas = epilogue.hidden / kFusedRowValues;  // a cluster a row
    if (const cudaError_t e = allow_nonportable_clusters(reinterpret_cast<const void*>(kernel)); e != cudaSuccess)
      return e;
    return launch_maybe_pdl_clustered(kernel, dim3(unsigned(args.numel / kFusedRowValues)),
                                      dim3(kOneShotThreads + kOneShotControlThreads), ctas, args.pdl, stream, args,
                                      epilogue);
  });
}


namespace {
// The fused two-shot for this world size: specialised for 2, 4 and 8, generic otherwise (no
// specialisation by CTA size, which the plain kernel has at 512 threads on 2 GPUs).
template <class Codec, DType D>
auto two_shot_add_rmsnorm_for(int world_size) {
  switch (world_size) {
    case 2: return two_shot_add_rmsnorm_kernel<Codec, D, 2>;
    case 4: return two_shot_add_rmsnorm_kernel<Codec, D, 4>;
    case 8: return two_shot_add_rmsnorm_kernel<Codec, D, 8>;
    default: return two_shot_add_rmsnorm_kernel<Codec, D, 0>;
  }
}
}  // namespace

cudaError_t launch_two_shot_add_rmsnorm(AllReduceArgs args, const RowEpilogueArgs& epilogue, DType dtype,
                                        CodecId codec, cudaStream_t stream) {
  return dispatch_codec(codec, dtype, [&](auto codec_t, auto d) {
    auto kernel = two_shot_add_rmsnorm_for<decltype(codec_t), decltype(d)::value>(args.world_size);
    const size_t tile_values = size_t(args.threads) * kLaneValues * args.world_size;
    const size_t tiles = (args.numel + tile_values - 1) / tile_values;
    const int limit = resident_blocks(reinterpret_cast<const void*>(kernel), args.threads);
    args.blocks = int(std::clamp(tiles, size_t(1), size_t(limit)));  // as launch_two_shot's
    return launch_maybe_pdl_clustered(kernel, dim3(args.blocks), dim3(args.threads), 0, args.pdl, stream, args,
                                      epilogue);
  });
}

}  // namespace qr
