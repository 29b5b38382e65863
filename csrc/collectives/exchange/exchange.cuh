// The segment exchange: all-gather, all-to-all (even or uneven) and reduce-scatter as one kernel.
//
// Every rank r holds a segment for every rank d (all-gather: the same one, its whole input; all-to-all:
// input_split d; reduce-scatter: block d of its input). A segment is cut in slices of S = blockDim * 8
// values (one lane of 8 per thread); each codec block of 32 starts at the segment's start
// (docs/codec-spec.md, "Segments"). One NVLink crossing per value:
//   push:    encode each slice straight from the user's tensor into shared memory and let the SM's
//            bulk-copy unit write it into rank d's xc_data (all-gather: one encode, W-1 copies);
//            the all-gather's own segment is encoded and decoded locally, so its output holds
//            exactly what every receiver decodes from that payload (all ranks hold the same bits);
//            the all-to-all's own segment, which no other rank receives, is copied exact.
//   announce: a release store of {epoch, signature} into d's xc_flags[group's first slice][me].
//   receive: wait for each source's flag (bounded), decode into the output (reduce-scatter: sum
//            the sources in rank order in fp32, this rank's own values exact, round once).
// Slices: CTA c handles the c-th of G near-equal contiguous ranges of every segment, on every rank
// alike (sender and receiver of a segment compute the same range), each range cut into as many
// groups; step g pushes group g, receives g-1 and then announces g, so one group's copies fly while
// the previous group is decoded. On 2 GPUs a thread takes two slices at a time (two_up; fp32: the
// reduce-scatter only).
// Where the time went at 128-512 MB (2x H200, ExchangeTimers, one slice a step): each CTA ~95% in its push and
// decode, ~1-4% waiting for flags; both wait on HBM loads, not on the link.
// Buffers: xc_data is written by peers at [src][slice], lower sources first; a sender writes rank
// d's regions only after d's exchange_done_by[sender] holds the previous exchange epoch, which d's
// last CTA writes when it has read everything of that call (ControlBlock): single-buffered, safe.
// All-to-all (even or not): the sizes cross the link before the data (a SizeRow per CTA and source);
// a receiver whose expected count disagrees with what the sender says reports a mismatch.
// Epochs: one per call, advanced by the last CTA to finish; flags of older calls hold older epochs.
// Dynamic all-to-all (kDynamic): the split sizes are rows in a device tensor. Every CTA reads them,
// sends them in its size rows with its output capacity, and computes the plan of dynamic_plan.hpp
// (bad counts send nothing, each receiver keeps its sources in rank order up to its capacity);
// CTA 0 writes the rows received from each rank and reports bad counts through the error record.
#pragma once

#include "codecs/codec_list.hpp"
#include "collectives/all_reduce/phase_timers.cuh"
#include "collectives/args.hpp"
#include "collectives/exchange/dynamic_plan.hpp"
#include "transport/bulk_copy.cuh"
#include "transport/lane_io.cuh"
#include "transport/lanes.cuh"
#include "transport/primitives.cuh"

