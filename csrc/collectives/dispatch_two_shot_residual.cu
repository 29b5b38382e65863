// The two-shot kernels that add the epilogue's residual at their stores (two_shot_launch.cuh).
#include "collectives/two_shot_launch.cuh"

namespace qr {
template cudaError_t launch_two_shot_kernels<true>(AllReduceArgs, DType, CodecId, cudaStream_t);
}  // namespace qr
