// One-shot all-reduce for small messages: one NVLink crossing, no barrier.
//
// Every rank pushes its whole payload to every peer as LL packets (16-byte stores of 8 data bytes
// interleaved with the call's epoch twice), then reduces locally in rank order 0..W-1, polling its
// own memory until each packet carries this call's epoch. Data and flag travel in one store, so
// no separate signal or barrier is needed, and nothing is ever cleared: a stale packet carries an
// older epoch.
//
// Buffers: ll[parity][src][packet] on each rank. Double-buffered by epoch parity: a rank can be at
// most one call ahead of a peer still reading (it cannot finish call k+1 before that peer sent its
// packets of k+1, i.e. finished call k), so call k+2 may reuse call k's half.
// Epochs: one per CTA, advanced by that CTA; the grid is fixed (kOneShotBlocks) so packet p is always
// handled by the same CTA on every rank and in every call.
#pragma once
#include "algos/args.hpp"
#include "algos/common.cuh"
#include "sync/primitives.cuh"

namespace qr {

template <DType D>
__device__ __forceinline__ uint2 load_packet(const uint16_t* in, size_t p, size_t numel) {
  size_t idx = p * 4;
  if (idx + 4 <= numel) return *reinterpret_cast<const uint2*>(in + idx);
  uint16_t h[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = idx + i < numel ? in[idx + i] : uint16_t(0);
  return make_uint2(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16));
}

template <DType D>
__device__ __forceinline__ void accumulate_packet(float acc[4], uint2 v) {
  acc[0] += to_float<D>(uint16_t(v.x & 0xffffu));
  acc[1] += to_float<D>(uint16_t(v.x >> 16));
  acc[2] += to_float<D>(uint16_t(v.y & 0xffffu));
  acc[3] += to_float<D>(uint16_t(v.y >> 16));
}

template <DType D>
__global__ void __launch_bounds__(kOneShotThreads) one_shot_kernel(AllReduceArgs a) {
  grid_dependency_wait();  // with PDL: the previous kernel's writes are visible from here on
  grid_dependents_launch();
  auto* ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[a.rank] + a.layout.control);
  // No abort check here: it would put a dependent load before the first send. A broken
  // communicator's waits see the abort word within 64 polls and return.
  const uint32_t prev = ctrl->one_shot_epoch[blockIdx.x];
  const uint32_t epoch = prev >= kEpochPeriod ? 1u : prev + 1u;
  const int W = a.world_size, me = a.rank;
  const size_t P = a.layout.ll_packets;
  const size_t half = size_t(W) * P;  // packets in one parity half
  const size_t parity_base = (epoch & 1u) * half;
  const auto* in = static_cast<const uint16_t*>(a.in);
  auto* out = static_cast<uint16_t*>(a.out);
  const size_t packets = (a.numel + 3) / 4;
  const size_t stride = size_t(kOneShotBlocks) * kOneShotThreads;
  const size_t first = size_t(blockIdx.x) * kOneShotThreads + threadIdx.x;

  for (size_t p = first; p < packets; p += stride) {
    uint2 v = load_packet<D>(in, p, a.numel);
    uint4 pkt = make_uint4(v.x, epoch, v.y, epoch);
    for (int j = 1; j < W; ++j) {
      int d = me + j < W ? me + j : me + j - W;
      auto* ll = reinterpret_cast<uint4*>(a.workspaces[d] + a.layout.ll);
      st_volatile_v4(ll + parity_base + size_t(me) * P + p, pkt);
    }
  }

  WaitContext w{&ctrl->abort, a.record, a.timeout_ns, me};
  const auto* ll = reinterpret_cast<const uint4*>(a.workspaces[me] + a.layout.ll);
  bool ok = true;
  for (size_t p = first; ok && p < packets; p += stride) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int src = 0; src < W; ++src) {  // fixed order: every rank rounds the same sum
      if (src == me) {
        accumulate_packet<D>(acc, load_packet<D>(in, p, a.numel));
        continue;
      }
      const uint4* slot = ll + parity_base + size_t(src) * P + p;
      uint4 got;
      ok = spin_until(w, [&] { return ld_volatile_v4(slot); },
                      [&](uint4 x) { return x.y == epoch && x.w == epoch; }, got, src, epoch, 0);
      if (!ok) break;
      accumulate_packet<D>(acc, make_uint2(got.x, got.z));
    }
    if (!ok) break;
    size_t idx = p * 4;
    uint16_t h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = from_float<D>(acc[i]);
    if (idx + 4 <= a.numel) {
      *reinterpret_cast<uint2*>(out + idx) = make_uint2(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16));
    } else {
      for (int i = 0; i < 4; ++i)
        if (idx + i < a.numel) out[idx + i] = h[i];
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) ctrl->one_shot_epoch[blockIdx.x] = epoch;
}

}  // namespace qr
