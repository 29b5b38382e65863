// Memory-ordering primitives and the one bounded spin loop of the code base.
// Rule: write to peers, spin on local memory (a remote poll would cross NVLink every iteration).
#pragma once
#include <cstdint>

#include "transport/error_record.hpp"

namespace qr {

__device__ __forceinline__ void st_release_sys(uint32_t* addr, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* addr) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t* addr, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* addr) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}
// Release to several peers: one fence, then a relaxed store to each. st.release per store puts a
// system fence before every store, and each fence waits for the previous peer's store to be
// acknowledged over NVLink: W - 1 round trips in a row where this pays one (PTX: a fence.acq_rel
// followed by a strong store is a release pattern).
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void st_relaxed_sys(uint32_t* addr, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(uint64_t* addr, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
}
__device__ __forceinline__ void st_volatile_u64(uint64_t* addr, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t ld_volatile_u64(const uint64_t* addr) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}

// 16-byte vector store/load of the one-shot (arrival is read per 16-bit half, so no wider
// atomicity is needed).
__device__ __forceinline__ void st_volatile_v4(uint4* addr, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 ld_volatile_v4(const uint4* addr) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(addr)
               : "memory");
  return v;
}
// L2 loads (peer-written data) the compiler keeps in program order and never sinks into a branch.
__device__ __forceinline__ uint32_t ld_cg_u32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ld_cg_u8(const uint8_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u8 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_cg_u64(const uint64_t* p) {
  uint2 v;
  asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Programmatic dependent launch (sm_90): wait until the preceding kernel's memory is visible
// (a no-op without PDL), and let the next kernel start its launch early.
__device__ __forceinline__ void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependents_launch() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Where a timed-out wait reports, and the deadline it obeys.
struct WaitContext {
  uint32_t* abort;      // device word in this rank's control block
  ErrorRecord* record;  // host-mapped
  uint64_t timeout_ns;
  int rank;
};

// Called once by the first waiter to give up; later ones only see abort set.
__device__ __forceinline__ void report_error(const WaitContext& w, ErrorCode code, int peer, uint32_t expected,
                                             uint32_t seen, uint32_t phase) {
  if (atomicCAS(w.abort, 0u, 1u) == 0u) {
    volatile ErrorRecord* r = w.record;
    r->rank = w.rank;
    r->peer = peer;
    r->block = blockIdx.x;
    r->expected = expected;
    r->seen = seen;
    r->phase = phase;
    __threadfence_system();
    r->code = uint32_t(code);
    __threadfence_system();
  }
}

// The word a timeout reports as "seen": a flag's epoch half, a packet's first word.
__device__ __forceinline__ uint32_t seen_word(uint64_t flag) { return uint32_t(flag); }
__device__ __forceinline__ uint32_t seen_word(uint4 packet) { return packet.x; }

// Spin until ready(value) holds for value = load(), or the deadline passes, or another wait on
// this rank already gave up. Returns false on failure (after reporting it).
template <class V, class Load, class Ready>
__device__ __forceinline__ bool spin_until(const WaitContext& w, Load load, Ready ready, V& v, int peer,
                                           uint32_t expected, uint32_t phase) {
  v = load();
  if (ready(v)) return true;
  uint64_t start = global_timer_ns();
  for (uint32_t i = 1;; ++i) {
    v = load();
    if (ready(v)) return true;
    if ((i & 63u) == 0u) {
      if (*reinterpret_cast<volatile uint32_t*>(w.abort)) return false;
      if (global_timer_ns() - start > w.timeout_ns) {
        report_error(w, ErrorCode::kTimeout, peer, expected, seen_word(v), phase);
        return false;
      }
    }
  }
}

}  // namespace qr
