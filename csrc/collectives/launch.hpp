// Host-side launchers (implemented in dispatch.cu); they enqueue on the caller's stream and return
// the launch status. Contracts:
//  - one-shot: passthrough only, numel * 2 <= min(max_size, one_shot_max_bytes(world_size)).
//  - two-shot: any codec, numel * 2 <= max_size.
//  - exchange: any codec, the larger of input and output <= max_size bytes.
// Both need every rank to make the same call (size, dtype, codec, algorithm) in the same order.
#pragma once
#include <cuda_runtime_api.h>

#include "collectives/args.hpp"
#include "codecs/codec_list.hpp"

namespace qr {

cudaError_t launch_one_shot(const AllReduceArgs& args, DType dtype, cudaStream_t stream);
// The one-shot with the add + RMSNorm epilogue fused in (16-bit dtypes; the caller checked the
// shape: hidden a multiple of kFusedRowValues up to kFusedMaxClusterCtas of them, one vector a thread).
cudaError_t launch_one_shot_add_rmsnorm(const AllReduceArgs& args, const RowEpilogueArgs& epilogue, DType dtype,
                                        cudaStream_t stream);
// CTAs of that kernel resident at once on the current device (both dtypes'): a fused call takes at
// most that many (a rank's CTA waits for its peers' same CTA, so every CTA must run in the first
// wave). Blocks per SM, not clusters: kFusedOneShotMaxBytes (128 CTAs) keeps it far from binding.
cudaError_t fused_one_shot_resident_ctas(int* resident);
cudaError_t launch_fill_u32(uint32_t* ptr, size_t count, uint32_t value, cudaStream_t stream);
cudaError_t launch_two_shot(AllReduceArgs args, DType dtype, CodecId codec, cudaStream_t stream);
// Segment collectives (exchange.cuh): any codec, dtypes fp16/bf16/fp32; threads in {128, 256, 512}.
cudaError_t launch_exchange(const ExchangeArgs& args, DType dtype, CodecId codec, int threads, cudaStream_t stream);
// The dynamic all-to-all (all_to_all_dynamic.cu): sizes_cross set, the dyn_* fields filled.
cudaError_t launch_exchange_dynamic(const ExchangeArgs& args, DType dtype, CodecId codec, int threads,
                                    cudaStream_t stream);
// Small even segments, passthrough (packets.cuh): even_count * dtype bytes <= layout.packet_vectors * 16.
cudaError_t launch_exchange_packets(const ExchangeArgs& args, DType dtype, cudaStream_t stream);
// Small even segments, a scaled codec (coded_packets.cuh): WorkspaceLayout::coded_packet_path_fits holds.
cudaError_t launch_exchange_coded_packets(const ExchangeArgs& args, DType dtype, CodecId codec, cudaStream_t stream);

}  // namespace qr
