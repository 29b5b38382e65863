// One-shot all-reduce for small messages: one NVLink crossing, no barrier, no flag.
//
// Every rank pushes its whole tensor into every peer's buffer with 16-byte stores, then sums in
// rank order 0..W-1, polling its own memory until each 16-byte vector has arrived. "Arrived" is
// read off the data itself (the Lamport scheme TensorRT-LLM uses): an empty buffer holds -0.0
// (0x8000) in every 16-bit half, and senders turn a real -0.0 into +0.0, so a vector with no
// sentinel half is complete. (Only the sign of a zero result can differ from the plain sum.)
//
// Buffers: lamport[3][src][vector] on each rank; call epoch e uses buffer e % 3 and clears the
// one its previous call used (e - 1) % 3. Safe because a rank is at most one call ahead of a
// peer (it cannot finish call k+1 before that peer sent its data of k+1, i.e. finished call k):
// the earliest write into a buffer after it is cleared comes two calls later (three after the
// call that used it).
// Mismatch: a control warp in each CTA sends {epoch, call signature} beside the data and checks
// the peers' while the data threads work (a mismatch aborts; that call's output is unspecified).
// Epochs: one per CTA, advanced by that CTA when it runs; vector p is always handled by the same
// CTA on every rank and in every call (fixed stride), and a call launches only the CTAs that own
// vectors, the same ones on every rank, so each CTA's epochs stay in step across ranks.
// No barrier and no data thread waits for anything but data: every extra round trip on the way
// to the sum showed in the time (bench/NOTES.md changes 21-23).
// The packed one-shot (one_shot_packed_kernel, bf16 with the lossless codec) runs the same
// protocol on its own buffers and control words, sending 40 values in 4 vectors where they pack
// (codecs/lossless_group.hpp): 20% fewer bytes and stores, the same bits.
#pragma once
#include "algos/args.hpp"
#include "algos/common.cuh"
#include "codecs/lossless_group.hpp"
#include "sync/primitives.cuh"

