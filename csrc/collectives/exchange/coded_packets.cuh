// The segment exchange's small-message path for the scaled codecs (fp8, int8, int6, int4, fp4 and
// the rotated int4h / int6h): reduce-scatter, all-gather and even all-to-all on the exact path's
// packet channel (packets.cuh): one crossing, no flag, no barrier. On 4x H100 (2026-11-27) the slice
// path took 22-28 us for any codec at 8-512 KB and the exact packets 3-6; this path 4.4-9.3.
//
// What crosses is the codec's own bytes, and the result is the slice path's bits (and the CPU twin's)
// by construction: each lane's codes and its block's 16-bit scale travel in 8-byte units {32 payload
// bits, the call's 15-bit mark, 16 payload bits} (NCCL's LL line: an 8-byte store arrives whole, so a
// unit whose mark is this call's holds this call's payload; an emptied slot's all-ones mark is no
// call's). Two units a lane (one 16-byte store); int4 / fp4 / int4h one, once a thread takes more than
// one lane either way. The receiver decodes each lane as the slice path does: all-gather and all-to-all
// rotate it back and store it in T (the all-gather sender's own block as every receiver decodes it, the
// all-to-all's own segment copied exact); reduce-scatter sums in rank order in fp32, its own values
// exact (in the rotated domain for the rotated codecs). One exception, coded_lane_as_values: the
// rotated codecs' all-gather / all-to-all of 16-bit tensors send lanes as round-tripped values.
// Lanes: a thread takes whole lanes of 8 values, 4 consecutive threads a codec block of 32 (its scale
// by warp shuffles, as the slice path); blocks start at each segment's start and a segment crosses
// as whole warps' worth of lanes, padded with zeros (a rotated tail block's padding takes part in its
// sum, as in the twin's; the padding past the tail block is never stored). Wire vector q still
// belongs to CTA (q / kPacketThreads) % kPacketBlocks, as on the exact path, so both paths share the
// channel's buffers and epochs: a CTA's 128 threads take a stretch of 128 lanes a round with two units
// a lane, and half a stretch of 256 with one.
#pragma once
#include "codecs/codec_list.hpp"
#include "collectives/exchange/packets.cuh"
#include "transport/lane_io.cuh"