namespace qr {

// Stage slots of the widest slice this wire codec sends at 512 threads (fp32 passthrough: 16 KB,
// two slots; every other codec fits four in 32 KB).
template <class Wire>
constexpr size_t kExchangeStageBytes = SliceLayout<Wire>::make(size_t(kTwoShotMaxThreads) * kLaneValues).total;
template <class Wire>
constexpr int kExchangeStageSlots = kExchangeStageBytes<Wire> > 8192 ? 2 : 4;
// A paired CTA stages two slices of kCrossingLanes lanes in one slot.
template <class Wire>
constexpr bool kStageHoldsPair =
    2 * SliceLayout<Wire>::make(size_t(kCrossingLanes) * kLaneValues).total <= kExchangeStageBytes<Wire>;

// Records bad dynamic all-to-all counts (the first report wins; never after a timeout's). It sets
// no abort word: the call and later calls run on, without the bad counts.
__device__ __forceinline__ void report_count_error(ControlBlock* ctrl, ErrorRecord* record, int rank, int peer,
                                                   uint32_t expected, int64_t seen, uint32_t phase) {
  if (*reinterpret_cast<volatile uint32_t*>(&ctrl->abort) != 0u) return;
  if (atomicCAS(&ctrl->count_error, 0u, 1u) != 0u) return;
  volatile ErrorRecord* r = record;
  r->rank = rank;
  r->peer = peer;
  r->block = blockIdx.x;
  r->expected = expected;
  r->seen = uint32_t(uint64_t(seen));
  r->seen_high = uint32_t(uint64_t(seen) >> 32);
  r->phase = phase;
  __threadfence_system();
  r->code = uint32_t(ErrorCode::kBadCounts);
  __threadfence_system();
}

template <class Codec, DType T, bool kDynamic = false>
__global__ void __launch_bounds__(kTwoShotMaxThreads, 2) exchange_kernel(ExchangeArgs a) {
  using Wire = WireCodec<Codec, T>;
  using IO = LaneIO<Wire, scale_dtype(T)>;
  using Packed = typename Wire::Packed;
  // Rotated codecs: lanes are rotated before they are encoded and rotated back after they are
  // decoded; reduce-scatter sums in the rotated domain (its own values rotated too) and rotates
  // the sum back once.
  constexpr bool kRotated = kIsRotated<Codec>;
  constexpr size_t kStage = kExchangeStageBytes<Wire>;
  constexpr int kSlots = kExchangeStageSlots<Wire>;
  static_assert(kStageHoldsPair<Wire>, "a stage slot must hold two crossing slices");
  __shared__ alignas(128) uint8_t s_stage[kSlots * kStage];
  __shared__ uint32_t s_count[kMaxWorldSize][kMaxWorldSize];  // [src][dst]: values in that segment
  __shared__ size_t s_base_out[kMaxWorldSize];  // where my slots start in rank d's xc_data
  __shared__ size_t s_base_in[kMaxWorldSize];   // where source s's slots start in mine
  __shared__ uint32_t s_epoch;
  __shared__ int s_failed;
  // kDynamic: every rank's capacity and bad-counts bit; where my segments start in `in` and where
  // each source's start in `out` (values)
  __shared__ uint64_t s_info[kMaxWorldSize];
  __shared__ size_t s_send_at[kMaxWorldSize], s_recv_at[kMaxWorldSize];

  grid_dependency_wait();
  grid_dependents_launch();
  ExchangeTimers timers;  // empty unless built with QR_PHASE_TIMERS
  timers.mark(ExchangeMark::kStart);
  const int W = a.world_size, me = a.rank, lane = threadIdx.x;
  const auto kind = kDynamic ? ExchangeKind::kAllToAll : ExchangeKind(a.kind);
  auto* ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[me] + a.layout.control);
  auto peer_ctrl = [&](int d) { return reinterpret_cast<ControlBlock*>(a.workspaces[d] + a.layout.control); };
  bool failed = false;  // this thread's: an abort found at the start, or a failed wait of step 1
  if (lane == 0) {
    failed = *reinterpret_cast<volatile uint32_t*>(&ctrl->abort) != 0;
    s_failed = 0;  // written by later steps' waits, after the barrier below
    const uint32_t prev = ctrl->exchange_epoch;
    s_epoch = prev >= kEpochPeriod ? 1u : prev + 1u;
  }
  // Warp 1 reads and checks this rank's counts (dynamic) while warp 0 does step 1: the count loads'
  // latency, one lane a rank, overlaps the wait for the peers (timed one after the other, they were
  // ~2300 and ~550 cycles of CTA 0 at W = 2 on H100, where the host-sized call's start took ~1000).
  if constexpr (kDynamic) {  // my rows for each rank, checked (s_count holds rows until the plan)
    __shared__ int64_t s_sent[kMaxWorldSize];
    const int k = lane - 32;
    if (k >= 0 && k < W)
      s_sent[k] = a.dyn_count_bytes == 8 ? static_cast<const int64_t*>(a.dyn_send_counts)[k]
                                         : int64_t(static_cast<const int32_t*>(a.dyn_send_counts)[k]);
    if (lane >= 32 && lane < 64) {
      __syncwarp();
      if (lane == 32) {
        const SendCountCheck c = check_send_counts(s_sent, W, a.in_rows, s_count[me]);
        s_info[me] = dynamic_info(a.capacity_rows, c.problem != CountProblem::kNone);
        size_t send_at = 0;
        for (int d = 0; d < W; ++d) {  // my input: the rows I announce, consecutive in rank order
          s_send_at[d] = send_at * a.row_values;
          send_at += s_count[me][d];
        }
        if (blockIdx.x == 0 && c.problem == CountProblem::kNegative)
          report_count_error(ctrl, a.record, me, c.index, 0u, c.value, kPhaseCountNegative);
        else if (blockIdx.x == 0 && c.problem == CountProblem::kSumAboveRows)
          report_count_error(ctrl, a.record, me, me, a.in_rows, c.value, kPhaseCountSum);
      }
    }
  } else {
    for (int i = lane; i < W * W; i += blockDim.x) {
      const int s = i / W, d = i % W;
      s_count[s][d] = a.sizes_cross ? (s == me ? a.send_count[d] : 0u) : a.even_count;
    }
  }
  WaitContext w{&ctrl->abort, a.record, a.timeout_ns, me};
  const int peer = rank_after(me, 1 + lane, W);  // threads 0..W-2: one peer each

