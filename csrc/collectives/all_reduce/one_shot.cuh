// One-shot all-reduce for small messages: one NVLink crossing, no barrier, no flag.
//
// Every rank pushes its whole tensor into every peer's buffer with 16-byte stores and sums in rank
// order 0..W-1, polling its own memory until each 16-byte vector has arrived; in calls of
// kOneShotEmptyOnReadBytes or more a thread sums each vector right after pushing the next one.
// "Arrived" is read off the data itself (the Lamport scheme TensorRT-LLM uses): an empty buffer
// holds -0.0 (0x8000) in every 16-bit half, and senders turn a real -0.0 into +0.0, so a vector
// with no sentinel half is complete. (Only the sign of a zero result can differ from the plain sum.)
//
// Buffers: lamport[3][src][vector] on each rank; call epoch e uses buffer e % 3. A small call
// clears the one its previous call used, (e - 1) % 3, while its own data is in flight; a call
// of kOneShotEmptyOnReadBytes or more empties each slot right after reading it instead (a
// separate clearing pass of the whole previous buffer cost ~1 us at 6-8 MB on 2x H200).
// Both are safe because a rank is at most one call ahead of a peer (it cannot finish call
// k+1 before that peer sent its data of k+1, i.e. finished call k): the earliest write into a
// buffer after it is emptied comes two calls later (three after the call that used it).
// Mismatch: a control warp in each CTA sends {epoch, call signature} beside the data and checks
// the peers' while the data threads work (a mismatch aborts; that call's output is unspecified).
// Epochs: one per CTA, advanced by that CTA when it runs; vector p is always handled by the same
// CTA on every rank and in every call (fixed stride), and a call launches only the CTAs that own
// vectors, the same ones on every rank, so each CTA's epochs stay in step across ranks.
// No barrier and no data thread waits for anything but data: every extra round trip on the way
// to the sum showed in the time (2x H200).
#pragma once
#include <cooperative_groups.h>

#include "collectives/all_reduce/rmsnorm_row.cuh"
#include "collectives/args.hpp"
#include "transport/lanes.cuh"
#include "transport/primitives.cuh"

namespace qr {

// 8 values of the input (zeros past the end), with -0.0 made +0.0 so no half is the sentinel.
__device__ __forceinline__ uint4 load_vector(const uint16_t* in, size_t p, size_t numel) {
  size_t idx = p * kLaneValues;
  uint4 v;
  if (idx + kLaneValues <= numel) {
    v = *reinterpret_cast<const uint4*>(in + idx);
  } else {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t lo = idx + 2 * i < numel ? in[idx + 2 * i] : 0u;
      uint32_t hi = idx + 2 * i + 1 < numel ? in[idx + 2 * i + 1] : 0u;
      w[i] = lo | (hi << 16);
    }
    v = make_uint4(w[0], w[1], w[2], w[3]);
  }
  auto clean = [](uint32_t w) {
    if ((w & 0xffffu) == kLamportEmptyHalf) w &= 0xffff0000u;
    if ((w >> 16) == kLamportEmptyHalf) w &= 0x0000ffffu;
    return w;
  };
  return make_uint4(clean(v.x), clean(v.y), clean(v.z), clean(v.w));
}

__device__ __forceinline__ bool has_sentinel(uint32_t w) {
  return (w & 0xffffu) == kLamportEmptyHalf || (w >> 16) == kLamportEmptyHalf;
}
__device__ __forceinline__ bool vector_arrived(const uint4& v) {
  return !(has_sentinel(v.x) || has_sentinel(v.y) || has_sentinel(v.z) || has_sentinel(v.w));
}

template <DType D>
__device__ __forceinline__ void accumulate_vector(float acc[kLaneValues], const uint4& v) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[2 * i] += to_float<D>(uint16_t(w[i] & 0xffffu));
    acc[2 * i + 1] += to_float<D>(uint16_t(w[i] >> 16));
  }
}

// The fused epilogue's row statistics. A row is a thread-block cluster of hidden / 1024 CTAs; each
// CTA's 128 lanes are an aligned subtree of the row's pairwise sum-of-squares tree (warp shuffles,
// then the 4 warps in pairs), each CTA sends its sum to every other CTA of the cluster with
// st.async, which completes bytes on the receiving CTA's mbarrier, and each CTA finishes the tree's
// top levels itself (the same bits in every CTA, as the epilogue kernel's; docs/codec-spec.md).
// No release fence: a release (cluster.sync()'s arrive) is a MEMBAR.ALL.GPU, which waits for the
// NVLink and global stores in flight (1.2-1.5 us a call measured on 2x H200);
// the mbarrier's transaction count orders the DSMEM data instead. A CTA writes its own
// slot with a plain store: st.async into a one-CTA cluster (hidden 1024) is undefined (memcheck:
// "Cluster needs to have at least 2 blocks"). Clusters of 1-16 CTAs (cta_squares holds 16).
__device__ __forceinline__ uint64_t* row_sum_barrier() {
  __shared__ uint64_t barrier;  // one per CTA: a single phase a call, waited on with parity 0
  return &barrier;
}

