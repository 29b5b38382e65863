// Compilation switches shared by the host (g++) and device (nvcc) builds.
#pragma once

#if defined(__CUDACC__)
#define QR_HD __host__ __device__ __forceinline__
#define QR_DEVICE __device__ __forceinline__
#else
#define QR_HD inline
#define QR_DEVICE inline
#endif

// True while nvcc compiles device code: selects hardware conversions over their
// bit-identical software twins.
#if defined(__CUDA_ARCH__)
#define QR_DEVICE_COMPILE 1
#else
#define QR_DEVICE_COMPILE 0
#endif
