// Instantiates the kernels for every (dtype, codec) in the registry and launches them.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "collectives/launch.hpp"
#include "collectives/pdl_launch.cuh"
#include "collectives/all_reduce/one_shot.cuh"
#include "collectives/two_shot_launch.cuh"
#include "collectives/exchange/exchange.cuh"
#include "collectives/exchange/coded_packets.cuh"
#include "collectives/exchange/packets.cuh"
#include "codecs/dispatch.hpp"

namespace qr {
namespace {

// Every kernel calls griddepcontrol.wait before touching memory, so the PDL attribute is safe on
// all of them; it only lets the launch overlap the previous kernel's tail.
template <class Kernel, class Args>
cudaError_t launch(Kernel kernel, int blocks, int threads, const Args& args, cudaStream_t stream) {
  return launch_maybe_pdl(kernel, dim3(blocks), dim3(threads), args, args.pdl, stream);
}

}  // namespace

__global__ void fill_u32_kernel(uint32_t* ptr, size_t count, uint32_t value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    ptr[i] = value;
}

cudaError_t launch_fill_u32(uint32_t* ptr, size_t count, uint32_t value, cudaStream_t stream) {
  fill_u32_kernel<<<264, 512, 0, stream>>>(ptr, count, value);
  return cudaGetLastError();
}

cudaError_t launch_one_shot(const AllReduceArgs& args, DType dtype, cudaStream_t stream) {
  return dispatch_dtype(dtype, [&](auto d) {
    const size_t vectors = (args.numel + kLaneValues - 1) / kLaneValues;
    const size_t owners = (vectors + kOneShotThreads - 1) / kOneShotThreads;  // CTAs that own vectors
    const int blocks = int(std::clamp(owners, size_t(1), size_t(kOneShotBlocks)));
    return launch(one_shot_kernel<decltype(d)::value>, blocks, kOneShotThreads + kOneShotControlThreads, args, stream);
  });
}

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

namespace {
// The current device's SMs and how many CTAs of `kernel` (at `threads` a CTA) fit on one at once:
// what resident_blocks and fused_one_shot_resident_ctas size their grids by (each with its own
// policy for a failed query).
cudaError_t occupancy(const void* kernel, int threads, int* sms, int* per_sm) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (const cudaError_t e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kernel, threads, 0);
}
}  // namespace

