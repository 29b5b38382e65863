// The segment exchange's small-message path for the scaled codecs (fp8, int8, int6, int4, fp4 and
// the rotated int4h / int6h): reduce-scatter, all-gather and even all-to-all on the exact path's
// packet channel (packets.cuh): one crossing, no flag, no barrier. On 4x H100 (2026-11-27) the slice
// path took 22-28 us for any codec at 8-512 KB and the exact packets 3-6; this path 4.4-9.3.
//
// What crosses gives the result the slice path's bits (and the CPU twin's); only the wire differs.
//   reduce-scatter: the codec's own bytes. Each lane's codes and its block's 16-bit scale travel in
//     8-byte units {32 payload bits, the call's 15-bit mark, 16 payload bits} (NCCL's LL line: an
//     8-byte store arrives whole, so a unit whose mark is this call's holds this call's payload; an
//     emptied slot's all-ones mark is no call's). Two units a lane (one 16-byte store); int4 / fp4 /
//     int4h one, once a thread takes more than one lane either way (coded_units_per_lane). The owner
//     decodes each peer's lane as the slice path does and sums in rank order in fp32, its own values
//     exact (in the rotated domain for the rotated codecs).
//   all-gather, all-to-all: an encoded payload has no spare bit pattern for "not arrived", so each
//     lane crosses as the codec round-trips it (rotated back), rounded to T: the values every
//     receiver stores, the all-gather sender's own block too (16-bit T: one vector a lane); the
//     all-to-all's own segment is copied exact. A value equal to the sentinel (a NaN with every bit
//     set) is sent with its lowest bit cleared, as the exact path does; only NaN payloads can differ
//     from the slice path's.
// Lanes: a thread takes whole lanes of 8 values, 4 consecutive threads a codec block of 32 (its scale
// by warp shuffles, as the slice path); blocks start at each segment's start and a segment crosses
// as whole warps' worth of lanes, padded with zeros (a rotated tail block's padding takes part in its
// sum, as in the twin's; the padding past the tail block is never stored). Wire vector q still
// belongs to CTA (q / kPacketThreads) % kPacketBlocks, as on the exact path, so both paths share the
// channel's buffers and epochs: a CTA's 128 threads take a stretch of 128 lanes a round with one
// vector a lane, two stretches of 64 with two, and half a stretch of 256 with one unit a lane.
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

// The reduce-scatter's wire units of one lane (see the top): Packed codes and the block's scale in
// kUnits 8-byte units, each {lo: 32 payload bits, hi: mark << 16 | 16 payload bits}.
template <class Wire>
struct CodedUnits {
  using Packed = typename Wire::Packed;
  static constexpr int kLaneCodeBits = qr::kLaneCodeBits<Wire>;
  static constexpr bool kOneUnitFits = coded_units_per_lane(kLaneCodeBits, ~size_t(0)) == 1;
  static_assert(Wire::kPlaneABytes == 4 || Wire::kPlaneABytes == 8, "a lane's codes: 32 or 64 bits, and 16 more");
  // The call's mark: 15 bits of its epoch, never the all-ones of an emptied slot.
  __device__ static uint32_t mark_of(uint32_t epoch) { return (epoch & 0x7fffu) << 16; }
  __device__ static bool arrived(uint32_t hi, uint32_t mark) { return (hi & 0xffff0000u) == mark; }
  // The units as a vector (one unit: its x, y).
  __device__ static uint4 pack(const Packed& p, uint16_t scale, uint32_t mark) {
    if constexpr (Wire::kPlaneABytes == 8) {
      return make_uint4(p.a.x, mark | scale, p.a.y, mark);
    } else if constexpr (Wire::kPlaneBBytes > 0) {
      return make_uint4(p.a, mark | scale, uint32_t(p.b), mark);
    } else {
      return make_uint4(p.a, mark | scale, 0u, mark);
    }
  }
  __device__ static uint16_t unpack(const uint4& u, Packed& p) {
    if constexpr (Wire::kPlaneABytes == 8) {
      p.a = make_uint2(u.x, u.z);
    } else if constexpr (Wire::kPlaneBBytes > 0) {
      p.a = u.x;
      p.b = static_cast<decltype(p.b)>(u.z);
    } else {
      p.a = u.x;
    }
    return uint16_t(u.y & 0xffffu);
  }
};

