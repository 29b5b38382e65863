// The segment exchange's small-message path for the scaled codecs (fp8, int8, int6, int4, fp4 and
// the rotated int4h / int6h): reduce-scatter, all-gather and even all-to-all on the exact path's
// packet channel (packets.cuh): one crossing, no flag, no barrier. On 4x H100 (2026-11-27) the slice
// path took 22-28 us for any codec at 8-512 KB and the exact packets 3-6; this path 4.4-9.3.
//
// An encoded payload has no spare bit pattern to mean "not arrived", so what crosses is what the
// receiver would decode: the result's bits are the slice path's (and the CPU twin's), only the wire
// bytes differ, and at these sizes the link time is small beside the slice path's handshakes.
//   all-gather, all-to-all: each lane as the codec round-trips it (rotated back), rounded to T: the
//     values every receiver stores, the all-gather sender's own block too (16-bit T: one vector a
//     lane); the all-to-all's own segment is copied exact.
//   reduce-scatter: the decoded values in fp32 (in the rotated domain for the rotated codecs), two
//     vectors a lane, so the owner's fp32 sum in rank order, its own values exact, is the slice path's.
// A value equal to the sentinel (a NaN with every bit set) is sent with its lowest bit cleared, as
// the exact path does; only NaN payloads can differ from the slice path's.
// Lanes: a thread takes whole lanes of 8 values, 4 consecutive threads a codec block of 32 (its scale
// by warp shuffles, as the slice path); blocks start at each segment's start and a segment crosses
// as whole warps' worth of lanes, padded with zeros (a rotated tail block's padding takes part in its
// sum, as in the twin's; the padding past the tail block is never stored). Wire vector q still
// belongs to CTA (q / kPacketThreads) % kPacketBlocks, as on the exact path, so both paths share the
// channel's buffers and epochs: with two vectors a lane, a CTA's 128 threads take two stretches of
// 64 lanes a round.
#pragma once
#include "codecs/codec_list.hpp"
#include "collectives/exchange/packets.cuh"
#include "transport/lane_io.cuh"

namespace qr {

// One lane's wire vectors: the lane's 8 values rounded to 16-bit T (one vector), or in fp32 (two).
template <DType T>
__device__ __forceinline__ void coded_wire_of(const float v[kLaneValues], int per_lane, uint4 q[2]) {
  if constexpr (T != DType::kFloat32) {
    if (per_lane == 1) {
      q[0] = packet_without_sentinel<T>(pack_lane<T>(v));
      return;
    }
  }
  auto bits = [&](int i) { return __float_as_uint(v[i]); };
  q[0] = packet_without_sentinel<DType::kFloat32>(make_uint4(bits(0), bits(1), bits(2), bits(3)));
  q[1] = packet_without_sentinel<DType::kFloat32>(make_uint4(bits(4), bits(5), bits(6), bits(7)));
}

template <class Codec, DType T>
__global__ void __launch_bounds__(kPacketThreads + kPacketControlThreads) exchange_coded_packets_kernel(ExchangeArgs a) {
  using Wire = WireCodec<Codec, T>;
  using IO = LaneIO<Wire, scale_dtype(T)>;
  constexpr bool kRotated = kIsRotated<Codec>;
  grid_dependency_wait();  // with PDL: the previous kernel's writes are visible from here on
  grid_dependents_launch();
  const int W = a.world_size, me = a.rank, t = threadIdx.x;
  const auto kind = ExchangeKind(a.kind);
  const bool reduce = kind == ExchangeKind::kReduceScatter;
  const int per_lane = coded_packet_vectors_per_lane(reduce, T == DType::kFloat32);
  const uint32_t n = a.even_count;
  const size_t lanes = coded_packet_lanes(n);
  const bool aligned = a.aligned;
  auto* ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[me] + a.layout.control);
  const PacketChannel ch(a, a.layout.xp_data, ctrl->packet_epoch[blockIdx.x], ctrl->packet_prev_vectors[blockIdx.x]);
  WaitContext w{&ctrl->abort, a.record, a.timeout_ns, me};

