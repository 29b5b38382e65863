// The dynamic all-to-all's kernels (exchange_kernel<Codec, T, true>: split sizes read on the device,
// exchange/dynamic_plan.hpp), in their own translation unit so they compile beside dispatch.cu.
#include <algorithm>
#include <type_traits>

#include "codecs/dispatch.hpp"
#include "collectives/exchange/exchange.cuh"
#include "collectives/launch.hpp"
#include "collectives/pdl_launch.cuh"

namespace qr {

int crossing_blocks(const void* kernel, int* threads);  // dispatch.cu

cudaError_t launch_exchange_dynamic(const ExchangeArgs& args, DType dtype, CodecId codec, int threads,
                                    cudaStream_t stream) {
  return dispatch_codec_any_dtype(codec, dtype, [&](auto codec_t, auto d) {
    // As launch_exchange: the lossless codec's values travel as the passthrough's (the same bits).
    using Codec = std::conditional_t<std::is_same_v<decltype(codec_t), LosslessCodec>, PassthroughCodec, decltype(codec_t)>;
    auto kernel = exchange_kernel<Codec, decltype(d)::value, true>;
    // The sizes are known only in the kernel: a grid every rank computes alike (launch_exchange's
    // rule for uneven all-to-alls).
    int cta_threads = threads;
    const int blocks = crossing_blocks(reinterpret_cast<const void*>(kernel), &cta_threads);
    return launch_maybe_pdl(kernel, dim3(blocks), dim3(cta_threads), args, args.pdl, stream);
  });
}

}  // namespace qr
