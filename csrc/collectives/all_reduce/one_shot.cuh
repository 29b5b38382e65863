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
// separate clearing pass of the whole previous buffer cost ~1 us at 6-8 MB, bench/NOTES.md run
// 77). Both are safe because a rank is at most one call ahead of a peer (it cannot finish call
// k+1 before that peer sent its data of k+1, i.e. finished call k): the earliest write into a
// buffer after it is emptied comes two calls later (three after the call that used it).
// Mismatch: a control warp in each CTA sends {epoch, call signature} beside the data and checks
// the peers' while the data threads work (a mismatch aborts; that call's output is unspecified).
// Epochs: one per CTA, advanced by that CTA when it runs; vector p is always handled by the same
// CTA on every rank and in every call (fixed stride), and a call launches only the CTAs that own
// vectors, the same ones on every rank, so each CTA's epochs stay in step across ranks.
// No barrier and no data thread waits for anything but data: every extra round trip on the way
// to the sum showed in the time (bench/NOTES.md changes 21-23).
#pragma once
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

// CTA: kOneShotThreads data threads, one vector each per grid stride, then one control warp that
// sends this call's signature and checks the peers' (kOneShotControlThreads).
template <DType D>
__global__ void __launch_bounds__(kOneShotThreads + kOneShotControlThreads) one_shot_kernel(AllReduceArgs a) {
  grid_dependency_wait();  // with PDL: the previous kernel's writes are visible from here on
  grid_dependents_launch();
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
    store_lane<D>(out + p * kLaneValues, ptrdiff_t(a.numel - p * kLaneValues), acc);
    return true;
  };

  bool ok = true;
  if (control) {
    // The control warp checks that every peer made the same call while the data threads poll
    // and sum: no data thread waits for it (thread 0 waiting for the signature, before or
    // together with its data, measured 0.2-0.6 us slower at 8-128 KB: bench/NOTES.md changes
    // 22-23). On a mismatch the abort word stops the data threads within 64 polls; this call's
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
    // 29.4 -> 27.25 us, bench/NOTES.md change 36). A rank keeps pushing after a failed wait, so
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

  __syncthreads();
  if (threadIdx.x == 0) {
    ctrl->one_shot_epoch[blockIdx.x] = epoch;
    ctrl->one_shot_prev_vectors[blockIdx.x] = empty_on_read ? 0u : uint32_t(vectors);
  }
}

}  // namespace qr
