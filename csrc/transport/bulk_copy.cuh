// Bulk copies shared -> global memory (a peer's, over NVLink, included) by the SM's bulk-copy
// (TMA) unit, sm_90+. The issuing thread hands over an address and a size and moves on: the warps
// never stall on a busy link, and a whole slice crosses as one contiguous write.
//
// Protocol for one thread that stages data written by the whole CTA:
//   every writer: fence_proxy_async_shared(); then a CTA barrier; then the issuer: bulk_store(...)
//   and bulk_commit() (one group per staged buffer); bulk_wait_read<N>() before a buffer is
//   reused; release_bulk_copies_sys() before the flags that tell peers the data is there.
#pragma once
#include <cstdint>

#include "transport/primitives.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "quickreduce's two-shot needs sm_90 or newer (bulk copies)"
#endif

namespace qr {

__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem),
               "r"(static_cast<uint32_t>(__cvta_generic_to_shared(smem))), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// At most N of this thread's groups may still be reading their shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Every group issued by this thread has written its destination.
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Generic-proxy writes to shared memory become visible to the bulk copies issued after the barrier.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Bulk-copy writes are ordered before this thread's later (generic) flag stores.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
// Before the flags that tell peers this thread's copies landed: the copies written, their writes ordered
// before the generic proxy's, then one system fence for every flag (each flag then a st_relaxed_sys).
__device__ __forceinline__ void release_bulk_copies_sys() {
  bulk_wait_all();
  fence_proxy_async_global();
  fence_acq_rel_sys();
}

}  // namespace qr