namespace qr {

// 8 values of the input, zeros past the end.
__device__ __forceinline__ uint4 load_input_vector(const uint16_t* in, size_t p, size_t numel) {
  size_t idx = p * kLaneValues;
  if (idx + kLaneValues <= numel) return *reinterpret_cast<const uint4*>(in + idx);
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t lo = idx + 2 * i < numel ? in[idx + 2 * i] : 0u;
    uint32_t hi = idx + 2 * i + 1 < numel ? in[idx + 2 * i + 1] : 0u;
    w[i] = lo | (hi << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The plain one-shot's packet: the input vector with -0.0 made +0.0, so no half is the sentinel.
__device__ __forceinline__ uint4 load_vector(const uint16_t* in, size_t p, size_t numel) {
  const uint4 v = load_input_vector(in, p, numel);
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

// What both one-shot kernels share: the CTA's epoch and buffers, the signature exchange and the
// bookkeeping at the end. `slots` = vectors per buffer and source of this kernel's region.
struct OneShotCall {
  ControlBlock* block;
  OneShotControl* ctrl;
  uint32_t epoch;
  uint32_t buffer, previous;  // first vector of this call's buffer and of the previous call's
  uint32_t prev_units;        // units this CTA sent in its previous call (what it clears)

  __device__ __forceinline__ OneShotCall(const AllReduceArgs& a, OneShotWire wire, size_t slots) {
    block = reinterpret_cast<ControlBlock*>(a.workspaces[a.rank] + a.layout.control);
    ctrl = &block->one_shot[wire];
    // No abort check here: it would put a dependent load before the first send. A broken
    // communicator's waits see the abort word within 64 polls and return.
    const uint32_t prev = ctrl->epoch[blockIdx.x];
    prev_units = ctrl->prev_units[blockIdx.x];
    epoch = prev >= kEpochPeriod ? 1u : prev + 1u;
    // 32-bit vector indices (registers): a region holds far fewer than 2^32 vectors.
    buffer = (epoch % kLamportBuffers) * a.world_size * uint32_t(slots);
    previous = ((epoch + kLamportBuffers - 1) % kLamportBuffers) * a.world_size * uint32_t(slots);
  }
  __device__ __forceinline__ ControlBlock* peer_block(const AllReduceArgs& a, int d) const {
    return reinterpret_cast<ControlBlock*>(a.workspaces[d] + a.layout.control);
  }
  // Control thread: this call's signature to the same CTA on every peer.
  __device__ __forceinline__ void send_signature(const AllReduceArgs& a, OneShotWire wire) const {
    for (int j = 1; j < a.world_size; ++j) {
      const int d = rank_after(a.rank, j, a.world_size);
      st_volatile_u64(&peer_block(a, d)->one_shot[wire].signature[blockIdx.x][epoch & 1u][a.rank],
                      flag_word(epoch, a.signature));
    }
  }
  // Control thread: check that every peer made the same call, while the data threads poll and
  // sum: no data thread waits for it (thread 0 waiting for the signature, before or together
  // with its data, measured 0.2-0.6 us slower at 8-128 KB: bench/NOTES.md changes 22-23). On a
  // mismatch the abort word stops the data threads within 64 polls; this call's output is then
  // unspecified and the error is reported.
  __device__ __forceinline__ void check_signatures(const AllReduceArgs& a, const WaitContext& w) const {
    for (int src = 0; src < a.world_size; ++src) {
      if (src == a.rank) continue;
      uint64_t seen;
      const uint64_t* slot = &ctrl->signature[blockIdx.x][epoch & 1u][src];
      if (!spin_until(w, [&] { return ld_volatile_u64(slot); }, [&](uint64_t f) { return uint32_t(f) == epoch; }, seen,
                      src, epoch, 0))
        return;
      if (uint32_t(seen >> 32) != a.signature) {
        report_error(w, ErrorCode::kMismatch, src, a.signature, uint32_t(seen >> 32), 0);
        return;
      }
    }
  }
  __device__ __forceinline__ void finish(size_t units) const {
    __syncthreads();
    if (threadIdx.x == 0) {
      ctrl->epoch[blockIdx.x] = epoch;
      ctrl->prev_units[blockIdx.x] = uint32_t(units);
    }
  }
};

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
  const size_t V = a.layout.lamport_vectors;
  const OneShotCall call(a, kPlainWire, V);
  const int W = a.world_size, me = a.rank;
  auto* out = static_cast<uint16_t*>(a.out);

  if (threadIdx.x == kOneShotThreads) call.send_signature(a, kPlainWire);
  for (size_t p = first; !control && p < vectors; p += stride) {
    const uint4 v = my_vector(p);
    for (int j = 1; j < W; ++j) {
      const int d = rank_after(me, j, W);
      auto* dst = reinterpret_cast<uint4*>(a.workspaces[d] + a.layout.lamport);
      st_volatile_v4(dst + call.buffer + size_t(me) * V + p, v);
    }
  }

  // While the peers' data is in flight: empty the buffer of this CTA's previous call (its peers
  // wrote it in the previous call and next write it two calls on).
  auto* local = reinterpret_cast<uint4*>(a.workspaces[me] + a.layout.lamport);
  const uint4 empty = make_uint4(kLamportEmpty, kLamportEmpty, kLamportEmpty, kLamportEmpty);
  for (size_t p = first; !control && p < call.prev_units; p += stride)
    for (int src = 0; src < W; ++src)
      if (src != me) local[call.previous + size_t(src) * V + p] = empty;

  WaitContext w{&call.block->abort, a.record, a.timeout_ns, me};
  bool ok = true;
  if (threadIdx.x == kOneShotThreads) call.check_signatures(a, w);
  for (size_t p = first; !control && ok && p < vectors; p += stride) {
    float acc[kLaneValues] = {};
    for (int src = 0; src < W; ++src) {  // fixed order: every rank rounds the same sum
      uint4 v;
      if (src == me) {
        v = my_vector(p);
      } else {
        const uint4* slot = local + call.buffer + size_t(src) * V + p;
        ok = spin_until(w, [&] { return ld_volatile_v4(slot); }, [](const uint4& x) { return vector_arrived(x); }, v,
                        src, call.epoch, 0);
        if (!ok) break;
      }
      accumulate_vector<D>(acc, v);
    }
    if (ok) store_lane<D>(out + p * kLaneValues, ptrdiff_t(a.numel - p * kLaneValues), acc);
  }
  call.finish(vectors);
}

// The packed one-shot (bf16, the lossless codec): the same protocol as one_shot_kernel on its own
// buffers and control words, a warp at a time on chunks of 30 vectors (workspace.hpp): lanes
// 5g..5g+4 hold group g's 40 values. Where a group packs (codecs/lossless_group.hpp) its lanes
// 0-3 send rows 0-3; the 24 rows of a chunk's 6 groups go out as one warp store of 3 whole
// 128-byte lines, 80% of what the plain one-shot sends. A group that does not pack sends raw rows
// 0-3 there and rows 4-5 to the chunk's extra area. Lanes trade what they need by warp shuffles
// (the group's exponent range, vector 4's codes, the received rows): no block barrier.
template <int kW>
__global__ void __launch_bounds__(kOneShotThreads + kOneShotControlThreads, kOneShotBlocksPerSm)
    one_shot_packed_kernel(AllReduceArgs a) {
  using G = LosslessGroup;
  constexpr DType D = DType::kBFloat16;
  constexpr uint32_t kAll = 0xffffffffu;
  constexpr uint32_t kWarps = kOneShotThreads / 32;
  grid_dependency_wait();
  grid_dependents_launch();
  const auto* in = static_cast<const uint16_t*>(a.in);
  auto* out = static_cast<uint16_t*>(a.out);
  const uint32_t vectors = uint32_t((a.numel + kLaneValues - 1) / kLaneValues);  // <= 8 MiB / 16
  const uint32_t chunks = uint32_t(packed_chunks(vectors));
  // Chunk q belongs to warp q % (kOneShotBlocks * kWarps) of the grid, in every call.
  const uint32_t first = blockIdx.x * kWarps + threadIdx.x / 32, stride = kOneShotBlocks * kWarps;
  const int lane = threadIdx.x % 32, grp = lane / 5, pos = lane % 5;  // lanes 30-31: no group
  const bool data_lane = lane < kChunkVectors;
  const bool control = threadIdx.x >= kOneShotThreads;
  const uint32_t S = uint32_t(a.layout.packed_vectors);
  const uint32_t extra_at = uint32_t(packed_chunks(a.layout.lamport_vectors)) * kChunkMain;
  const OneShotCall call(a, kPackedWire, S);
  const int W = kW > 0 ? kW : a.world_size, me = a.rank;
  auto my_vector = [&](uint32_t q) {
    return data_lane ? load_input_vector(in, size_t(q) * kChunkVectors + lane, a.numel) : make_uint4(0, 0, 0, 0);
  };
  // A shuffle from another lane (lanes 30-31 ask for a "group 6" whose values they never use).
  auto shfl = [&](uint32_t x, int src) { return __shfl_sync(kAll, x, src); };
  auto shfl4 = [&](const uint4& v, int src) { return make_uint4(shfl(v.x, src), shfl(v.y, src), shfl(v.z, src), shfl(v.w, src)); };
  auto pick = [&](const uint4& r0, const uint4& r1, const uint4& r2, const uint4& r3, const uint4& r4) {
    return pos == 0 ? r0 : pos == 1 ? r1 : pos == 2 ? r2 : pos == 3 ? r3 : r4;
  };
  auto send = [&](uint32_t index, const uint4& v) {  // slot vector `index` on every peer
    for (int j = 1; j < W; ++j) {
      const int d = rank_after(me, j, W);
      st_volatile_v4(reinterpret_cast<uint4*>(a.workspaces[d] + a.layout.packed) + call.buffer + size_t(me) * S + index, v);
    }
  };

  if (threadIdx.x == kOneShotThreads) call.send_signature(a, kPackedWire);
  for (uint32_t q = first; !control && q < chunks; q += stride) {  // warp-uniform
    const uint4 v = my_vector(q);
    uint32_t hi = 0, lo = 0xffffffffu;
    G::accumulate_fields(v, hi, lo);
    uint32_t group_hi = hi, group_lo = lo;
#pragma unroll
    for (int k = 0; k < G::kInVectors; ++k) {
      group_hi = LosslessCodec::max2(group_hi, shfl(hi, grp * 5 + k));
      group_lo = G::min2(group_lo, shfl(lo, grp * 5 + k));
    }
    const uint32_t e_max = G::e_max_of(group_hi);
    const bool fits = G::fits_of(group_hi, group_lo);
    // Lane 4 of the group holds vector 4, whose word i's codes ride in row i's side bits.
    uint32_t side[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) side[k] = shfl(G::codes2(G::word(&v, k), e_max), grp * 5 + 4);
    const uint32_t my_side = pos == 0 ? side[0] : pos == 1 ? side[1] : pos == 2 ? side[2] : side[3];
    if (data_lane && pos < 4)  // one warp store: rows 0-3 of the 6 groups, 3 whole lines
      send(q * kChunkMain + pos * kChunkGroups + grp, fits ? G::packed_row(v, my_side, pos, e_max) : G::raw_row(v));
    if (__any_sync(kAll, data_lane && !fits)) {  // rare: a group that does not pack
      uint32_t signs[G::kInVectors];
      const uint32_t mine = G::signs_of(v);
#pragma unroll
      for (int k = 0; k < G::kInVectors; ++k) signs[k] = shfl(mine, grp * 5 + k);
      if (data_lane && !fits && pos == 4) {
        send(extra_at + q * kChunkExtra + grp, G::raw_row(v));
        send(extra_at + q * kChunkExtra + kChunkGroups + grp, G::sign_row_of(signs));
      }
    }
  }

  // While the peers' data is in flight: empty the slots of this warp's chunks of the previous call
  // (the extra area too: which groups went raw is not known here).
  auto* local = reinterpret_cast<uint4*>(a.workspaces[me] + a.layout.packed);
  for (uint32_t q = first; !control && q < call.prev_units; q += stride)
    for (int src = 0; src < W; ++src)
      if (src != me) {
        uint4* base = local + call.previous + size_t(src) * S;
        if (lane < kChunkMain) base[q * kChunkMain + lane] = make_uint4(0, 0, 0, 0);
        if (lane < kChunkExtra) base[extra_at + q * kChunkExtra + lane] = make_uint4(0, 0, 0, 0);
      }

  WaitContext w{&call.block->abort, a.record, a.timeout_ns, me};
  if (threadIdx.x == kOneShotThreads) call.check_signatures(a, w);
  bool ok = true;  // a failed wait (reported) stops this lane's waiting; the shuffles go on
  for (uint32_t q = first; !control && q < chunks; q += stride) {
    float acc[kLaneValues] = {};
    for (int src = 0; src < W; ++src) {  // fixed order: every rank rounds the same sum
      if (src == me) {
        if (data_lane) accumulate_vector<D>(acc, my_vector(q));
        continue;
      }
      const uint4* base = local + call.buffer + size_t(src) * S;
      auto wait = [&](uint32_t index) {
        uint4 x = make_uint4(0, 0, 0, 0);
        if (ok)
          ok = spin_until(w, [&] { return ld_volatile_v4(base + index); }, [](const uint4& y) { return G::arrived(y); },
                          x, src, call.epoch, 0);
        return x;
      };
      // Lane r * 6 + g polls row r of group g; then each lane gathers its group's rows.
      const uint4 polled = lane < kChunkMain ? wait(q * kChunkMain + lane) : make_uint4(0, 0, 0, 0);
      const uint4 r0 = shfl4(polled, grp), r1 = shfl4(polled, kChunkGroups + grp),
                  r2 = shfl4(polled, 2 * kChunkGroups + grp), r3 = shfl4(polled, 3 * kChunkGroups + grp);
      const bool packed = G::packed(r0);
      uint4 value = make_uint4(0, 0, 0, 0);
      if (__any_sync(kAll, data_lane && !packed)) {  // rare: lane r * 6 + g fetches extra row 4 + r of raw group g
        const bool raw_group = !(shfl(polled.w, lane % kChunkGroups) & G::kPackedForm);
        const uint4 extra = lane < kChunkExtra && raw_group ? wait(extra_at + q * kChunkExtra + lane) : make_uint4(0, 0, 0, 0);
        const uint4 r4 = shfl4(extra, grp), r5 = shfl4(extra, kChunkGroups + grp);
        if (!packed) value = G::decode_raw_row(pick(r0, r1, r2, r3, r4), r5, pos);
      }
      if (packed) {
        const uint32_t e_max = G::exponent_max(r1, r2);
        value = pos < 4 ? G::decode_row(pick(r0, r1, r2, r3, r3), e_max) : G::decode_side(r0, r1, r2, r3, e_max);
      }
      if (data_lane) accumulate_vector<D>(acc, value);
    }
    const uint32_t p = q * kChunkVectors + lane;
    if (data_lane && ok && p < vectors) store_lane<D>(out + size_t(p) * kLaneValues, ptrdiff_t(a.numel - size_t(p) * kLaneValues), acc);
  }
  call.finish(chunks);
}

}  // namespace qr