// At the kernel's start: thread 0 arms this CTA's mbarrier (one arrival: its own expect_tx), then
// every thread arrives on the cluster barrier (relaxed, but after the init's release fence) and
// waits on it in normalise_row_in_cluster, before any CTA writes another's shared memory.
__device__ __forceinline__ void row_sum_barrier_init_and_arrive() {
  if (threadIdx.x == 0) {
    const uint32_t bar = uint32_t(__cvta_generic_to_shared(row_sum_barrier()));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n\tfence.mbarrier_init.release.cluster;" ::"r"(bar) : "memory");
  }
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}

template <DType D>
__device__ __forceinline__ void normalise_row_in_cluster(const AllReduceArgs& a, const RowEpilogueArgs& e, size_t p,
                                                         bool data_thread, bool has_work, float r[kLaneValues],
                                                         uint4 weight) {
  static_assert(kOneShotThreads == 128, "a CTA's subtree is 4 warps of 32 lanes");
  __shared__ float warp_squares[kOneShotThreads / 32];
  __shared__ float cta_squares[kFusedMaxClusterCtas];
  const uint32_t ctas = cooperative_groups::this_cluster().num_blocks();
  const uint32_t bar = uint32_t(__cvta_generic_to_shared(row_sum_barrier()));
  asm volatile("barrier.cluster.wait;" ::: "memory");  // every CTA of the row runs, its mbarrier armed
  // The control warp's part ends here: the data warps never wait for its signature check (as the
  // plain one-shot's), and thread 0 sends (st.async needs no fence, so NVLink stores in flight do
  // not delay it).
  if (!data_thread) return;
  float q = lane_square_sum(r);
#pragma unroll
  for (int m = 1; m < 32; m *= 2) q = __fadd_rn(q, __shfl_xor_sync(0xffffffffu, q, m));
  if (threadIdx.x % 32 == 0) warp_squares[threadIdx.x / 32] = q;
  asm volatile("bar.sync 1, %0;" ::"n"(kOneShotThreads) : "memory");  // the data warps alone
  if (threadIdx.x == 0) {
    // Its own slot by a plain store, which the arrive's release orders before the phase completes;
    // the other CTAs' by st.async (none in a one-CTA cluster, where st.async is undefined).
    const float mine = __fadd_rn(__fadd_rn(warp_squares[0], warp_squares[1]), __fadd_rn(warp_squares[2], warp_squares[3]));
    const uint32_t me = cooperative_groups::this_cluster().block_rank();
    cta_squares[me] = mine;
    uint64_t state;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(bar), "r"((ctas - 1) * 4u) : "memory");
    const uint32_t slot = uint32_t(__cvta_generic_to_shared(&cta_squares[me]));
    for (uint32_t k = 0; k < ctas; ++k) {
      if (k == me) continue;
      uint32_t remote_slot, remote_bar;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_slot) : "r"(slot), "r"(k));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(bar), "r"(k));
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote_slot),
                   "r"(__float_as_uint(mine)), "r"(remote_bar) : "memory");
    }
  }
  // Every CTA's sum has landed here once the phase completes; a CTA leaves only after that, so no
  // CTA's shared memory is written after it exits.
  for (uint32_t done = 0; !done;)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(bar) : "memory");
  uint32_t padded = 1;
  while (padded < ctas) padded *= 2;
  float x = threadIdx.x % 32 < ctas ? cta_squares[threadIdx.x % 32] : 0.0f;
#pragma unroll
  for (uint32_t m = 1; m < kFusedMaxClusterCtas; m *= 2)
    if (m < padded) x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, m));
  const float inv_rms = inverse_rms(__shfl_sync(0xffffffffu, x, 0), e.hidden, e.eps);
  float w[kLaneValues];
  unpack_lane<D>(weight, w);
#pragma unroll
  for (int v = 0; v < kLaneValues; ++v) r[v] = normed<D>(r[v], inv_rms, w[v]);
  if (has_work) *reinterpret_cast<uint4*>(static_cast<uint16_t*>(a.out) + p * kLaneValues) = pack_lane<D>(r);
}