  // 1. Every peer has finished the previous exchange call, so it no longer reads what we overwrite.
  // (An aborted communicator's wait ends at its first abort check; the barrier then returns.)
  if (lane < W - 1) {
    const uint32_t prev = ctrl->exchange_epoch;  // lane 0's value: only this call's last CTA moves it
    uint32_t seen;
    if (!spin_until(w, [&] { return ld_acquire_sys(&ctrl->exchange_done_by[peer]); },
                    [&](uint32_t v) { return v == prev; }, seen, peer, prev, kPhaseExchangeReady))
      failed = true;
  }
  if (__syncthreads_or(failed)) return;
  timers.mark(ExchangeMark::kCounts);  // (counts and step 1 now overlap: one mark for both)
  timers.mark(ExchangeMark::kPeersReady);
  const uint32_t epoch = s_epoch;

  // 2. All-to-all: send my sizes to this CTA on every peer, read theirs, check the pairs.
  if (a.sizes_cross && lane < W - 1) {
    auto* rows = reinterpret_cast<SizeRow*>(a.workspaces[peer] + a.layout.xc_sizes);
    SizeRow* out_row = rows + size_t(blockIdx.x) * W + me;
    if constexpr (kDynamic) {
      for (int d = 0; d < W; ++d) out_row->count[d] = s_count[me][d];
      out_row->info = s_info[me];
    } else {
      for (int d = 0; d < W; ++d) out_row->count[d] = a.send_count[d];
    }
    st_release_sys(&out_row->flag, flag_word(epoch, a.signature));
    SizeRow* in_row = reinterpret_cast<SizeRow*>(a.workspaces[me] + a.layout.xc_sizes) + size_t(blockIdx.x) * W + peer;
    uint64_t seen;
    if (!spin_until(w, [&] { return ld_acquire_sys(&in_row->flag); }, [&](uint64_t f) { return uint32_t(f) == epoch; },
                    seen, peer, epoch, kPhaseExchangeSizes)) {
      s_failed = 1;
    } else if (uint32_t(seen >> 32) != a.signature) {
      report_error(w, ErrorCode::kMismatch, peer, a.signature, uint32_t(seen >> 32), kPhaseExchangeSizes);
      s_failed = 1;
    } else {
      for (int d = 0; d < W; ++d) s_count[peer][d] = ld_cg_u32(&in_row->count[d]);
      if constexpr (kDynamic) {
        const uint2 info = ld_cg_u64(&in_row->info);
        s_info[peer] = uint64_t(info.y) << 32 | info.x;
      } else if (s_count[peer][me] != a.recv_count[peer]) {  // it sends what I do not expect
        report_error(w, ErrorCode::kMismatch, peer, a.recv_count[peer], s_count[peer][me], kPhaseExchangeSizes);
        s_failed = 1;
      }
    }
  }
  __syncthreads();
  if (s_failed) return;
  timers.mark(ExchangeMark::kSizes);

  // 2b. Dynamic: the plan every CTA of every rank computes alike (dynamic_plan.hpp), as values: one
  // thread a destination's column (on one thread the whole plan took ~2 us of the small call), which
  // it then turns into values in place (no other thread reads that column).
  if constexpr (kDynamic) {
    __shared__ uint32_t s_moved[kMaxWorldSize][kMaxWorldSize];  // rows, [src][dst]
    __shared__ int s_cut;
    __shared__ uint64_t s_announced;
    if (lane < W) {
      uint64_t announced;
      const int cut = fit_column(&s_count[0][0], info_capacity(s_info[lane]), W, kMaxWorldSize, lane, &s_moved[0][0],
                                 &announced);
      if (lane == me) s_cut = cut, s_announced = announced;
      for (int s = 0; s < W; ++s) s_count[s][lane] = s_moved[s][lane] * a.row_values;
    }
    __syncthreads();
    if (lane == 0) {
      size_t recv_at = 0;
      for (int s = 0; s < W; ++s) {  // my output: what each source moves, in rank order
        s_recv_at[s] = recv_at * a.row_values;
        recv_at += s_moved[s][me];
      }
      if (blockIdx.x == 0) {
        for (int s = 0; s < W; ++s) {
          const uint32_t n = s_moved[s][me];
          if (a.dyn_count_bytes == 8)
            static_cast<int64_t*>(a.dyn_recv_counts)[s] = int64_t(n);
          else
            static_cast<int32_t*>(a.dyn_recv_counts)[s] = int32_t(n);
        }
        if (s_cut < W) report_count_error(ctrl, a.record, me, s_cut, a.capacity_rows, int64_t(s_announced), kPhaseCountCapacity);
        for (int s = 0; s < W; ++s)
          if (s != me && info_bad(s_info[s])) {
            report_count_error(ctrl, a.record, me, s, 0u, 0, kPhaseCountPeer);
            break;
          }
      }
    }
  }
  // Where my segment for rank d starts in `in`, its values, and where source s's start in `out`.
  auto send_at = [&](int d) -> size_t {
    if constexpr (kDynamic) return s_send_at[d]; else return a.send_offset[d];
  };
  auto send_n = [&](int d) -> uint32_t {
    if constexpr (kDynamic) return s_count[me][d]; else return a.send_count[d];
  };
  auto recv_at = [&](int s) -> size_t {
    if constexpr (kDynamic) return s_recv_at[s]; else return a.recv_offset[s];
  };

