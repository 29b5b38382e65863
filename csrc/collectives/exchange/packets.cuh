// The segment exchange's small-message path: reduce-scatter, all-gather and even all-to-all with
// the passthrough codec, one NVLink crossing, no barrier and no flag: the data carries its own
// arrival, as in the one-shot all-reduce (all_reduce/one_shot.cuh), applied to segments.
//
// The slice path (exchange.cuh) costs ~11 us at 8-128 KB on 2x H100 (a wait for the peers' ack of
// the previous call, the bulk copies' completion, a flag round trip, the last CTA's ack), where the
// one-shot all-reduce takes ~2.5 us. Here every rank stores 16-byte
// vectors of its segment for rank d straight into d's buffer and d polls its own memory for them.
//
// "Not arrived": every 16-bit half 0xFFFF (fp16/bf16) or every 32-bit word 0xFFFFFFFF (fp32), a NaN
// with all bits set. A sender sends such a value with its lowest bit cleared (a NaN of the same
// sign; docs/codec-spec.md, "Small segments"), so real data never carries the sentinel and every
// other value, signed zeros included, arrives bit for bit. The sender's own block (all-gather,
// all-to-all) is stored as it is sent, so every rank holds identical bits for every block.
//
// Buffers: xp_data[3][src][vector] on each rank, call epoch e uses buffer e % 3 and clears the one
// its previous call used while its data is in flight; safe because a rank is at most one call
// ahead of a peer: it cannot finish a call before every peer sent it that call's data (every rank
// receives a segment from every peer in every call: segments are even and not empty), and a peer
// that started a call has finished the one before. Vector p of a segment belongs to CTA
// (p / kPacketThreads) % kPacketBlocks in every call, and a call launches the same CTAs on every
// rank, so each CTA's epochs stay in step across ranks.
// Mismatch: a control warp sends {epoch, call signature} beside the data and checks the peers'.
// All-reduce (kind kAllReduce; Communicator::all_reduce_packets): the reduce-scatter above, then each
// summed vector is pushed straight on to every peer through a second channel (xq_data, its own epochs
// and clearing counts, as the first's) and stored by each as the all-gather stores it: one launch, and
// a vector's all-gather leaves as soon as its sum is done. Both channels see every peer in every call,
// so the first channel's argument holds for each.
#pragma once
#include "collectives/args.hpp"
#include "transport/lanes.cuh"
#include "transport/primitives.cuh"