template <class Codec, DType T>
__global__ void __launch_bounds__(kPacketThreads + kPacketControlThreads) exchange_coded_packets_kernel(ExchangeArgs a) {
  using Wire = WireCodec<Codec, T>;
  using IO = LaneIO<Wire, scale_dtype(T)>;
  using Units = CodedUnits<Wire>;
  constexpr bool kRotated = kIsRotated<Codec>;
  grid_dependency_wait();  // with PDL: the previous kernel's writes are visible from here on
  grid_dependents_launch();
  const int W = a.world_size, me = a.rank, t = threadIdx.x;
  const auto kind = ExchangeKind(a.kind);
  const bool reduce = kind == ExchangeKind::kReduceScatter;
  const int per_lane = T == DType::kFloat32 ? 2 : 1;  // all-gather / all-to-all: wire vectors a lane
  const uint32_t n = a.even_count;
  const size_t lanes = coded_packet_lanes(n);
  const bool aligned = a.aligned;
  auto* ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[me] + a.layout.control);
  const PacketChannel ch(a, a.layout.xp_data, ctrl->packet_epoch[blockIdx.x], ctrl->packet_prev_vectors[blockIdx.x]);
  WaitContext w{&ctrl->abort, a.record, a.timeout_ns, me};
  auto valid = [&](size_t L) { return ptrdiff_t(n) - ptrdiff_t(L * kLaneValues); };

  if (t == kPacketThreads) {
    send_packet_signature(a, ch.epoch);
    check_packet_signatures(a, ctrl, ch.epoch, w);
  } else if (t < kPacketThreads && reduce) {
    auto reduce_scatter = [&](auto units) {
      // Round i's lane: this CTA's stretches (b, b + 256, ...) of 256 / kUnits lanes, 128 lanes a round,
      // so lane L's units lie in wire vectors this CTA owns. A warp's 32 lanes are consecutive and lanes
      // come in whole warps, so every loop below runs warp-uniform (the codec's shuffles need the whole
      // warp); a warp's units are one contiguous run of 256 or 512 bytes.
      constexpr int kUnits = decltype(units)::value;
      constexpr size_t kRounds = 2 / kUnits;  // rounds a stretch takes
      auto lane_of = [&](size_t i) {
        return (blockIdx.x + size_t(kPacketBlocks) * (i / kRounds)) * (kPacketThreads * kRounds) +
               (i % kRounds) * kPacketThreads + t;
      };
      // Lane L's units from rank `src` in rank `at`'s buffer.
      auto units_at = [&](int at, int src, size_t L) {
        return a.workspaces[at] + ch.region + (ch.buffer + size_t(src) * ch.V) * 16 + L * kUnits * 8;
      };
      const uint32_t mark = Units::mark_of(ch.epoch);
      // Push: my lane of every peer's block, encoded as the slice path encodes it.
      for (size_t i = 0;; ++i) {
        const size_t L = lane_of(i);
        if (L >= lanes) break;
        for (int j = 1; j < W; ++j) {
          const int d = rank_after(me, j, W);
          float v[kLaneValues];
          load_values<T>(a.in, a.send_offset[d] + L * kLaneValues, valid(L), aligned, v);
          if constexpr (kRotated) rotate_lane(v);
          typename Wire::Packed p;
          const uint16_t scale = IO::encode(v, p);
          const uint4 u = Units::pack(p, scale, mark);
          if constexpr (kUnits == 2)
            st_volatile_v4(reinterpret_cast<uint4*>(units_at(d, me, L)), u);
          else
            st_volatile_u64(reinterpret_cast<uint64_t*>(units_at(d, me, L)), uint64_t(u.y) << 32 | u.x);
        }
      }
      // Empty the buffer of this CTA's previous call while the data flies.
      ch.empty_previous(size_t(blockIdx.x) * kPacketThreads + t, size_t(kPacketBlocks) * kPacketThreads);
      // Receive: each peer's lane decoded as the slice path decodes it, the sum in rank order in fp32,
      // my own values exact (rotated for the rotated codecs). A failed wait (timeout, abort) leaves the
      // loops running without waiting, so the warp stays whole for the shuffles; the output is then
      // unspecified and the error is reported.
      bool ok = true;
      for (size_t i = 0;; ++i) {
        const size_t L = lane_of(i);
        if (L >= lanes) break;
        float acc[kLaneValues];
        for (int src = 0; src < W; ++src) {
          float v[kLaneValues];
          if (src == me) {
            load_values<T>(a.in, a.send_offset[me] + L * kLaneValues, valid(L), aligned, v);
            if constexpr (kRotated) rotate_lane(v);
          } else {
            uint4 u = make_uint4(0u, 0u, 0u, 0u);
            if (ok) {
              if constexpr (kUnits == 2) {
                const auto* slot = reinterpret_cast<const uint4*>(units_at(me, src, L));
                auto both = [&](const uint4& x) { return Units::arrived(x.y, mark) && Units::arrived(x.w, mark); };
                ok = spin_until(w, [&] { return ld_volatile_v4(slot); }, both, u, src, ch.epoch, kPhaseExchangePackets);
              } else {
                const auto* slot = reinterpret_cast<const uint64_t*>(units_at(me, src, L));
                uint64_t x = 0;
                ok = spin_until(w, [&] { return ld_volatile_u64(slot); },
                                [&](uint64_t y) { return Units::arrived(uint32_t(y >> 32), mark); }, x, src, ch.epoch,
                                kPhaseExchangePackets);
                u = make_uint4(uint32_t(x), uint32_t(x >> 32), 0u, 0u);
              }
            }
            typename Wire::Packed p;
            const uint16_t scale = Units::unpack(u, p);
            IO::decode(p, scale, v);
          }
#pragma unroll
          for (int k = 0; k < kLaneValues; ++k) acc[k] = src == 0 ? v[k] : acc[k] + v[k];
        }
        if constexpr (kRotated) unrotate_lane(acc);
        if (ok) store_values<T>(a.out, L * kLaneValues, valid(L), aligned, acc);
      }
    };
    if constexpr (Units::kOneUnitFits) {
      if (coded_units_per_lane(Units::kLaneCodeBits, lanes) == 1) reduce_scatter(std::integral_constant<int, 1>{});
      else reduce_scatter(std::integral_constant<int, 2>{});
    } else {
      reduce_scatter(std::integral_constant<int, 2>{});
    }
  } else if (t < kPacketThreads) {
    // Round i's lane: stretch k = per_lane * i + t / span of this CTA's stretches (b, b + 256, ...),
    // each `span` lanes wide (warp-uniform loops, as above).
    const int span = kPacketThreads / per_lane;
    auto lane_of = [&](size_t i) {
      return (blockIdx.x + size_t(kPacketBlocks) * (size_t(per_lane) * i + t / span)) * span + t % span;
    };
    // Wire vector k of lane L: a warp's 32 lanes send vector k as 32 consecutive vectors, so each
    // store instruction writes whole 32-byte sectors (lane-interleaved, every store half-filled the
    // sectors it wrote across NVLink).
    auto wire_at = [&](size_t L, int k) { return (L / 32) * 32 * per_lane + size_t(k) * 32 + L % 32; };
    // A lane of segment d as the codec delivers it, rotated back.
    auto round_trip = [&](size_t at, size_t L, float v[kLaneValues]) {
      load_values<T>(a.in, at + L * kLaneValues, valid(L), aligned, v);
      if constexpr (kRotated) rotate_lane(v);
      typename Wire::Packed p;
      IO::encode_keep(v, p);
      if constexpr (kRotated) unrotate_lane(v);
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
      // My own segment, copied exact (as on the slice path).
      load_values<T>(a.in, a.send_offset[me] + L * kLaneValues, valid(L), aligned, v);
      store_values<T>(a.out, a.recv_offset[me] + L * kLaneValues, valid(L), aligned, v);
    }
    // Empty the buffer of this CTA's previous call while the data flies.
    ch.empty_previous(size_t(blockIdx.x) * kPacketThreads + t, size_t(kPacketBlocks) * kPacketThreads);
    // Receive (a failed wait runs on without waiting, as above).
    bool ok = true;
    for (size_t i = 0;; ++i) {
      const size_t L = lane_of(i);
      if (L >= lanes) break;
      for (int j = 1; j < W; ++j) {
        const int src = rank_after(me, j, W);
        uint4 q[2];
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          if (k >= per_lane || !ok) break;
          ok = per_lane == 1 ? ch.arrive(w, src, wire_at(L, k), q[k], [](const uint4& x) { return packet_arrived<T>(x); })
                             : ch.arrive(w, src, wire_at(L, k), q[k],
                                         [](const uint4& x) { return packet_arrived<DType::kFloat32>(x); });
        }
        if (ok) store_wire(a.recv_offset[src], L, q);
      }
    }
  }

  __syncthreads();
  if (t == 0) {
    ctrl->packet_epoch[blockIdx.x] = ch.epoch;
    ctrl->packet_prev_vectors[blockIdx.x] = uint32_t(coded_packet_vectors(n, reduce, T == DType::kFloat32, Units::kLaneCodeBits));
  }
}

}  // namespace qr