cudaError_t fused_one_shot_resident_ctas(int* resident) {
  *resident = 0;
  for (const void* kernel : {reinterpret_cast<const void*>(one_shot_add_rmsnorm_kernel<DType::kBFloat16>),
                             reinterpret_cast<const void*>(one_shot_add_rmsnorm_kernel<DType::kFloat16>)}) {
    int sms = 0, per_sm = 0;
    if (const cudaError_t e = occupancy(kernel, kOneShotThreads + kOneShotControlThreads, &sms, &per_sm); e != cudaSuccess)
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

// CTAs that fit at once on the whole device for this kernel and CTA size: the two-shot grid never
// exceeds it, so every CTA a peer waits for is resident. Cached per (kernel, CTA size): the
// occupancy query is slow, and one cache for all kernels once gave codec kernels the grid of
// whichever kernel ran first. Keyed by device too: a process
// may drive GPUs of different kinds.
int resident_blocks(const void* kernel, int threads) {
  struct Entry {
    const void* kernel;
    int device, threads, blocks;
  };
  static thread_local std::vector<Entry> cache;
  int device = 0, sms = 0, per_sm = 0;
  cudaGetDevice(&device);
  for (const Entry& e : cache)
    if (e.kernel == kernel && e.device == device && e.threads == threads) return e.blocks;
  occupancy(kernel, threads, &sms, &per_sm);  // a failed query: one CTA an SM
  cache.push_back({kernel, device, threads, sms * (per_sm > 0 ? per_sm : 1)});
  return cache.back().blocks;
}

// The grid of an exchange whose sizes cross: two CTAs an SM, the same for either CTA size (ranks may
// launch it with different ones), so CTA c of every rank takes the same share. A 512-thread CTA whose
// two an SM do not fit runs at 256 threads.
int crossing_blocks(const void* kernel, int* threads) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int blocks = std::max(1, std::min({resident_blocks(kernel, kCrossingLanes), 2 * sms, kExchangeMaxBlocks}));
  if (*threads != kCrossingLanes && resident_blocks(kernel, *threads) < blocks) *threads = kCrossingLanes;
  return blocks;
}

cudaError_t launch_exchange(const ExchangeArgs& args, DType dtype, CodecId codec, int threads, cudaStream_t stream) {
  return dispatch_codec_any_dtype(codec, dtype, [&](auto codec_t, auto d) {
    // The lossless packing is the all-reduce's; here its values travel as the passthrough's (the same bits).
    using Codec = std::conditional_t<std::is_same_v<decltype(codec_t), LosslessCodec>, PassthroughCodec, decltype(codec_t)>;
    auto kernel = exchange_kernel<Codec, decltype(d)::value>;
    const int limit = std::min(resident_blocks(reinterpret_cast<const void*>(kernel), threads), kExchangeMaxBlocks);
    int blocks = limit;
    if (!args.sizes_cross) {  // the plan is known here: no more CTAs than slices
      const size_t slices = (size_t(args.even_count) + size_t(threads) * kLaneValues - 1) / (size_t(threads) * kLaneValues);
      blocks = int(std::clamp(slices, size_t(1), size_t(limit)));
    } else {  // the sizes are known only in the kernel: a grid every rank computes alike
      blocks = crossing_blocks(reinterpret_cast<const void*>(kernel), &threads);
    }
    return launch(kernel, blocks, threads, args, stream);
  });
}

// A packet call's grid: the CTAs that own its wire vectors (vector q belongs to CTA (q / kPacketThreads) %
// kPacketBlocks on either packet path).
static int packet_blocks(size_t vectors) {
  const size_t owners = (vectors + kPacketThreads - 1) / kPacketThreads;
  return int(std::clamp(owners, size_t(1), size_t(kPacketBlocks)));
}

cudaError_t launch_exchange_packets(const ExchangeArgs& args, DType dtype, cudaStream_t stream) {
  return dispatch_codec_any_dtype(CodecId::kPassthrough, dtype, [&](auto, auto d) {
    constexpr DType T = decltype(d)::value;
    const size_t vectors = (size_t(args.even_count) + kPacketValues<T> - 1) / kPacketValues<T>;
    return launch(exchange_packets_kernel<T>, packet_blocks(vectors), kPacketThreads + kPacketControlThreads, args, stream);
  });
}

cudaError_t launch_exchange_coded_packets(const ExchangeArgs& args, DType dtype, CodecId codec, cudaStream_t stream) {
  return dispatch_codec_any_dtype(codec, dtype, [&](auto codec_t, auto d) -> cudaError_t {
    using Codec = decltype(codec_t);
    constexpr DType T = decltype(d)::value;
    if constexpr (!Codec::kScaled) {
      return cudaErrorInvalidValue;  // exact codecs take exchange_packets_kernel
    } else {
      const size_t vectors = coded_packet_vectors(args.even_count, kLaneCodeBits<Codec>);
      return launch(exchange_coded_packets_kernel<Codec, T>, packet_blocks(vectors), kPacketThreads + kPacketControlThreads,
                    args, stream);
    }
  });
}

template cudaError_t launch_two_shot_kernels<false>(AllReduceArgs, DType, CodecId, cudaStream_t);

cudaError_t launch_two_shot(AllReduceArgs args, DType dtype, CodecId codec, cudaStream_t stream) {
  return args.residual != nullptr ? launch_two_shot_kernels<true>(args, dtype, codec, stream)
                                  : launch_two_shot_kernels<false>(args, dtype, codec, stream);
}

}  // namespace qr