  // 3. The plan, the same on every rank: slices per segment, this CTA's share of each, slot offsets.
  // S is a power of two (128-512 threads) and every count of slices fits 32 bits, so the plan takes
  // shifts and 32-bit divisions: with 64-bit divisions (a software loop each, ~30 of them a thread)
  // this step took ~7000 cycles of CTA 0 on 4x H100, as long as the small call's data movement.
  // An all-to-all whose sizes cross cuts slices of kCrossingLanes lanes at any CTA size, so the ranks
  // of one call may launch it with different CTA sizes (each host picks by its own bytes: 512 threads
  // fill an SM's register file for a large call, 256 leave room for the next call's CTAs under PDL);
  // a 512-thread CTA then moves two slices at a time, one a half (its `half`, `slice_lane`).
  const bool paired = a.sizes_cross && blockDim.x == 2 * kCrossingLanes;
  const int half = paired ? lane / kCrossingLanes : 0;
  const int slice_lane = paired ? lane % kCrossingLanes : lane;
  const uint32_t S = (a.sizes_cross ? kCrossingLanes : blockDim.x) * kLaneValues;
  const int s_log = __ffs(int(S)) - 1;
  const auto sl = SliceLayout<Wire>::make(S);
  // Two slices a step on 2 GPUs (aligned, where a stage slot holds two of this CTA's slices): each
  // thread issues the loads of both its lanes (held raw: RawLane) before it decodes or encodes either,
  // so twice the bytes are in flight, and the CTA stages both behind one barrier. 2x H200, 2026-11-28,
  // bf16: int4 / int4h 11-20% faster at 32-512 MB than one slice a step (from 64 MB than one slice a
  // step at 3 CTAs an SM, itself up to 13% faster than at 2; reduce-scatter int4 512 MB 396 -> 319 us,
  // all-to-all int4 32 MB 37.3 -> 30.6), fp8 4-10%, passthrough 1-7%; no slower at 2-8 MB; no spills.
  // fp32 only in the reduce-scatter (512 MB fp8 14% faster, int4h 10%, the rest even), whose all-gather
  // and all-to-all lost up to 23% with two 32-byte lanes a thread: there its code is compiled out. A
  // segment's last slices go one at a time. Not W > 2 (not measured). At 3 CTAs an SM (40 registers,
  // spills) two slices a step lost to 2 CTAs but for the 512 MB all-to-all (lab/wip/exchange-wide-ctas.patch).
  constexpr bool kTwoUpEveryKind = T != DType::kFloat32;
  const bool two_up = W == 2 && a.aligned && !paired && 2 * sl.total <= kStage &&
                      (kTwoUpEveryKind || kind == ExchangeKind::kReduceScatter);
  const uint32_t per_pass = paired || two_up ? 2u : 1u;
  auto slices = [&](int s, int d) { return uint32_t((uint64_t(s_count[s][d]) + S - 1) >> s_log); };
  // CTA c takes the c-th of G near-equal contiguous ranges of EVERY segment, so uneven segments
  // load every CTA alike: with one range of the largest segment's slice indices for all of them, a
  // router-skewed all-to-all (85/10/4/1% of each rank's rows to ranks 0-3) left the first CTAs
  // with every small segment on top of their share of the large ones (117 MB a rank on 4x H100:
  // 1135 us, NCCL 799; with a share of every segment 880). Even segments get the ranges they always had.
  // Groups: as many for every segment of this CTA, counted by the bytes its range of the largest
  // segment pushes to a peer, as the two-shot counts them (counted over all W - 1 peers, 4x H100 ran
  // the exact bf16 reduce-scatter and all-gather 10-15% slower at 32-128 MB: too many handshakes); on 2
  // GPUs the coded reduce-scatter and fp32 all-gather count the bytes it reads instead (input_groups).
  const uint32_t G = gridDim.x, c = blockIdx.x;
  struct Share {  // this CTA's slices of one segment, cut in groups
    uint32_t lo, count, per_group;
  };
  __shared__ Share s_out_share[kMaxWorldSize], s_in_share[kMaxWorldSize];  // segments (me, d), (s, me)
  __shared__ uint32_t s_groups;
  // The coded reduce-scatter (and fp32 all-gather) on 2 GPUs count groups by the input a CTA reads
  // (below); there a group of two slices a step holds whole pairs (an odd group's last slice goes alone,
  // at half the loads in flight). Every rank computes the same: no CTA size of its own here.
  const bool input_groups = W == 2 && !a.sizes_cross && Wire::kScaled &&
                            (kind == ExchangeKind::kReduceScatter || (T == DType::kFloat32 && kind == ExchangeKind::kAllGather));
  auto share_of = [&](uint32_t n, uint32_t groups) {
    const uint32_t q = n / G, r = n % G, count = q + (c < r ? 1u : 0u);
    uint32_t per_group = count ? (count + groups - 1) / groups : 1u;
    if (input_groups && two_up && per_group > 1) per_group += per_group & 1u;
    return Share{c * q + min(c, r), count, per_group};
  };
  if (lane == 0) {  // (dynamic: after its recv offsets above, the same thread, no barrier between)
    uint32_t M = 0;
    for (int s = 0; s < W; ++s)
      for (int d = 0; d < W; ++d) M = max(M, slices(s, d));
    const uint32_t largest = M / G + (c < M % G ? 1u : 0u);
    // 8-bit wire codecs (fp8, int8): a group per half the bytes (4x H100, 128-512 MB: fp8 5-15% faster with
    // twice the groups, where passthrough and int4 were not).
    constexpr size_t kByteScale = Wire::kScaled && Wire::kPlaneABytes + Wire::kPlaneBBytes >= 8 ? 2 : 1;
    uint32_t groups = uint32_t(two_shot_auto_groups(size_t(largest) * sl.total * kByteScale, !Wire::kScaled));
    if (input_groups) {
      // A group per ~32 KB of input a CTA reads, up to kTwoShotGroups; the reduce-scatter at least two
      // from 4 slices. 2x H200, 2026-11-28, against counting wire bytes (A B A B): fp32 reduce-scatter fp8
      // 128 MB 99.1 -> 80.4 us, 32 MB 30.8 -> 28.1, int4 512 MB 268 -> 234, bf16 int4 512 MB 319 -> 306;
      // fp32 all-gather fp8 128 MB 103 -> 97 (sweep). Where it was within the runs' spread (bf16 all-gather,
      // passthrough, the all-to-all, whose own segment's copy makes its push the longer half) the rule above stays.
      const uint32_t input_kb = uint32_t(size_t(largest) * S * dtype_bytes(T) >> 10);
      groups = min(max((input_kb + 16u) / 32u, 1u), uint32_t(kTwoShotGroups));
      if (kind == ExchangeKind::kReduceScatter && largest >= 4) groups = max(groups, 2u);
    }
    s_groups = a.groups ? a.groups : groups;
  }
  __syncthreads();
  const uint32_t groups = s_groups;
  // Warp 0, a lane a rank: the slot offsets and shares, and the steps this CTA runs: the most groups
  // any of its shares has (ceil(count / per_group) can be below `groups`; every step costs a barrier
  // and a wait for the bulk copies).
  __shared__ uint32_t s_steps;
  if (lane < 32) {
    uint32_t my_steps = 0;
    if (lane < W) {
      size_t out = 0, in = 0;
      for (int s = 0; s < me; ++s) out += slices(s, lane);
      for (int s = 0; s < lane; ++s) in += slices(s, me);
      s_base_out[lane] = out * sl.total;
      s_base_in[lane] = in * sl.total;
      const Share o = share_of(slices(me, lane), groups), i = share_of(slices(lane, me), groups);
      s_out_share[lane] = o;
      s_in_share[lane] = i;
      my_steps = max((o.count + o.per_group - 1) / o.per_group, (i.count + i.per_group - 1) / i.per_group);
    }
    my_steps = __reduce_max_sync(0xffffffffu, my_steps);
    if (lane == 0) s_steps = my_steps;
  }
  // Group g of a share: slices [first, end); empty where the share has fewer than g + 1 groups.
  auto first_of = [&](const Share& h, uint32_t g) { return h.lo + min(h.count, g * h.per_group); };
  auto end_of = [&](const Share& h, uint32_t g) { return h.lo + min(h.count, (g + 1) * h.per_group); };
  __syncthreads();
  const uint32_t steps = s_steps;