namespace qr {

template <DType T>
constexpr int kPacketValues = T == DType::kFloat32 ? 4 : 8;  // values in a 16-byte vector
template <DType T>
constexpr size_t kPacketValueBytes = T == DType::kFloat32 ? 4 : 2;

// Whether a word holds a "not arrived" value, and the word with such values made real NaNs.
template <DType T>
__device__ __forceinline__ bool word_has_sentinel(uint32_t w) {
  if constexpr (T == DType::kFloat32) return w == 0xffffffffu;
  return (w & 0xffffu) == 0xffffu || (w >> 16) == 0xffffu;
}
template <DType T>
__device__ __forceinline__ uint32_t word_without_sentinel(uint32_t w) {
  if constexpr (T == DType::kFloat32) return w == 0xffffffffu ? 0xfffffffeu : w;
  if ((w & 0xffffu) == 0xffffu) w ^= 1u;
  if ((w >> 16) == 0xffffu) w ^= 1u << 16;
  return w;
}
template <DType T>
__device__ __forceinline__ bool packet_arrived(const uint4& v) {
  return !(word_has_sentinel<T>(v.x) || word_has_sentinel<T>(v.y) || word_has_sentinel<T>(v.z) ||
           word_has_sentinel<T>(v.w));
}
template <DType T>
__device__ __forceinline__ uint4 packet_without_sentinel(const uint4& v) {
  return make_uint4(word_without_sentinel<T>(v.x), word_without_sentinel<T>(v.y), word_without_sentinel<T>(v.z),
                    word_without_sentinel<T>(v.w));
}

// Vector p of the segment of n values at element `at` of `base` (zeros past its end). `aligned`:
// every segment starts 16-byte aligned, so a full vector is one load.
template <DType T>
__device__ __forceinline__ uint4 load_packet(const void* base, size_t at, size_t p, uint32_t n, bool aligned) {
  constexpr int E = kPacketValues<T>;
  const size_t first = p * E;
  const auto* bytes = static_cast<const uint8_t*>(base) + (at + first) * kPacketValueBytes<T>;
  if (aligned && first + E <= n) return *reinterpret_cast<const uint4*>(bytes);
  uint32_t w[4];
  if constexpr (T == DType::kFloat32) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = first + i < n ? reinterpret_cast<const uint32_t*>(bytes)[i] : 0u;
  } else {
    const auto* h = reinterpret_cast<const uint16_t*>(bytes);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = (first + 2 * i < n ? uint32_t(h[2 * i]) : 0u) | (first + 2 * i + 1 < n ? uint32_t(h[2 * i + 1]) << 16 : 0u);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Stores the values of vector p that lie inside the segment of n values at element `at`.
template <DType T>
__device__ __forceinline__ void store_packet(void* base, size_t at, size_t p, uint32_t n, bool aligned, const uint4& v) {
  constexpr int E = kPacketValues<T>;
  const size_t first = p * E;
  auto* bytes = static_cast<uint8_t*>(base) + (at + first) * kPacketValueBytes<T>;
  if (aligned && first + E <= n) {
    *reinterpret_cast<uint4*>(bytes) = v;
    return;
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (T == DType::kFloat32) {
      if (first + i < n) reinterpret_cast<uint32_t*>(bytes)[i] = w[i];
    } else {
      auto* h = reinterpret_cast<uint16_t*>(bytes);
      if (first + 2 * i < n) h[2 * i] = uint16_t(w[i] & 0xffffu);
      if (first + 2 * i + 1 < n) h[2 * i + 1] = uint16_t(w[i] >> 16);
    }
  }
}

// acc (+)= the vector's values in fp32: `first` starts the sum (acc = v, so the sign of a zero is
// the plain sum's), as the slice path's reduce-scatter adds in rank order.
template <DType T>
__device__ __forceinline__ void accumulate_packet(float acc[8], const uint4& v, bool first) {
  float x[8];
  if constexpr (T == DType::kFloat32) {
    x[0] = __uint_as_float(v.x), x[1] = __uint_as_float(v.y), x[2] = __uint_as_float(v.z), x[3] = __uint_as_float(v.w);
  } else {
    unpack_lane<T>(v, x);
  }
#pragma unroll
  for (int i = 0; i < kPacketValues<T>; ++i) acc[i] = first ? x[i] : acc[i] + x[i];
}
template <DType T>
__device__ __forceinline__ uint4 packet_of(const float acc[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (T == DType::kFloat32) {
      w[i] = __float_as_uint(acc[i]);
    } else {
      w[i] = uint32_t(from_float<T>(acc[2 * i])) | uint32_t(from_float<T>(acc[2 * i + 1])) << 16;
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// One packet channel of a CTA (xp_data, or the packet all-reduce's xq_data): this call's epoch, the
// buffer its vectors land in on every rank, and the buffer of the CTA's previous call on the channel,
// emptied during this call. Vector q of a channel belongs to CTA (q / kPacketThreads) % kPacketBlocks
// in every call of every path (exact or coded), which is what keeps each CTA's buffers in step.
struct PacketChannel {
  uint8_t* const* workspaces;
  size_t region, V;  // the channel's offset in every workspace; vectors per buffer and source
  int me, W;
  uint32_t epoch, prev_vectors;
  size_t buffer, previous;  // vector offsets of this call's buffer and the previous call's

  __device__ PacketChannel(const ExchangeArgs& a, size_t region_, uint32_t prev_epoch, uint32_t prev_vectors_)
      : workspaces(a.workspaces), region(region_), V(a.layout.packet_vectors), me(a.rank), W(a.world_size),
        epoch(prev_epoch >= kEpochPeriod ? 1u : prev_epoch + 1u), prev_vectors(prev_vectors_) {
    buffer = size_t(epoch % kLamportBuffers) * W * V;
    previous = size_t((epoch + kLamportBuffers - 1) % kLamportBuffers) * W * V;
  }
  __device__ void send(int d, size_t q, const uint4& v) const {
    st_volatile_v4(reinterpret_cast<uint4*>(workspaces[d] + region) + buffer + size_t(me) * V + q, v);
  }
  // Waits for vector q from src until `arrived` holds; false on a timeout or an abort.
  template <class Arrived>
  __device__ bool arrive(const WaitContext& w, int src, size_t q, uint4& v, Arrived arrived) const {
    const uint4* slot = reinterpret_cast<const uint4*>(workspaces[me] + region) + buffer + size_t(src) * V + q;
    return spin_until(w, [&] { return ld_volatile_v4(slot); }, arrived, v, src, epoch, kPhaseExchangePackets);
  }
  // Empties this thread's vectors (first, first + stride, ...) of the previous call's buffer.
  __device__ void empty_previous(size_t first, size_t stride) const {
    auto* local = reinterpret_cast<uint4*>(workspaces[me] + region);
    const uint4 empty = make_uint4(~0u, ~0u, ~0u, ~0u);
    for (size_t q = first; q < prev_vectors; q += stride)
      for (int src = 0; src < W; ++src)
        if (src != me) local[previous + size_t(src) * V + q] = empty;
  }
};

// The control warp's part of a packet call: {epoch, call signature} to the same CTA on every peer,
// then the peers' checked while the data threads work (a mismatch aborts them within 64 polls; the
// call's output is then unspecified and the error is reported).
__device__ inline void send_packet_signature(const ExchangeArgs& a, uint32_t epoch) {
  for (int j = 1; j < a.world_size; ++j) {
    const int d = rank_after(a.rank, j, a.world_size);
    auto* peer_ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[d] + a.layout.control);
    st_volatile_u64(&peer_ctrl->packet_signature[blockIdx.x][epoch & 1u][a.rank], flag_word(epoch, a.signature));
  }
}
__device__ inline void check_packet_signatures(const ExchangeArgs& a, ControlBlock* ctrl, uint32_t epoch,
                                               const WaitContext& w) {
  for (int src = 0; src < a.world_size; ++src) {
    if (src == a.rank) continue;
    uint64_t seen;
    const uint64_t* slot = &ctrl->packet_signature[blockIdx.x][epoch & 1u][src];
    if (!spin_until(w, [&] { return ld_volatile_u64(slot); }, [&](uint64_t f) { return uint32_t(f) == epoch; }, seen, src,
                    epoch, kPhaseExchangePackets))
      return;
    if (uint32_t(seen >> 32) != a.signature) {
      report_error(w, ErrorCode::kMismatch, src, a.signature, uint32_t(seen >> 32), kPhaseExchangePackets);
      return;
    }
  }
}

template <DType T>
__global__ void __launch_bounds__(kPacketThreads + kPacketControlThreads) exchange_packets_kernel(ExchangeArgs a) {
  grid_dependency_wait();  // with PDL: the previous kernel's writes are visible from here on
  grid_dependents_launch();
  constexpr int E = kPacketValues<T>;
  const int W = a.world_size, me = a.rank;
  const auto kind = ExchangeKind(a.kind);
  const uint32_t n = a.even_count;
  const size_t vectors = (size_t(n) + E - 1) / E;
  const size_t stride = size_t(kPacketBlocks) * kPacketThreads;
  const size_t first = size_t(blockIdx.x) * kPacketThreads + threadIdx.x;
  const bool aligned = a.aligned;
  auto* ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[me] + a.layout.control);
  const PacketChannel ch(a, a.layout.xp_data, ctrl->packet_epoch[blockIdx.x], ctrl->packet_prev_vectors[blockIdx.x]);
  // The all-reduce's second channel (used only by kAllReduce calls).
  const bool all_reduce = kind == ExchangeKind::kAllReduce;
  const PacketChannel ag(a, a.layout.xq_data, ctrl->packet_ag_epoch[blockIdx.x], ctrl->packet_ag_prev_vectors[blockIdx.x]);
  WaitContext w{&ctrl->abort, a.record, a.timeout_ns, me};
  const auto arrived = [](const uint4& x) { return packet_arrived<T>(x); };

  if (threadIdx.x == kPacketThreads) {
    send_packet_signature(a, ch.epoch);
    check_packet_signatures(a, ctrl, ch.epoch, w);
  } else if (threadIdx.x < kPacketThreads) {
    // Push: my segment for every peer (all-gather: the same one), and my own block in place.
    for (size_t p = first; p < vectors; p += stride) {
      if (kind == ExchangeKind::kAllGather) {
        const uint4 v = packet_without_sentinel<T>(load_packet<T>(a.in, 0, p, n, aligned));
        for (int j = 1; j < W; ++j) ch.send(rank_after(me, j, W), p, v);
        store_packet<T>(a.out, a.recv_offset[me], p, n, aligned, v);
        continue;
      }
      for (int j = 1; j < W; ++j) {
        const int d = rank_after(me, j, W);
        const uint32_t len = all_reduce ? a.send_count[d] : n;  // all-reduce: zeros past the tensor's end
        ch.send(d, p, packet_without_sentinel<T>(load_packet<T>(a.in, a.send_offset[d], p, len, aligned)));
      }
      if (kind == ExchangeKind::kAllToAll)
        store_packet<T>(a.out, a.recv_offset[me], p, n, aligned,
                        packet_without_sentinel<T>(load_packet<T>(a.in, a.send_offset[me], p, n, aligned)));
    }
    // Empty the buffers of this CTA's previous call while the data flies (each channel's).
    ch.empty_previous(first, stride);
    if (all_reduce) ag.empty_previous(first, stride);
    // Receive: the peers' segments into place, or (reduce-scatter) the sum in rank order, my own
    // values exact.
    bool ok = true;
    for (size_t p = first; ok && p < vectors; p += stride) {
      if (kind == ExchangeKind::kReduceScatter || all_reduce) {
        // All-reduce: segment d is chunk d of the tensor, send_count[d] of its values inside it.
        const uint32_t mine = all_reduce ? a.send_count[me] : n;
        float acc[8];
        for (int src = 0; ok && src < W; ++src) {
          uint4 v;
          if (src == me) {
            v = load_packet<T>(a.in, a.send_offset[me], p, mine, aligned);
          } else {
            ok = ch.arrive(w, src, p, v, arrived);
          }
          accumulate_packet<T>(acc, v, src == 0);
        }
        if (!ok) break;
        if (!all_reduce) {
          store_packet<T>(a.out, 0, p, n, aligned, packet_of<T>(acc));
          continue;
        }
        // The sum as the all-gather sends it (a sentinel-free NaN), stored here as every peer stores it.
        const uint4 sum = packet_without_sentinel<T>(packet_of<T>(acc));
        for (int j = 1; j < W; ++j) ag.send(rank_after(me, j, W), p, sum);
        store_packet<T>(a.out, a.recv_offset[me], p, mine, aligned, sum);
        continue;
      }
      for (int j = 1; ok && j < W; ++j) {
        const int src = rank_after(me, j, W);
        uint4 v;
        ok = ch.arrive(w, src, p, v, arrived);
        if (ok) store_packet<T>(a.out, a.recv_offset[src], p, n, aligned, v);
      }
    }
    // All-reduce: every other chunk's sum from its owner.
    for (size_t p = first; ok && all_reduce && p < vectors; p += stride) {
      for (int j = 1; ok && j < W; ++j) {
        const int src = rank_after(me, j, W);
        uint4 v;
        ok = ag.arrive(w, src, p, v, arrived);
        if (ok) store_packet<T>(a.out, a.recv_offset[src], p, a.send_count[src], aligned, v);
      }
    }
  }

  __syncthreads();
  if (threadIdx.x == 0) {
    ctrl->packet_epoch[blockIdx.x] = ch.epoch;
    ctrl->packet_prev_vectors[blockIdx.x] = uint32_t(vectors);
    if (all_reduce) {
      ctrl->packet_ag_epoch[blockIdx.x] = ag.epoch;
      ctrl->packet_ag_prev_vectors[blockIdx.x] = uint32_t(vectors);
    }
  }
}

}  // namespace qr
