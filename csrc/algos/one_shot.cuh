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
// buffers and control words, but 40 values (a group: lane l of the 5 rows of a chunk) go out as
// 4 vectors where they pack (codecs/lossless_group.hpp), else raw as 6. Warp i of a CTA loads row
// i of a chunk; the CTA gathers each lane's group in shared memory; warp i (< 4) then sends
// packed row i, every warp write a whole 512-byte row. On receipt warps 0-3 poll their rows,
// the CTA shares them, and warp i decodes its own row of values.
template <int kW>
__global__ void __launch_bounds__(kPackedDataThreads + kOneShotControlThreads, kPackedBlocksPerSm)
    one_shot_packed_kernel(AllReduceArgs a) {
  using G = LosslessGroup;
  constexpr DType D = DType::kBFloat16;
  grid_dependency_wait();
  grid_dependents_launch();
  __shared__ uint4 s_rows[G::kSlotVectors][kGroupsPerChunk];  // a chunk's rows, in or out
  __shared__ int s_any_raw;
  const auto* in = static_cast<const uint16_t*>(a.in);
  auto* out = static_cast<uint16_t*>(a.out);
  const uint32_t vectors = uint32_t((a.numel + kLaneValues - 1) / kLaneValues);  // <= 8 MiB / 16
  const uint32_t chunks = uint32_t(packed_chunks(vectors));
  const int row = threadIdx.x / 32, l = threadIdx.x % 32;  // data threads: row 0..4, lane
  const bool control = threadIdx.x >= kPackedDataThreads;
  const uint32_t S = uint32_t(a.layout.packed_vectors);
  const OneShotCall call(a, kPackedWire, S);
  const int W = kW > 0 ? kW : a.world_size, me = a.rank;
  auto in_vector = [&](uint32_t c) { return c * kChunkInVectors + row * kGroupsPerChunk + l; };
  auto slot_vector = [&](uint32_t c, int r) { return c * kChunkSlotVectors + r * kGroupsPerChunk + l; };
  auto my_row = [&](uint32_t c) { return control ? make_uint4(0, 0, 0, 0) : load_input_vector(in, in_vector(c), a.numel); };

  if (threadIdx.x == kPackedDataThreads) call.send_signature(a, kPackedWire);
  for (uint32_t c = blockIdx.x; c < chunks; c += kPackedBlocks) {  // uniform across the CTA
    const uint4 mine = my_row(c);
    if (!control) s_rows[row][l] = mine;
    __syncthreads();
    if (!control) {
      uint4 g[G::kInVectors];
#pragma unroll
      for (int i = 0; i < G::kInVectors; ++i) g[i] = s_rows[i][l];
      const G::Plan plan = G::plan(g);
      auto send = [&](int r, const uint4& v) {
        for (int j = 1; j < W; ++j) {
          const int d = rank_after(me, j, W);
          auto* dst = reinterpret_cast<uint4*>(a.workspaces[d] + a.layout.packed) + call.buffer + size_t(me) * S;
          st_volatile_v4(dst + slot_vector(c, r), v);
        }
      };
      const uint32_t g4 = row == 0 ? g[4].x : row == 1 ? g[4].y : row == 2 ? g[4].z : g[4].w;
      if (plan.fits) {
        if (row < G::kPackedVectors) send(row, G::packed_row(mine, G::codes2(g4, plan.e_max), row, plan.e_max));
      } else {
        send(row, G::raw_row(mine));
        if (row == G::kInVectors - 1) send(G::kSlotVectors - 1, G::sign_row(g));
      }
    }
    __syncthreads();  // s_rows is refilled next round
  }

  // While the peers' data is in flight: empty the slots of this CTA's previous call (all 6 rows
  // of a chunk: the groups' forms are not known here; warp 4 takes rows 4 and 5).
  auto* local = reinterpret_cast<uint4*>(a.workspaces[me] + a.layout.packed);
  for (uint32_t c = blockIdx.x; !control && c < call.prev_units; c += kPackedBlocks)
    for (int src = 0; src < W; ++src)
      if (src != me) {
        local[call.previous + size_t(src) * S + slot_vector(c, row)] = make_uint4(0, 0, 0, 0);
        if (row == G::kInVectors - 1)
          local[call.previous + size_t(src) * S + slot_vector(c, G::kSlotVectors - 1)] = make_uint4(0, 0, 0, 0);
      }

  WaitContext w{&call.block->abort, a.record, a.timeout_ns, me};
  if (threadIdx.x == kPackedDataThreads) call.check_signatures(a, w);
  // Every thread of the CTA runs the same loop and barriers (the control warp too, once it has
  // checked the signatures); a failed wait records the error, and the CTA finishes its rounds
  // without waiting again (the result is then unspecified and the error is raised).
  bool ok = true;
  for (uint32_t c = blockIdx.x; c < chunks; c += kPackedBlocks) {
    float acc[kLaneValues] = {};
    for (int src = 0; src < W; ++src) {  // fixed order: every rank rounds the same sum
      if (src == me) {
        if (!control) accumulate_vector<D>(acc, my_row(c));
        continue;
      }
      const uint4* base = local + call.buffer + size_t(src) * S;
      auto wait_row = [&](int r) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (ok)
          ok = spin_until(w, [&] { return ld_volatile_v4(base + slot_vector(c, r)); },
                          [](const uint4& x) { return G::arrived(x); }, v, src, call.epoch, 0);
        s_rows[r][l] = v;
      };
      if (!control && row < G::kPackedVectors) wait_row(row);
      if (threadIdx.x == 0) s_any_raw = 0;
      __syncthreads();
      const bool raw = !control && !G::packed(s_rows[0][l]);
      if (raw) s_any_raw = 1;
      __syncthreads();
      if (s_any_raw) {  // rare: raw groups in this chunk; warp 4 fetches their last two rows
        if (raw && row == G::kInVectors - 1) wait_row(4), wait_row(5);
        __syncthreads();
      }
      if (!control) {
        uint4 v;
        if (raw) {
          v = G::decode_raw_row(s_rows[row][l], s_rows[5][l], row);
        } else {
          const uint32_t e_max = G::exponent_max(s_rows[1][l], s_rows[2][l]);
          v = row < G::kPackedVectors ? G::decode_row(s_rows[row][l], e_max)
                                      : G::decode_side(s_rows[0][l], s_rows[1][l], s_rows[2][l], s_rows[3][l], e_max);
        }
        accumulate_vector<D>(acc, v);
      }
      __syncthreads();  // s_rows is refilled next
    }
    const uint32_t p = in_vector(c);
    if (!control && ok && p < vectors) store_lane<D>(out + size_t(p) * kLaneValues, ptrdiff_t(a.numel - size_t(p) * kLaneValues), acc);
  }
  call.finish(chunks);
}

}  // namespace qr