  timers.mark(ExchangeMark::kPlan);
  const bool vec = a.aligned;
  const size_t lane_at = size_t(slice_lane) * kLaneValues;
  // Values of my lane of slice i that lie inside a segment of n values.
  auto valid_in = [&](size_t i, uint32_t n) { return ptrdiff_t(n) - ptrdiff_t(i * S + lane_at); };
  uint8_t* local = a.workspaces[me];

  uint32_t staged = 0;
  // Once every lane is staged, thread 0 copies slice k of the slot to n_dests destinations (dest(k, j)).
  auto send_staged = [&](uint8_t* stage, int n_slices, int n_dests, auto dest) {
    fence_proxy_async_shared();
    if (lane == 0) bulk_wait_read<kSlots - 2>();  // frees the slot the next slice uses
    __syncthreads();
    if (lane == 0) {
      for (int k = 0; k < n_slices; ++k)
        for (int j = 0; j < n_dests; ++j) bulk_store(dest(k, j), stage + k * sl.total, uint32_t(sl.total));
      bulk_commit();
    }
    ++staged;
  };
  // Stages my lane of a slice (paired: my half's slice, the first n_slices halves having one) and sends.
  auto send_slices = [&](const Packed& p, uint16_t scale, int n_slices, int n_dests, auto dest) {
    uint8_t* stage = s_stage + (staged % kSlots) * kStage;
    if (half < n_slices) IO::store(stage + half * sl.total, sl, slice_lane, p, scale);
    send_staged(stage, n_slices, n_dests, dest);
  };
  // two_up: my lanes of two consecutive slices, staged side by side.
  auto send_two = [&](const Packed& p0, uint16_t scale0, const Packed& p1, uint16_t scale1, int n_dests, auto dest) {
    uint8_t* stage = s_stage + (staged % kSlots) * kStage;
    IO::store(stage, sl, slice_lane, p0, scale0);
    IO::store(stage + sl.total, sl, slice_lane, p1, scale1);
    send_staged(stage, 2, n_dests, dest);
  };
  auto slot_at = [&](int d, size_t i) { return a.workspaces[d] + a.layout.xc_data + s_base_out[d] + i * sl.total; };