// CTA: kOneShotThreads data threads, one vector each per grid stride, then one control warp that
// sends this call's signature and checks the peers' (kOneShotControlThreads).
// kAddRmsNorm: the epilogue fused in (one_shot_add_rmsnorm_kernel below): one vector a thread, a
// row a cluster of whole CTAs; the sum stays in registers, out gets the normed row.
template <DType D, bool kAddRmsNorm>
__device__ __forceinline__ void one_shot_body(const AllReduceArgs& a, const RowEpilogueArgs& e) {
  grid_dependency_wait();  // with PDL: the previous kernel's writes are visible from here on
  grid_dependents_launch();
  if constexpr (kAddRmsNorm) row_sum_barrier_init_and_arrive();
  const auto* in = static_cast<const uint16_t*>(a.in);
  const size_t vectors = (a.numel + kLaneValues - 1) / kLaneValues;
  const size_t stride = size_t(kOneShotBlocks) * kOneShotThreads;
  const size_t first = size_t(blockIdx.x) * kOneShotThreads + threadIdx.x;
  const bool control = threadIdx.x >= kOneShotThreads;
  const bool has_work = !control && first < vectors;  // same on every rank when the calls match
  // My first vector is loaded before the epoch, so the two loads overlap instead of the input's
  // waiting behind the epoch's address arithmetic and the signature store.
  const uint4 mine = has_work ? load_vector(in, first, a.numel) : make_uint4(0, 0, 0, 0);
  auto my_vector = [&](size_t p) { return p == first ? mine : load_vector(in, p, a.numel); };
  // The fused epilogue's other inputs, loaded while the data flies (after the grid dependency wait:
  // the previous kernel may have written them).
  uint4 residual{}, weight{};
  if constexpr (kAddRmsNorm) {
    if (has_work) {
      residual = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(e.residual) + first * kLaneValues);
      // This CTA's place in its row (%cluster_ctarank: no 64-bit division on the way to the push).
      const uint32_t row_cta = cooperative_groups::this_cluster().block_rank();
      weight = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(e.weight) +
                                               (row_cta * kOneShotThreads + threadIdx.x) * kLaneValues);
    }
  }
  float summed[kLaneValues] = {};  // kAddRmsNorm: this thread's vector of the sum, kept in registers
  auto* ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[a.rank] + a.layout.control);
  // No abort check here: it would put a dependent load before the first send. A broken
  // communicator's waits see the abort word within 64 polls and return.
  const uint32_t prev = ctrl->one_shot_epoch[blockIdx.x];
  const size_t prev_vectors = ctrl->one_shot_prev_vectors[blockIdx.x];
  const uint32_t epoch = prev >= kEpochPeriod ? 1u : prev + 1u;
  const int W = a.world_size, me = a.rank;
  const size_t V = a.layout.lamport_vectors;
  const size_t buffer = size_t(epoch % kLamportBuffers) * W * V;
  const size_t previous = size_t((epoch + kLamportBuffers - 1) % kLamportBuffers) * W * V;
  auto* out = static_cast<uint16_t*>(a.out);

  if (threadIdx.x == kOneShotThreads) {  // this call's signature to the same CTA on every peer
    for (int j = 1; j < W; ++j) {
      const int d = rank_after(me, j, W);
      auto* peer_ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[d] + a.layout.control);
      st_volatile_u64(&peer_ctrl->one_shot_signature[blockIdx.x][epoch & 1u][me], flag_word(epoch, a.signature));
    }
  }
  auto push = [&](size_t p, const uint4& v) {
    for (int j = 1; j < W; ++j) {
      const int d = rank_after(me, j, W);
      auto* dst = reinterpret_cast<uint4*>(a.workspaces[d] + a.layout.lamport);
      st_volatile_v4(dst + buffer + size_t(me) * V + p, v);
    }
  };
  // Empties the buffer of this CTA's previous call (its peers wrote it in the previous call and
  // next write it two calls on), unless that call emptied each slot as it read it (prev_vectors
  // is then 0). Runs while this call's data is in flight.
  auto* local = reinterpret_cast<uint4*>(a.workspaces[me] + a.layout.lamport);
  const uint4 empty = make_uint4(kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty);
  auto clear_previous = [&] {
    for (size_t p = first; p < prev_vectors; p += stride)
      for (int src = 0; src < W; ++src)
        if (src != me) local[previous + size_t(src) * V + p] = empty;
  };
  const bool empty_on_read = a.numel * 2 >= kOneShotEmptyOnReadBytes;
  WaitContext w{&ctrl->abort, a.record, a.timeout_ns, me};
  // Sums vector p in rank order (every rank rounds the same sum), polling each peer's slot until
  // it has arrived; false on a timeout or an abort.
  auto reduce = [&](size_t p, const uint4& own) {
    float acc[kLaneValues] = {};
    for (int src = 0; src < W; ++src) {
      uint4 v;
      if (src == me) {
        v = own;
      } else {
        uint4* slot = local + buffer + size_t(src) * V + p;
        if (!spin_until(w, [&] { return ld_volatile_v4(slot); }, [](const uint4& x) { return vector_arrived(x); }, v,
                        src, epoch, 0))
          return false;
        if (empty_on_read) *slot = empty;
      }
      accumulate_vector<D>(acc, v);
    }
    if constexpr (kAddRmsNorm) {
#pragma unroll
      for (int i = 0; i < kLaneValues; ++i) summed[i] = acc[i];
    } else {
      store_lane<D>(out + p * kLaneValues, ptrdiff_t(a.numel - p * kLaneValues), acc);
    }
    return true;
  };

  bool ok = true;
  if (control) {
    // The control warp checks that every peer made the same call while the data threads poll
    // and sum: no data thread waits for it (thread 0 waiting for the signature, before or
    // together with its data, measured 0.2-0.6 us slower at 8-128 KB on 2x H200).
    // On a mismatch the abort word stops the data threads within 64 polls; this call's
    // output is then unspecified and the error is reported.
    for (int src = 0; threadIdx.x == kOneShotThreads && src < W; ++src) {
      if (src == me) continue;
      uint64_t seen;
      const uint64_t* slot = &ctrl->one_shot_signature[blockIdx.x][epoch & 1u][src];
      if (!spin_until(w, [&] { return ld_volatile_u64(slot); }, [&](uint64_t f) { return uint32_t(f) == epoch; }, seen,
                      src, epoch, 0))
        break;
      if (uint32_t(seen >> 32) != a.signature) {
        report_error(w, ErrorCode::kMismatch, src, a.signature, uint32_t(seen >> 32), 0);
        break;
      }
    }
  } else if (!empty_on_read) {  // at most 2 vectors a thread: push all, then sum
    for (size_t p = first; p < vectors; p += stride) push(p, my_vector(p));
    clear_previous();
    for (size_t p = first; ok && p < vectors; p += stride) ok = reduce(p, my_vector(p));
  } else if (has_work) {
    // Several vectors a thread: push vector k, then sum vector k - 1 with its own value kept in
    // registers, so the sums run while the pushes drain instead of after the last one (8 MB:
    // 29.4 -> 27.25 us on 2x H200). A rank keeps pushing after a failed wait, so
    // it never withholds data a peer waits for.
    push(first, mine);
    clear_previous();
    uint4 held = mine;
    size_t held_p = first;
    for (size_t p = first + stride; p < vectors; p += stride) {
      const uint4 v = load_vector(in, p, a.numel);
      push(p, v);
      if (ok) ok = reduce(held_p, held);
      held = v;
      held_p = p;
    }
    if (ok) reduce(held_p, held);
  } else {
    clear_previous();
  }
  if constexpr (kAddRmsNorm) {
    // r = to_T(to_T(sum) + residual) -> residual_out, then the row's norm across its cluster.
    float r[kLaneValues] = {};
    if (has_work) {
      float res[kLaneValues];
      unpack_lane<D>(residual, res);
#pragma unroll
      for (int i = 0; i < kLaneValues; ++i) r[i] = add_residual<D>(to_float<D>(from_float<D>(summed[i])), res[i]);
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(e.residual_out) + first * kLaneValues) = pack_lane<D>(r);
    }
    normalise_row_in_cluster<D>(a, e, first, !control, has_work, r, weight);
  }

  __syncthreads();
  if (threadIdx.x == 0) {
    ctrl->one_shot_epoch[blockIdx.x] = epoch;
    ctrl->one_shot_prev_vectors[blockIdx.x] = empty_on_read ? 0u : uint32_t(vectors);
  }
}

template <DType D>
__global__ void __launch_bounds__(kOneShotThreads + kOneShotControlThreads) one_shot_kernel(AllReduceArgs a) {
  one_shot_body<D, false>(a, RowEpilogueArgs{});
}

// The one-shot and the add + RMSNorm epilogue in one kernel (decode sizes): launched as clusters of
// hidden / kFusedRowValues CTAs, a cluster a row, with one vector a thread (the host checks both).
// The exchange is the one-shot's own (its buffers, epochs and signature slots), so fused and plain
// calls interleave freely; out = the normed row.
template <DType D>
__global__ void __launch_bounds__(kOneShotThreads + kOneShotControlThreads)
    one_shot_add_rmsnorm_kernel(AllReduceArgs a, RowEpilogueArgs e) {
  one_shot_body<D, true>(a, e);
}

}  // namespace qr