namespace qr {

// A lane's wire units (see the top): Packed codes and the block's scale in kUnits 8-byte units, each
// {lo: 32 payload bits, hi: mark << 16 | 16 payload bits}.
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

// Where a lane crosses as its round-tripped values in T instead (one 16-byte vector, which the
// receiver only stores): the rotated codecs' all-gather and all-to-all of 16-bit tensors at two units
// a lane, where the wire is 16 bytes either way and rotating back on every receiver, a lane at a
// time, cost more than it saved (2x H200, 2026-11-28: int4h / int6h all-gather and all-to-all at
// 128-512 KB 1.1-1.3x slower in units; fp32 tensors, one unit a lane and the other codecs were even or
// faster in units, fp32 all-gather and all-to-all up to 1.5x).
QR_HD constexpr bool coded_lane_as_values(bool reduce_scatter, bool fp32, bool rotated, int units_per_lane) {
  return !reduce_scatter && !fp32 && rotated && units_per_lane == 2;
}

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
  } else if (t < kPacketThreads) {
    auto exchange_units = [&](auto units) {
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
      auto send_units = [&](int d, size_t L, const uint4& u) {
        if constexpr (kUnits == 2)
          st_volatile_v4(reinterpret_cast<uint4*>(units_at(d, me, L)), u);
        else
          st_volatile_u64(reinterpret_cast<uint64_t*>(units_at(d, me, L)), uint64_t(u.y) << 32 | u.x);
      };
      // Push: my lane of every peer's segment (all-gather: the same one, its own output as every receiver
      // decodes it; all-to-all: its own segment copied exact), encoded as the slice path encodes it.
      for (size_t i = 0;; ++i) {
        const size_t L = lane_of(i);
        if (L >= lanes) break;
        float v[kLaneValues];
        typename Wire::Packed p;
        if (kind == ExchangeKind::kAllGather) {
          load_values<T>(a.in, L * kLaneValues, valid(L), aligned, v);
          if constexpr (kRotated) rotate_lane(v);
          const uint4 u = Units::pack(p, IO::encode_keep(v, p), mark);
          for (int j = 1; j < W; ++j) send_units(rank_after(me, j, W), L, u);
          if constexpr (kRotated) unrotate_lane(v);
          store_values<T>(a.out, a.recv_offset[me] + L * kLaneValues, valid(L), aligned, v);
          continue;
        }
        for (int j = 1; j < W; ++j) {
          const int d = rank_after(me, j, W);
          load_values<T>(a.in, a.send_offset[d] + L * kLaneValues, valid(L), aligned, v);
          if constexpr (kRotated) rotate_lane(v);
          const uint16_t scale = IO::encode(v, p);
          send_units(d, L, Units::pack(p, scale, mark));
        }
        if (kind == ExchangeKind::kAllToAll) {
          load_values<T>(a.in, a.send_offset[me] + L * kLaneValues, valid(L), aligned, v);
          store_values<T>(a.out, a.recv_offset[me] + L * kLaneValues, valid(L), aligned, v);
        }
      }
      // Empty the buffer of this CTA's previous call while the data flies.
      ch.empty_previous(size_t(blockIdx.x) * kPacketThreads + t, size_t(kPacketBlocks) * kPacketThreads);
      // Receive: each peer's lane decoded as the slice path decodes it. A failed wait (timeout, abort)
      // leaves the loops running without waiting, so the warp stays whole for the shuffles; the output
      // is then unspecified and the error is reported.
      bool ok = true;
      // What lane L of `src` holds now (one unit: its x, y), and whether that is this call's.
      auto look = [&](int src, size_t L) {
        if constexpr (kUnits == 2) {
          return ld_volatile_v4(reinterpret_cast<const uint4*>(units_at(me, src, L)));
        } else {
          const uint64_t x = ld_volatile_u64(reinterpret_cast<const uint64_t*>(units_at(me, src, L)));
          return make_uint4(uint32_t(x), uint32_t(x >> 32), 0u, 0u);
        }
      };
      auto arrived = [&](const uint4& u) {
        return Units::arrived(u.y, mark) && (kUnits == 1 || Units::arrived(u.w, mark));
      };
      // Lane L of `src` decoded, from `u` (an earlier look) once it holds this call's units.
      auto decoded_from = [&](int src, size_t L, uint4 u, float v[kLaneValues]) {
        if (ok && !arrived(u))
          ok = spin_until(w, [&] { return look(src, L); }, arrived, u, src, ch.epoch, kPhaseExchangePackets);
        typename Wire::Packed p;
        const uint16_t scale = Units::unpack(u, p);
        IO::decode(p, scale, v);
      };
      if (!reduce) {
        // Each peer's lane rotated back, in place. The next (lane, peer)'s units are loaded before this
        // one is decoded, so that load flies during the decode and the rotation back.
        size_t i = 0, L = lane_of(0);
        int j = 1;
        uint4 ahead = L < lanes ? look(rank_after(me, 1, W), L) : make_uint4(0u, 0u, 0u, 0u);
        while (L < lanes) {
          const int src = rank_after(me, j, W);
          const uint4 u = ahead;
          size_t next_L = L;
          int next_j = j + 1;
          if (next_j == W) next_j = 1, next_L = lane_of(++i);
          if (ok && next_L < lanes) ahead = look(rank_after(me, next_j, W), next_L);
          float v[kLaneValues];
          decoded_from(src, L, u, v);
          if constexpr (kRotated) unrotate_lane(v);
          if (ok) store_values<T>(a.out, a.recv_offset[src] + L * kLaneValues, valid(L), aligned, v);
          L = next_L, j = next_j;
        }
        return;
      }
      // The sum in rank order in fp32, my own values exact (rotated for the rotated codecs).
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
            decoded_from(src, L, look(src, L), v);
          }
#pragma unroll
          for (int k = 0; k < kLaneValues; ++k) acc[k] = src == 0 ? v[k] : acc[k] + v[k];
        }
        if constexpr (kRotated) unrotate_lane(acc);
        if (ok) store_values<T>(a.out, L * kLaneValues, valid(L), aligned, acc);
      }
    };
    // The rotated codecs' all-gather and all-to-all of 16-bit tensors at two units a lane: each lane
    // crosses as the codec round-trips it, rotated back and rounded to T (one vector, as on the exact
    // path), so the receivers only store it (coded_lane_as_values: the wire is as large either way).
    auto exchange_values = [&] {
      auto lane_of = [&](size_t i) { return (blockIdx.x + size_t(kPacketBlocks) * i) * kPacketThreads + t; };
      auto round_trip = [&](size_t at, size_t L, float v[kLaneValues]) {
        load_values<T>(a.in, at + L * kLaneValues, valid(L), aligned, v);
        rotate_lane(v);
        typename Wire::Packed p;
        IO::encode_keep(v, p);
        unrotate_lane(v);
      };
      // Push: my lane of every peer's segment (all-gather: the same one, and my own block in place;
      // all-to-all: my own segment copied exact).
      for (size_t i = 0;; ++i) {
        const size_t L = lane_of(i);
        if (L >= lanes) break;
        float v[kLaneValues];
        if (kind == ExchangeKind::kAllGather) {
          round_trip(0, L, v);
          const uint4 q = packet_without_sentinel<T>(pack_lane<T>(v));
          for (int j = 1; j < W; ++j) ch.send(rank_after(me, j, W), L, q);
          store_packet<T>(a.out, a.recv_offset[me], L, n, aligned, q);
          continue;
        }
        for (int j = 1; j < W; ++j) {
          const int d = rank_after(me, j, W);
          round_trip(a.send_offset[d], L, v);
          ch.send(d, L, packet_without_sentinel<T>(pack_lane<T>(v)));
        }
        load_values<T>(a.in, a.send_offset[me] + L * kLaneValues, valid(L), aligned, v);
        store_values<T>(a.out, a.recv_offset[me] + L * kLaneValues, valid(L), aligned, v);
      }
      ch.empty_previous(size_t(blockIdx.x) * kPacketThreads + t, size_t(kPacketBlocks) * kPacketThreads);
      bool ok = true;  // (a failed wait runs on without waiting, as above)
      for (size_t i = 0;; ++i) {
        const size_t L = lane_of(i);
        if (L >= lanes) break;
        for (int j = 1; j < W; ++j) {
          const int src = rank_after(me, j, W);
          uint4 q;
          if (ok) ok = ch.arrive(w, src, L, q, [](const uint4& x) { return packet_arrived<T>(x); });
          if (ok) store_packet<T>(a.out, a.recv_offset[src], L, n, aligned, q);
        }
      }
    };
    const int units = Units::kOneUnitFits ? coded_units_per_lane(Units::kLaneCodeBits, lanes) : 2;
    if (coded_lane_as_values(reduce, T == DType::kFloat32, kRotated, units)) {
      if constexpr (kRotated && T != DType::kFloat32) exchange_values();
    } else if constexpr (Units::kOneUnitFits) {
      if (units == 1) exchange_units(std::integral_constant<int, 1>{});
      else exchange_units(std::integral_constant<int, 2>{});
    } else {
      exchange_units(std::integral_constant<int, 2>{});
    }
  }

  __syncthreads();
  if (t == 0) {
    ctrl->packet_epoch[blockIdx.x] = ch.epoch;
    ctrl->packet_prev_vectors[blockIdx.x] =
        uint32_t(coded_packet_vectors(n, Units::kLaneCodeBits));
  }
}

}  // namespace qr