  // The most slices group g takes of any of the given shares.
  auto span_of = [&](const Share* shares, uint32_t g) {
    uint32_t span = 0;
    for (int d = 0; d < W; ++d) span = max(span, end_of(shares[d], g) - first_of(shares[d], g));
    return span;
  };
  auto push = [&](uint32_t g) {
    if (kind == ExchangeKind::kAllGather) {  // one segment, encoded once, copied to every peer
      const Share h = s_out_share[me];
      const uint32_t n = a.send_count[me];
      const size_t end = end_of(h, g);
      for (size_t i = first_of(h, g); i < end; ++i) {
        if (kTwoUpEveryKind && two_up && i + 2 <= end && (i + 2) * S <= n) {
          const RawLane<T> r0 = load_raw_lane<T>(a.in, a.send_offset[me] + i * S + lane_at);
          const RawLane<T> r1 = load_raw_lane<T>(a.in, a.send_offset[me] + (i + 1) * S + lane_at);
          Packed p0, p1;
          float v[kLaneValues];
          unpack_raw_lane<T>(r0, v);
          if constexpr (kRotated) rotate_lane(v);
          const uint16_t scale0 = IO::encode_keep(v, p0);
          if constexpr (kRotated) unrotate_lane(v);
          store_values<T>(a.out, a.recv_offset[me] + i * S + lane_at, kLaneValues, vec, v);
          unpack_raw_lane<T>(r1, v);
          if constexpr (kRotated) rotate_lane(v);
          const uint16_t scale1 = IO::encode_keep(v, p1);
          if constexpr (kRotated) unrotate_lane(v);
          store_values<T>(a.out, a.recv_offset[me] + (i + 1) * S + lane_at, kLaneValues, vec, v);
          send_two(p0, scale0, p1, scale1, W - 1,
                   [&](int k2, int j) { return slot_at(rank_after(me, 1 + j, W), i + k2); });
          ++i;
          continue;
        }
        float v[kLaneValues];
        Packed p;
        load_values<T>(a.in, a.send_offset[me] + i * S + lane_at, valid_in(i, n), vec, v);
        if constexpr (kRotated) rotate_lane(v);
        const uint16_t scale = IO::encode_keep(v, p);  // v: what every receiver decodes
        if constexpr (kRotated) unrotate_lane(v);
        store_values<T>(a.out, a.recv_offset[me] + i * S + lane_at, valid_in(i, n), vec, v);
        send_slices(p, scale, 1, W - 1, [&](int, int j) { return slot_at(rank_after(me, 1 + j, W), i); });
      }
      return;
    }
    // The k-th slice of every destination's group in turn, so the copies in flight go to all peers
    // (paired: slices k and k + 1, one a half).
    const uint32_t span = span_of(s_out_share, g);
    for (uint32_t k = 0; k < span; k += per_pass) {
      for (int j = 1; j < W; ++j) {
        const int d = rank_after(me, j, W);
        const Share h = s_out_share[d];
        const size_t first = first_of(h, g) + k, end = end_of(h, g);
        if (first >= end) continue;
        const int n_slices = end - first < per_pass ? int(end - first) : int(per_pass);
        if (two_up) {
          if (n_slices == 2 && (first + 2) * S <= send_n(d)) {
            const RawLane<T> r0 = load_raw_lane<T>(a.in, send_at(d) + first * S + lane_at);
            const RawLane<T> r1 = load_raw_lane<T>(a.in, send_at(d) + (first + 1) * S + lane_at);
            Packed p0, p1;
            float v[kLaneValues];
            unpack_raw_lane<T>(r0, v);
            if constexpr (kRotated) rotate_lane(v);
            const uint16_t scale0 = IO::encode(v, p0);
            unpack_raw_lane<T>(r1, v);
            if constexpr (kRotated) rotate_lane(v);
            const uint16_t scale1 = IO::encode(v, p1);
            send_two(p0, scale0, p1, scale1, 1, [&](int k2, int) { return slot_at(d, first + k2); });
          } else {  // a segment's last slices: one at a time, the tail's lanes loaded in part
            for (int k2 = 0; k2 < n_slices; ++k2) {
              float v[kLaneValues];
              Packed p;
              load_values<T>(a.in, send_at(d) + (first + k2) * S + lane_at, valid_in(first + k2, send_n(d)), vec, v);
              if constexpr (kRotated) rotate_lane(v);
              const uint16_t scale = IO::encode(v, p);
              send_slices(p, scale, 1, 1, [&](int, int) { return slot_at(d, first + k2); });
            }
          }
          continue;
        }
        const size_t i = first + half;  // past the end (a paired half without a slice): nothing loaded
        float v[kLaneValues];
        Packed p;
        load_values<T>(a.in, send_at(d) + i * S + lane_at, half < n_slices ? valid_in(i, send_n(d)) : 0, vec, v);
        if constexpr (kRotated) rotate_lane(v);
        const uint16_t scale = IO::encode(v, p);
        send_slices(p, scale, n_slices, 1, [&](int k2, int) { return slot_at(d, first + k2); });
      }
      const Share h = s_out_share[me];
      const size_t i = first_of(h, g) + k + half, own_end = end_of(h, g);
      if (kind == ExchangeKind::kAllToAll) {  // my own segment: never crosses, copied exact
        const uint32_t n = send_n(me);
        if (kTwoUpEveryKind && two_up && i + 2 <= own_end && (i + 2) * S <= n) {
          const RawLane<T> r0 = load_raw_lane<T>(a.in, send_at(me) + i * S + lane_at);
          const RawLane<T> r1 = load_raw_lane<T>(a.in, send_at(me) + (i + 1) * S + lane_at);
          store_raw_lane<T>(a.out, recv_at(me) + i * S + lane_at, r0);
          store_raw_lane<T>(a.out, recv_at(me) + (i + 1) * S + lane_at, r1);
          continue;
        }
        for (size_t i2 = i; i2 < min(i + (two_up ? 2 : 1), own_end); ++i2) {
          float v[kLaneValues];
          load_values<T>(a.in, send_at(me) + i2 * S + lane_at, valid_in(i2, n), vec, v);
          store_values<T>(a.out, recv_at(me) + i2 * S + lane_at, valid_in(i2, n), vec, v);
        }
      }
    }
  };
  // A group's flag lives at the slot of its first slice (segments' ranges never overlap).
  auto announce = [&](uint32_t g) {
    if (lane != 0) return;
    release_bulk_copies_sys();
    for (int j = 1; j < W; ++j) {
      const int d = rank_after(me, j, W);
      const Share h = s_out_share[d];
      const size_t first = first_of(h, g);
      if (first < end_of(h, g))
        st_relaxed_sys(reinterpret_cast<uint64_t*>(a.workspaces[d] + a.layout.xc_flags) + first * W + me,
                       flag_word(epoch, a.signature));
    }
  };
  auto receive = [&](uint32_t g) {
    if (lane < W - 1) {
      const Share h = s_in_share[peer];
      const size_t first = first_of(h, g);
      if (first < end_of(h, g)) {
        const uint64_t* flag = reinterpret_cast<const uint64_t*>(local + a.layout.xc_flags) + first * W + peer;
        uint64_t seen;
        if (!spin_until(w, [&] { return ld_acquire_sys(flag); }, [&](uint64_t f) { return uint32_t(f) == epoch; },
                        seen, peer, epoch, kPhaseExchangeData)) {
          s_failed = 1;
        } else if (uint32_t(seen >> 32) != a.signature) {
          report_error(w, ErrorCode::kMismatch, peer, a.signature, uint32_t(seen >> 32), kPhaseExchangeData);
          s_failed = 1;
        }
      }
    }
    __syncthreads();
    if (s_failed) return false;
    timers.lap(ExchangeLap::kWait);
    auto decode_from = [&](int s, size_t i, float v[kLaneValues]) {
      Packed p;
      const uint16_t scale = IO::load(local + a.layout.xc_data + s_base_in[s] + i * sl.total, sl, slice_lane, p, nullptr);
      IO::decode(p, scale, v);
    };
    if (kind == ExchangeKind::kReduceScatter) {  // every source's segment has my block's size
      const Share h = s_in_share[me];
      const uint32_t n = a.recv_count[me];
      const size_t end = end_of(h, g);
      for (size_t i = first_of(h, g); i < end; ++i) {
        if (two_up && i + 2 <= end && (i + 2) * S <= n) {  // W = 2: my values and one peer's
          const RawLane<T> r0 = load_raw_lane<T>(a.in, a.send_offset[me] + i * S + lane_at);
          const RawLane<T> r1 = load_raw_lane<T>(a.in, a.send_offset[me] + (i + 1) * S + lane_at);
          const uint8_t* from = local + a.layout.xc_data + s_base_in[1 - me];
          Packed p0, p1;
          const uint16_t scale0 = IO::load(from + i * sl.total, sl, slice_lane, p0, nullptr);
          const uint16_t scale1 = IO::load(from + (i + 1) * sl.total, sl, slice_lane, p1, nullptr);
          auto sum_store = [&](const RawLane<T>& raw, const Packed& p, uint16_t scale, size_t at) {
            float mine[kLaneValues], theirs[kLaneValues];
            unpack_raw_lane<T>(raw, mine);
            if constexpr (kRotated) rotate_lane(mine);
            IO::decode(p, scale, theirs);
#pragma unroll
            for (int k = 0; k < kLaneValues; ++k) mine[k] = me == 0 ? mine[k] + theirs[k] : theirs[k] + mine[k];
            if constexpr (kRotated) unrotate_lane(mine);
            store_values<T>(a.out, at, kLaneValues, vec, mine);
          };
          sum_store(r0, p0, scale0, i * S + lane_at);
          sum_store(r1, p1, scale1, (i + 1) * S + lane_at);
          ++i;
          continue;
        }
        float acc[kLaneValues];
        for (int s = 0; s < W; ++s) {
          float v[kLaneValues];
          if (s == me) {  // my own values never cross the link: added exactly
            load_values<T>(a.in, a.send_offset[me] + i * S + lane_at, valid_in(i, n), vec, v);
            if constexpr (kRotated) rotate_lane(v);
          } else {
            decode_from(s, i, v);
          }
#pragma unroll
          for (int k = 0; k < kLaneValues; ++k) acc[k] = s == 0 ? v[k] : acc[k] + v[k];
        }
        if constexpr (kRotated) unrotate_lane(acc);
        store_values<T>(a.out, i * S + lane_at, valid_in(i, n), vec, acc);
      }
      return true;
    }
    const uint32_t span = span_of(s_in_share, g);
    for (uint32_t k = half; k < span; k += per_pass) {  // (paired: the halves apart, no barrier here)
      for (int j = 1; j < W; ++j) {
        const int s = rank_after(me, j, W);
        const Share h = s_in_share[s];
        const size_t i = first_of(h, g) + k, end = end_of(h, g);
        if (i >= end) continue;
        if (kTwoUpEveryKind && two_up && i + 2 <= end) {  // (per_pass 2: this k and the next)
          const uint8_t* from = local + a.layout.xc_data + s_base_in[s];
          Packed p0, p1;
          const uint16_t scale0 = IO::load(from + i * sl.total, sl, slice_lane, p0, nullptr);
          const uint16_t scale1 = IO::load(from + (i + 1) * sl.total, sl, slice_lane, p1, nullptr);
          float v[kLaneValues];
          IO::decode(p0, scale0, v);
          if constexpr (kRotated) unrotate_lane(v);
          store_values<T>(a.out, recv_at(s) + i * S + lane_at, valid_in(i, s_count[s][me]), vec, v);
          IO::decode(p1, scale1, v);
          if constexpr (kRotated) unrotate_lane(v);
          store_values<T>(a.out, recv_at(s) + (i + 1) * S + lane_at, valid_in(i + 1, s_count[s][me]), vec, v);
          continue;
        }
        float v[kLaneValues];
        decode_from(s, i, v);
        if constexpr (kRotated) unrotate_lane(v);
        store_values<T>(a.out, recv_at(s) + i * S + lane_at, valid_in(i, s_count[s][me]), vec, v);
      }
    }
    return true;
  };

