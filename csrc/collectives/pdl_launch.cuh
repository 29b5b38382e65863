// Kernel launch with programmatic dependent launch (PDL) on request: the kernel's launch may
// overlap the previous kernel's tail in the stream. Safe only for kernels that call
// griddepcontrol.wait (grid_dependency_wait) before they touch memory, as every kernel here does.
#pragma once
#include <cuda_runtime.h>

namespace qr {

template <class Kernel, class Args>
cudaError_t launch_maybe_pdl(Kernel kernel, dim3 grid, dim3 block, const Args& args, bool pdl, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, args);
}

}  // namespace qr
