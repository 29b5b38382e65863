// Kernel launch with programmatic dependent launch (PDL) on request: the kernel's launch may
// overlap the previous kernel's tail in the stream. Safe only for kernels that call
// griddepcontrol.wait (grid_dependency_wait) before they touch memory, as every kernel here does.
#pragma once
#include <cuda_runtime.h>

namespace qr {

// cluster > 0: thread-block clusters of that many CTAs along x (the grid a multiple of it).
template <class Kernel, class... Args>
cudaError_t launch_maybe_pdl_clustered(Kernel kernel, dim3 grid, dim3 block, unsigned cluster, bool pdl,
                                       cudaStream_t stream, const Args&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n++].val.clusterDim = {cluster, 1, 1};
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <class Kernel, class Args>
cudaError_t launch_maybe_pdl(Kernel kernel, dim3 grid, dim3 block, const Args& args, bool pdl, cudaStream_t stream) {
  return launch_maybe_pdl_clustered(kernel, grid, block, 0, pdl, stream, args);
}

}  // namespace qr