  bool ok = true;
  timers.lap_start();
  for (uint32_t step = 0; ok && step <= steps; ++step) {
    if (step < steps) push(step);
    timers.lap(ExchangeLap::kPush);
    if (step >= 1) ok = receive(step - 1);
    timers.lap(ExchangeLap::kDecode);
    if (step < steps) announce(step);  // after the receive: the copies flew while it decoded
    timers.lap(ExchangeLap::kAnnounce);
  }
  if (lane == 0) bulk_wait_all();  // a failed wait may leave copies reading shared memory
  if (!ok) return;
  timers.mark(ExchangeMark::kMoved);

  // The last CTA advances the epoch and tells every peer this rank read everything of the call.
  __syncthreads();
  if (lane == 0) {
    __threadfence();
    if (atomicAdd(&ctrl->exchange_finished, 1u) == gridDim.x - 1) {
      timers.mark_last();
      ctrl->exchange_finished = 0;
      ctrl->exchange_epoch = epoch;
      __threadfence_system();  // one fence for every peer's word (primitives.cuh: st_relaxed_sys)
      for (int j = 1; j < W; ++j) st_relaxed_sys(&peer_ctrl(rank_after(me, j, W))->exchange_done_by[me], epoch);
    }
  }
  timers.mark(ExchangeMark::kEnd);
  timers.report(me, kDynamic ? 1 : 0);
}

}  // namespace qr