  if (t == kPacketThreads) {
    send_packet_signature(a, ch.epoch);
    check_packet_signatures(a, ctrl, ch.epoch, w);
  } else if (t < kPacketThreads) {
    // Round i's lane: stretch k = per_lane * i + t / span of this CTA's stretches (b, b + 256, ...),
    // each `span` lanes wide. A warp's 32 lanes are consecutive and lanes come in whole warps, so every
    // loop below runs warp-uniform (the codec's shuffles need the whole warp).
    const int span = kPacketThreads / per_lane;
    auto lane_of = [&](size_t i) {
      return (blockIdx.x + size_t(kPacketBlocks) * (size_t(per_lane) * i + t / span)) * span + t % span;
    };
    // Wire vector k of lane L: a warp's 32 lanes send vector k as 32 consecutive vectors, so each
    // store instruction writes whole 32-byte sectors (lane-interleaved, every store half-filled the
    // sectors it wrote across NVLink).
    auto wire_at = [&](size_t L, int k) { return (L / 32) * 32 * per_lane + size_t(k) * 32 + L % 32; };
    // A lane of segment d as the codec delivers it (rotated domain kept for the reduce-scatter's sum).
    auto round_trip = [&](size_t at, size_t L, float v[kLaneValues]) {
      load_values<T>(a.in, at + L * kLaneValues, ptrdiff_t(n) - ptrdiff_t(L * kLaneValues), aligned, v);
      if constexpr (kRotated) rotate_lane(v);
      typename Wire::Packed p;
      IO::encode_keep(v, p);
      if constexpr (kRotated)
        if (!reduce) unrotate_lane(v);
    };
    auto store_wire = [&](size_t at, size_t L, const uint4 q[2]) {
#pragma unroll  // (q indexed by constants: a runtime index put it in local memory)
      for (int k = 0; k < 2; ++k)
        if (k < per_lane) store_packet<T>(a.out, at, L * per_lane + k, n, aligned, q[k]);
    };
    // Push: my lane of every peer's segment (all-gather: the same one), and my own block in place.
    for (size_t i = 0;; ++i) {
      const size_t L = lane_of(i);
      if (L >= lanes) break;
      float v[kLaneValues];
      uint4 q[2];
      if (kind == ExchangeKind::kAllGather) {
        round_trip(0, L, v);
        coded_wire_of<T>(v, per_lane, q);
        for (int j = 1; j < W; ++j)
#pragma unroll
          for (int k = 0; k < 2; ++k)
            if (k < per_lane) ch.send(rank_after(me, j, W), wire_at(L, k), q[k]);
        store_wire(a.recv_offset[me], L, q);
        continue;
      }
      for (int j = 1; j < W; ++j) {
        const int d = rank_after(me, j, W);
        round_trip(a.send_offset[d], L, v);
        coded_wire_of<T>(v, per_lane, q);
#pragma unroll
        for (int k = 0; k < 2; ++k)
          if (k < per_lane) ch.send(d, wire_at(L, k), q[k]);
      }
      if (kind == ExchangeKind::kAllToAll) {  // my own segment, copied exact (as on the slice path)
        load_values<T>(a.in, a.send_offset[me] + L * kLaneValues, ptrdiff_t(n) - ptrdiff_t(L * kLaneValues), aligned, v);
        store_values<T>(a.out, a.recv_offset[me] + L * kLaneValues, ptrdiff_t(n) - ptrdiff_t(L * kLaneValues), aligned, v);
      }
    }
    // Empty the buffer of this CTA's previous call while the data flies.
    ch.empty_previous(size_t(blockIdx.x) * kPacketThreads + t, size_t(kPacketBlocks) * kPacketThreads);
    // Receive. A failed wait (timeout, abort) leaves the loops running without waiting, so the warp
    // stays whole for the shuffles; the output is then unspecified and the error is reported.
    bool ok = true;
    auto arrive = [&](int src, size_t L, uint4 q[2]) {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        if (k >= per_lane) break;
        if (!ok) {
          q[k] = make_uint4(0u, 0u, 0u, 0u);
          continue;
        }
        ok = per_lane == 1 ? ch.arrive(w, src, wire_at(L, k), q[k], [](const uint4& x) { return packet_arrived<T>(x); })
                           : ch.arrive(w, src, wire_at(L, k), q[k],
                                       [](const uint4& x) { return packet_arrived<DType::kFloat32>(x); });
      }
    };
    for (size_t i = 0;; ++i) {
      const size_t L = lane_of(i);
      if (L >= lanes) break;
      if (!reduce) {
        for (int j = 1; j < W; ++j) {
          const int src = rank_after(me, j, W);
          uint4 q[2];
          arrive(src, L, q);
          if (ok) store_wire(a.recv_offset[src], L, q);
        }
        continue;
      }
      // The sum in rank order in fp32, my own values exact (rotated for the rotated codecs).
      float acc[kLaneValues];
      for (int src = 0; src < W; ++src) {
        float v[kLaneValues];
        if (src == me) {
          load_values<T>(a.in, a.send_offset[me] + L * kLaneValues, ptrdiff_t(n) - ptrdiff_t(L * kLaneValues), aligned, v);
          if constexpr (kRotated) rotate_lane(v);
        } else {
          uint4 q[2] = {make_uint4(0u, 0u, 0u, 0u), make_uint4(0u, 0u, 0u, 0u)};
          arrive(src, L, q);
          const uint32_t u[8] = {q[0].x, q[0].y, q[0].z, q[0].w, q[1].x, q[1].y, q[1].z, q[1].w};
#pragma unroll
          for (int k = 0; k < kLaneValues; ++k) v[k] = __uint_as_float(u[k]);
        }
#pragma unroll
        for (int k = 0; k < kLaneValues; ++k) acc[k] = src == 0 ? v[k] : acc[k] + v[k];
      }
      if constexpr (kRotated) unrotate_lane(acc);
      if (ok)
        store_values<T>(a.out, L * kLaneValues, ptrdiff_t(n) - ptrdiff_t(L * kLaneValues), aligned, acc);
    }
  }

  __syncthreads();
  if (t == 0) {
    ctrl->packet_epoch[blockIdx.x] = ch.epoch;
    ctrl->packet_prev_vectors[blockIdx.x] = uint32_t(lanes * per_lane);
  }
}

}  // namespace qr
