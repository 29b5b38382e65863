// Bulk one-shot all-reduce for mid-size messages on 2 GPUs: one NVLink crossing, no flag, no
// handshake, and every chunk sent by the SM's bulk-copy unit.
//
// On 2 GPUs a one-shot moves the same bytes as a two-shot (each rank sends the whole message
// once instead of half of it twice) but has no second phase waiting on the first. Each CTA stages
// chunks of its input (512 vectors of 16 bytes, -0.0 made +0.0) in shared memory and pushes each
// with one bulk copy into the peer's receive buffer, then sums its chunks in rank order, polling
// its own memory until each vector has arrived (the lamport sentinel of one_shot.cuh: an empty
// vector holds -0.0 in every half). Thread 0 checks the peer's call signature with its first poll.
// Buffers: bulk[2][W - 1 peers][vector]. A call uses buffer epoch & 1, and every vector is emptied
// again right after it is read: the peer next writes that buffer two calls later, which it can
// only start once this rank has finished this call, so two buffers suffice and no pass over the
// previous buffer is needed. One epoch per call (all CTAs), advanced by the last CTA to finish.
// The grid never exceeds what is resident, so every CTA a peer waits for runs.
#pragma once
#include "algos/one_shot.cuh"
#include "sync/bulk_copy.cuh"

namespace qr {

constexpr int kBulkThreads = 512;   // vectors per chunk: one bulk copy of 8 KB
constexpr int kBulkStageSlots = 4;  // chunks in flight per CTA through the bulk-copy unit

template <DType D>
__global__ void __launch_bounds__(kBulkThreads, 4) one_shot_bulk_kernel(AllReduceArgs a) {
  grid_dependency_wait();
  grid_dependents_launch();
  auto* ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[a.rank] + a.layout.control);
  __shared__ alignas(128) uint4 s_stage[kBulkStageSlots][kBulkThreads];
  __shared__ uint32_t s_epoch;
  __shared__ int s_failed;
  if (threadIdx.x == 0) {
    s_failed = *reinterpret_cast<volatile uint32_t*>(&ctrl->abort) != 0;
    const uint32_t prev = ctrl->bulk_epoch;
    s_epoch = prev >= kEpochPeriod ? 1u : prev + 1u;
  }
  __syncthreads();
  if (s_failed) return;
  const uint32_t epoch = s_epoch;
  const int W = a.world_size, me = a.rank, lane = threadIdx.x;
  const auto* in = static_cast<const uint16_t*>(a.in);
  auto* out = static_cast<uint16_t*>(a.out);
  const size_t vectors = (a.numel + kLaneValues - 1) / kLaneValues;
  const size_t chunks = (vectors + kBulkThreads - 1) / kBulkThreads;
  const size_t V = a.layout.bulk_vectors;
  // Where `src`'s data lands on rank `dst`: row (src - dst - 1) mod W of buffer epoch & 1.
  auto row = [&](int src, int dst) {
    const int r = src - dst - 1;
    return (size_t(epoch & 1u) * (W - 1) + size_t(r < 0 ? r + W : r)) * V;
  };
  if (threadIdx.x == 0)  // this call's signature to the same CTA on every peer
    for (int j = 1; j < W; ++j) {
      const int d = me + j < W ? me + j : me + j - W;
      auto* peer_ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[d] + a.layout.control);
      st_volatile_u64(&peer_ctrl->bulk_signature[blockIdx.x][me], flag_word(epoch, a.signature));
    }

  int slot = 0;
  for (size_t c = blockIdx.x; c < chunks; c += gridDim.x) {  // 1. push my chunks
    const size_t p = c * kBulkThreads + lane;
    s_stage[slot][lane] = p < vectors ? load_vector(in, p, a.numel) : make_uint4(0, 0, 0, 0);
    fence_proxy_async_shared();
    if (lane == 0) bulk_wait_read<kBulkStageSlots - 2>();  // frees the slot the next chunk uses
    __syncthreads();
    if (lane == 0) {
      const size_t n = min(size_t(kBulkThreads), vectors - c * kBulkThreads);
      for (int j = 1; j < W; ++j) {
        const int d = me + j < W ? me + j : me + j - W;
        auto* dst = reinterpret_cast<uint4*>(a.workspaces[d] + a.layout.bulk) + row(me, d) + c * kBulkThreads;
        bulk_store(dst, s_stage[slot], uint32_t(n * 16));
      }
      bulk_commit();
    }
    slot = slot + 1 == kBulkStageSlots ? 0 : slot + 1;
  }

  WaitContext w{&ctrl->abort, a.record, a.timeout_ns, me};
  auto* local = reinterpret_cast<uint4*>(a.workspaces[me] + a.layout.bulk);
  const uint4 empty = make_uint4(kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty);
  bool ok = true;
  bool check_signature = threadIdx.x == 0;
  for (size_t c = blockIdx.x; ok && c < chunks; c += gridDim.x) {  // 2. sum in rank order
    const size_t p = c * kBulkThreads + lane;
    if (p >= vectors) continue;
    float acc[kLaneValues] = {};
    for (int src = 0; src < W; ++src) {
      uint4 v;
      if (src == me) {
        v = load_vector(in, p, a.numel);
      } else {
        uint4* at = local + row(src, me) + p;
        if (check_signature) {  // the signature travels with the first poll (one_shot.cuh)
          const uint64_t* sig = &ctrl->bulk_signature[blockIdx.x][src];
          PacketAndFlag got;
          ok = spin_until(w, [&] { return PacketAndFlag{ld_volatile_v4(at), ld_volatile_u64(sig)}; },
                          [&](const PacketAndFlag& x) { return vector_arrived(x.packet) && uint32_t(x.flag) == epoch; },
                          got, src, epoch, 0);
          if (ok && uint32_t(got.flag >> 32) != a.signature) {
            report_error(w, ErrorCode::kMismatch, src, a.signature, uint32_t(got.flag >> 32), 0);
            ok = false;
          }
          v = got.packet;
        } else {
          ok = spin_until(w, [&] { return ld_volatile_v4(at); }, [](const uint4& x) { return vector_arrived(x); }, v,
                          src, epoch, 0);
        }
        if (!ok) break;
        *at = empty;  // read: empty again for this buffer's next use, two calls on
      }
      accumulate_vector<D>(acc, v);
    }
    check_signature = false;
    if (ok) store_lane<D>(out + p * kLaneValues, ptrdiff_t(a.numel - p * kLaneValues), acc);
  }

  if (lane == 0) bulk_wait_all();  // shared memory stays valid until the copies have read it
  __syncthreads();
  if (threadIdx.x == 0) {  // the last CTA to finish advances the epoch: every CTA has read it
    __threadfence();
    if (atomicAdd(&ctrl->bulk_done, 1u) == gridDim.x - 1) {
      ctrl->bulk_done = 0;
      ctrl->bulk_epoch = epoch;
    }
  }
}

}  // namespace qr
