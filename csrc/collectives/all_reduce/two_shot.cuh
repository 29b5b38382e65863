// Two-shot all-reduce with an inline codec: reduce-scatter, then all-gather, through peer memory.
//
// The message is cut into tiles of W slices (slice = blockDim * 8 values, one lane of 8 per
// thread); rank r owns slice r of every tile. A CTA owns a contiguous range of tiles, cut
// in a.groups groups (default: by bytes, at most kTwoShotGroups), software-pipelined, one
// signal/wait per group and phase (flag slot = the group's first tile):
//   1. scatter: encode my values of slice d and push them into rank d's rs_data[me][t];
//      signal rs_flags[slot][me] on each peer.
//   2. reduce:  wait for rs_flags[slot][*], decode every peer's contribution, add my own values
//      exactly (they never cross the link: 8-19% less codec time and a lower error; the result
//      then depends on who owns what, a rule the CPU twin shares: two_shot_layout.hpp), sum in
//      fp32 in rank order, encode the sum once, store into the output what that payload decodes
//      to (the integer codecs know it from their rounding; the others decode: the owner holds
//      exactly what everyone else gets), push the payload to every peer's ag_data[me][t];
//      signal ag_flags.
//   3. gather:  wait for ag_flags[slot][*], decode each owner's payload into the output.
// Pushes: every slice is staged in shared memory and sent by the SM's bulk-copy unit.
// The same CTA index handles the same tiles on every rank (same grid, same message).
// Flags hold the call's epoch (one per call, advanced by the last CTA to finish); a stale flag
// holds an older one. Single-buffered data is safe: a rank enters call k+1 only after every peer
// broadcast its slices of call k, i.e. after the peers finished reading what call k+1 overwrites.
// Peer-written data is read with ld.cg (L2), never through a possibly stale L1 line.
// The lossless codec's slices go packed or raw (a CTA vote); thread 0 writes the form into the
// destination's rs_forms/ag_forms word beside the slot before the flag, whose release orders it.
#pragma once

#include <type_traits>

#include "codecs/codec_list.hpp"
#include "collectives/all_reduce/phase_timers.cuh"
#include "collectives/all_reduce/rmsnorm_row.cuh"
#include "collectives/args.hpp"
#include "transport/bulk_copy.cuh"
#include "transport/lane_io.cuh"
#include "transport/lanes.cuh"
#include "transport/primitives.cuh"

namespace qr {

constexpr int kStageSlots = 4;  // copies (of kParts slices each) in flight per CTA through the bulk-copy unit
// Widest slice: 16-bit values. Slots stay 128-byte aligned, and at 512 threads so do the slices'
// destinations (slice sizes are multiples of 128 there; 16 at fewer threads): a 16-byte shift
// between source and destination made the bulk copies ~25% slower (2x H200).
constexpr size_t kStageBytes = size_t(kTwoShotMaxThreads) * kLaneValues * 2;
// Slices per bulk copy on 2 GPUs where a stage slot holds several: two measured 1.5-2.5% faster
// than one at 1 GiB for int4, three or four (10 KB slots) no faster than two (2x H200).
constexpr uint32_t kMaxSlicesPerCopy = 2;

// At least 4 CTAs of 512 per SM (<= 32 registers; the W=2 512-thread codec kernels do not spill,
// the W=2 any-size ones 4 bytes): a codec
// kernel's time fell with every warp added (1 GiB int4: 66/132/264 CTAs of 512 -> 3579/1958/1373
// us, 3 per SM 1283 us), and once every slice went by bulk copy, 4 per SM beat 3 by ~2% (int4
// 1072 -> 1053 us; 2x H200).
// kWorld: the world size as a compile-time constant (2, 4, 8: the rank loops unroll and their
// index arithmetic folds), or 0 for any other size (read from the arguments).
// The lossless kernels need more than 32 registers (a lane's raw values stay live across the slice's
// vote, for the rare raw restage): 3 per SM, which also measured faster than 4 (2x H200). So do the
// rotated ones (the transform's values and shuffles): at 4 per SM they spilled 16-48 bytes, at 3
// they take 40 registers and no stack, 4-8% faster from 64 MB on 2x H100.
// The lossless W = 2 kernel of any CTA size (below ~4.3 MB, CTAs of 128-256 threads) gets 2 an SM:
// 56 registers, where at 3 it took 40 and 72 bytes of stack; 2x H200, 512K-4M 7-14% faster (4M 24.1 ->
// 20.7 us). The rotated ones gained at 4M (-5..-7%) and lost at 1-2M (+1..+5%), the others nothing.
template <class Codec, int kWorld, int kThreads>
constexpr int kTwoShotCtasPerSm = std::is_same_v<Codec, LosslessCodec> ? (kWorld == 2 && kThreads == 0 ? 2 : 3)
                                  : kIsRotated<Codec> ? 3 : 4;
// kThreads: the CTA size as a compile-time constant (the slice layout and strides fold), or 0 for
// blockDim.x. kResidual: each output lane stored as to_T(to_T(sum) + residual) (AllReduceArgs::residual,
// the add + RMSNorm epilogue's add); a kernel of its own, as a runtime branch spilled 8-24 bytes in
// the plain kernels (a residual lane live at the stores).
template <class Codec, DType D, int kWorld, int kThreads = 0, bool kResidual = false>
__global__ void __launch_bounds__(kTwoShotMaxThreads, (kTwoShotCtasPerSm<Codec, kWorld, kThreads>)) two_shot_kernel(AllReduceArgs a) {
  using IO = LaneIO<Codec, D>;
  using Packed = typename Codec::Packed;
  constexpr bool kPassthrough = std::is_same_v<Codec, PassthroughCodec>;  // groups and step order differ
  constexpr bool kLossless = std::is_same_v<Codec, LosslessCodec>;        // slices packed or raw
  // Rotated codecs (int4h, int6h) sum in the rotated domain: every encoded lane is rotated first,
  // the owner rotates its own values too, and each output lane is rotated back once.
  constexpr bool kRotated = kIsRotated<Codec>;
  // On 2 GPUs, where a stage slot holds two slices (int4, fp4, int6 at 512 threads), consecutive
  // tiles' slices for the same owner are staged side by side and sent as one copy: they lie side
  // by side at the owner too. One fence, barrier and copy per two slices.
  constexpr size_t kFixedSlice = SliceLayout<Codec>::make(size_t(kThreads > 0 ? kThreads : 1) * kLaneValues).total;
  // (The launch guarantees blockDim.x == kThreads when kThreads > 0: dispatch.cu picks it.)
  constexpr uint32_t kParts =
      kWorld == 2 && kThreads > 0 && !kLossless && kStageBytes / kFixedSlice >= kMaxSlicesPerCopy
          ? kMaxSlicesPerCopy
          : 1u;
  static_assert(kParts * kFixedSlice <= kStageBytes, "the slices of one copy must fit a stage slot");
  grid_dependency_wait();
  grid_dependents_launch();
  auto* ctrl = reinterpret_cast<ControlBlock*>(a.workspaces[a.rank] + a.layout.control);
  // Slices go out through the SM's bulk-copy unit: one large write per slice instead of a 4-8 byte
  // store per lane and a 2-byte one per scale keeps NVLink busier (2x H200, 1 GiB, against plain
  // stores: passthrough -3-6%, int4 -2%, fp4 -6%, int6/int8/fp8 -5-6%),
  // and warps never stall on a busy link.
  __shared__ alignas(128) uint8_t s_stage[kStageSlots * kStageBytes];  // outgoing slices
  __shared__ uint32_t s_epoch;
  __shared__ int s_failed;
  if (threadIdx.x == 0) {
    s_failed = *reinterpret_cast<volatile uint32_t*>(&ctrl->abort) != 0;
    uint32_t prev = ctrl->two_shot_epoch;
    s_epoch = prev >= kEpochPeriod ? 1u : prev + 1u;
  }
  __syncthreads();
  if (s_failed) return;
  const uint32_t epoch = s_epoch;
  PhaseTimers timers;  // empty unless built with QR_PHASE_TIMERS
  timers.begin();
  const int W = kWorld > 0 ? kWorld : a.world_size, me = a.rank, lane = threadIdx.x;
  const size_t slice_values = size_t(kThreads > 0 ? kThreads : blockDim.x) * kLaneValues;
  const size_t tile_values = slice_values * W;
  const size_t num_tiles = (a.numel + tile_values - 1) / tile_values;
  const auto sl = SliceLayout<Codec>::make(slice_values);
  const auto* in = static_cast<const uint16_t*>(a.in);
  auto* out = static_cast<uint16_t*>(a.out);
  uint8_t* local = a.workspaces[me];
  const auto* rs_flags = reinterpret_cast<const uint64_t*>(local + a.layout.rs_flags);
  const auto* ag_flags = reinterpret_cast<const uint64_t*>(local + a.layout.ag_flags);
  WaitContext w{&ctrl->abort, a.record, a.timeout_ns, me};
  // The j-th rank after me in ring order, j = 1..W-1: every peer once, in the same order everywhere.
  // Same rule as common.cuh's rank_after(); written out here because calling that changed this
  // kernel's generated code (its PTX), and the kernel's timings were measured with this form.
  auto rank_after = [&](int j) { return me + j < W ? me + j : me + j - W; };
  // Threads 0..W-2 each wait for one peer's flag.
  const int peer = rank_after(1 + lane);
  // A flag carries the sender's call signature beside the epoch: a peer that made a different
  // call (size, dtype, codec, algorithm) is reported, never decoded.
  auto wait_flags = [&](const uint64_t* flags, size_t t, uint32_t phase) {
    if (lane < W - 1) {
      uint64_t seen;
      if (!spin_until(w, [&] { return ld_acquire_sys(flags + t * W + peer); },
                      [&](uint64_t f) { return uint32_t(f) == epoch; }, seen, peer, epoch, phase)) {
        s_failed = 1;
      } else if (uint32_t(seen >> 32) != a.signature) {
        report_error(w, ErrorCode::kMismatch, peer, a.signature, uint32_t(seen >> 32), phase);
        s_failed = 1;
      }
    }
    __syncthreads();
    return !s_failed;
  };
  // Outgoing slices are staged in shared memory and pushed by the SM's bulk-copy unit (thread 0
  // issues), each copy (kParts slices) as one contiguous write to every destination.
  uint32_t staged = 0;  // copies staged by this CTA so far; slot = staged % kStageSlots
  // dest_slot(j) / form_slot(j): the j-th destination's slot and (lossless only) its form word.
  // With kParts > 1, parts 0.. are staged side by side (flush = false) and the flush sends them
  // to the first part's destination slot in one copy.
  auto send_slice = [&](const Packed& p, uint16_t scale, auto dest_slot, auto form_slot, int n_dests,
                        uint32_t part = 0, bool flush = true) {
    uint8_t* stage = s_stage + (staged % kStageSlots) * kStageBytes;
    uint32_t bytes = uint32_t(sl.total) * (part + 1);
    const long long t = timers.now();
    if constexpr (kLossless) {
      // Packed optimistically; the barrier's vote says whether any lane did not fit (then the
      // whole slice is restaged raw: rare on real data, one more barrier).
      IO::store(stage, sl, lane, p, scale, false);
      fence_proxy_async_shared();
      if (lane == 0) bulk_wait_read<kStageSlots - 2>();  // frees the slot the next slice uses
      const bool raw = __syncthreads_or(scale & IO::kNoFit);
      if (raw) {
        IO::store(stage, sl, lane, p, scale, true);
        fence_proxy_async_shared();
        __syncthreads();
      }
      if (lane == 0)  // plain stores: the flag's release (announce) orders them before it
        for (int j = 0; j < n_dests; ++j) *form_slot(j) = raw ? kSliceRaw : kSlicePacked;
      bytes = uint32_t(raw ? sl.raw : sl.packed);
    } else {
      IO::store(stage + part * sl.total, sl, lane, p, scale);
      if (!flush) return;  // (with QR_PHASE_TIMERS, kSend then counts only the flushing part)
      fence_proxy_async_shared();
      if (lane == 0) bulk_wait_read<kStageSlots - 2>();  // frees the slot the next slice uses
      __syncthreads();
    }
    timers.add(Phase::kSend, t);
    if (lane == 0) {
      for (int j = 0; j < n_dests; ++j) bulk_store(dest_slot(j), stage, bytes);
      bulk_commit();
    }
    ++staged;
  };
  // Tells every peer that what this CTA sent so far for the group whose flag slot is tile t landed
  // in `region`'s data: thread 0 issued every bulk copy, waits for them, then releases the flag.
  auto announce = [&](size_t region, size_t t) {
    if (lane == 0) {
      release_bulk_copies_sys();
      for (int j = 1; j < W; ++j) {
        st_relaxed_sys(reinterpret_cast<uint64_t*>(a.workspaces[rank_after(j)] + region) + t * W + me,
                       flag_word(epoch, a.signature));
      }
    }
  };

  // A CTA's tiles are cut into a few groups with one signal/wait per group and phase (flag slot =
  // the group's first tile), and the phases are software-pipelined: group g+1 is scattered before
  // group g is reduced and g-1 gathered, so NVLink transfers overlap codec work and waits. (A
  // handshake per tile put two round trips on every tile's critical path: 2x slower at 1 GB.)
  const size_t lane_offset = size_t(lane) * kLaneValues;
  // Each CTA owns a contiguous range of tiles, and the data regions are laid out [src][tile], so
  // the slices a CTA sends one owner for consecutive tiles are consecutive in the owner's memory.
  const size_t tiles_q = num_tiles / gridDim.x, tiles_r = num_tiles % gridDim.x;
  const size_t my_tiles = tiles_q + (blockIdx.x < tiles_r ? 1 : 0);
  const size_t tile_base = blockIdx.x * tiles_q + min(size_t(blockIdx.x), tiles_r);
  // Groups = 0: chosen by the bytes this CTA pushes to each peer per phase (two_shot_auto_groups,
  // measured). Per peer, not in all: on 4x H200 the passthrough at 16-64 MB was 3-9% faster in one
  // group than in the 5-6 its bytes to all peers gave; W = 2 is unchanged (one peer).
  const size_t push_bytes = my_tiles * sl.total;
  const size_t n_groups = a.groups > 0 ? size_t(a.groups)
                                       : two_shot_auto_groups(push_bytes, kPassthrough, Codec::kScaled && W == 4);
  const size_t per_group = my_tiles ? (my_tiles + n_groups - 1) / n_groups : 1;
  const size_t groups = (my_tiles + per_group - 1) / per_group;
  auto tile_of = [&](size_t g, size_t i) { return tile_base + g * per_group + i; };
  auto group_size = [&](size_t g) { return min(per_group, my_tiles - g * per_group); };

  // Addresses walk a group's tiles one tile at a time: recomputing them from the tile index in
  // 64-bit arithmetic was about half of what an int4 scatter step executed.
  struct TileCursor {
    size_t first;  // index of the tile's first value
    size_t slots;  // byte offset of the tile's first slot in rs_data / ag_data
    size_t index;  // tile * W: where the tile's flags and (lossless) form words start ([tile][src])
  };
  const size_t src_stride = num_tiles * sl.total;  // bytes between two sources' slots of a tile
  const size_t my_slot = size_t(me) * src_stride;
  // The form word of slot `index` of a data region (lossless codec only).
  auto form_at = [&](uint8_t* forms, size_t index) { return reinterpret_cast<uint32_t*>(forms) + index; };
  auto cursor = [&](size_t g) {
    const size_t t = tile_of(g, 0);
    return TileCursor{t * tile_values, t * sl.total, t * W};
  };
  auto advance = [&](TileCursor& c) {  // to the CTA's next tile
    c.first += tile_values;
    c.slots += sl.total;
    c.index += W;
  };
  // Values of my lane in slice s of the tile that lie inside the tensor (only the last tile is cut).
  auto lane_valid = [&](size_t first, bool full, int s) {
    return full ? ptrdiff_t(kLaneValues) : ptrdiff_t(a.numel) - ptrdiff_t(first + s * slice_values + lane_offset);
  };
  const uint16_t* in_lane = in + lane_offset;
  LaneFetcher<kWorld == 2> fetch;
  // Issues my input lane of slice s of the tile starting at value `first`.
  // known_full: the caller knows the tile lies inside the tensor.
  auto fetch_input = [&](size_t first, int s, bool known_full) {
    fetch.issue(in_lane + first + s * slice_values,
                lane_valid(first, known_full || first + tile_values <= a.numel, s));
  };
  // The W=2 512-thread kernels run a group whose tiles all lie inside the tensor (every group but
  // possibly the last) through a copy of the tile loop with the tail tests folded away: int4 and
  // fp4 at 1 GiB 1% and 2.5% faster (2x H200). Not lossless: its spills doubled.
  constexpr bool kSplitFull = kWorld == 2 && kThreads > 0 && !kLossless;
  auto with_fullness = [&](size_t g, uint32_t n, auto&& loop) {
    if constexpr (kSplitFull) {
      if (n > 0 && (tile_of(g, n - 1) + 1) * tile_values <= a.numel) return loop(std::true_type{});
    }
    return loop(std::false_type{});
  };
  uint16_t* out_lane = out + lane_offset;
  // An output lane as stored: the sum, or (kResidual) with the epilogue's residual added where the
  // sum is first rounded to T, as the two-kernel sequence stores it: the same bits.
  auto store_output = [&](size_t at, ptrdiff_t valid, float v[kLaneValues]) {
    if constexpr (kResidual) {
      float res[kLaneValues];
      load_lane<D>(a.residual + lane_offset + at, valid, res);
#pragma unroll
      for (int k = 0; k < kLaneValues; ++k) v[k] = add_residual<D>(to_float<D>(from_float<D>(v[k])), res[k]);
    }
    store_lane<D>(out_lane + at, valid, v);
  };

  auto timed_wait = [&](const uint64_t* flags, size_t g, uint32_t phase, Phase timer) {
    const long long t = timers.now();
    const bool ok = wait_flags(flags, tile_of(g, 0), phase);
    timers.add(timer, t);
    return ok;
  };

  auto scatter = [&](size_t g) {  // 1. encode my slices of every tile of g and push them to their owners
    TileCursor c = cursor(g);
    const uint32_t n = uint32_t(group_size(g));
    with_fullness(g, n, [&](auto all_full) {
    constexpr bool kFull = decltype(all_full)::value;
    if (n) fetch_input(c.first, rank_after(1), kFull);
    uint32_t part = 0;  // this tile's place among the slices staged for one copy
    for (uint32_t i = 0; i < n; ++i, advance(c)) {
      const bool full = kFull || c.first + tile_values <= a.numel;
      for (int j = 1; j < W; ++j) {
        const int d = rank_after(j);
        float v[kLaneValues];
        fetch.take<D>(in_lane + c.first + d * slice_values, lane_valid(c.first, full, d), v);
        if (j + 1 < W) {
          fetch_input(c.first, rank_after(j + 1), kFull);
        } else if (i + 1 < n) {
          fetch_input(c.first + tile_values, rank_after(1), kFull);
        }
        Packed p;
        if constexpr (kRotated) rotate_lane(v);
        uint16_t scale = IO::encode(v, p);
        const bool flush = part + 1 == kParts || i + 1 == n;
        send_slice(
            p, scale,
            [&](int) { return a.workspaces[d] + a.layout.rs_data + (c.slots - part * sl.total) + my_slot; },
            [&](int) { return form_at(a.workspaces[d] + a.layout.rs_forms, c.index + me); }, 1, part, flush);
        part = flush ? 0 : part + 1;
      }
    }
    });
  };
  auto reduce = [&](size_t g) {  // 2. sum my slice in rank order, broadcast the encoded sum
    TileCursor c = cursor(g);
    const uint32_t n = uint32_t(group_size(g));
    return with_fullness(g, n, [&](auto all_full) {
    constexpr bool kFull = decltype(all_full)::value;
    if (n) fetch_input(c.first, me, kFull);  // my first lane loads while the peers' flags are awaited
    if (!timed_wait(rs_flags, g, 1, Phase::kWaitScatter)) return false;
    const long long t = timers.now();
    uint32_t part = 0;
    for (uint32_t i = 0; i < n; ++i, advance(c)) {
      const bool full = kFull || c.first + tile_values <= a.numel;
      const uint8_t* slots = local + a.layout.rs_data + c.slots;
      float acc[kLaneValues];  // starts as rank 0's term: 0 + x would cost an add per value
      for (int src = 0; src < W; ++src) {
        float v[kLaneValues];
        Packed p;
        uint16_t scale;
        if (src == me) {  // my own values never cross the link: added exactly (no round trip)
          fetch.take<D>(in_lane + c.first + me * slice_values, lane_valid(c.first, full, me), v);
          if (i + 1 < n) fetch_input(c.first + tile_values, me, kFull);
          if constexpr (kRotated) rotate_lane(v);
        } else {
          scale =
              IO::load(slots + src * src_stride, sl, lane, p, form_at(local + a.layout.rs_forms, c.index + src));
          IO::decode(p, scale, v);
        }
#pragma unroll
        for (int k = 0; k < kLaneValues; ++k) acc[k] = src == 0 ? v[k] : acc[k] + v[k];
      }
      Packed p;
      const uint16_t scale = IO::encode_keep(acc, p);  // the owner keeps exactly what it broadcasts
      if constexpr (kRotated) unrotate_lane(acc);  // (p holds the payload: acc is free now)
      store_output(c.first + me * slice_values, lane_valid(c.first, full, me), acc);
      const bool flush = part + 1 == kParts || i + 1 == n;
      send_slice(
          p, scale,
          [&](int j) {
            return a.workspaces[rank_after(1 + j)] + a.layout.ag_data + (c.slots - part * sl.total) + my_slot;
          },
          [&](int j) { return form_at(a.workspaces[rank_after(1 + j)] + a.layout.ag_forms, c.index + me); }, W - 1,
          part, flush);
      part = flush ? 0 : part + 1;
    }
    timers.add(Phase::kReduce, t);
    return true;
    });
  };
  auto gather = [&](size_t g) {  // 3. decode the other owners' reduced slices
    if (!timed_wait(ag_flags, g, 2, Phase::kWaitReduce)) return false;
    const long long t = timers.now();
    TileCursor c = cursor(g);
    const uint32_t n = uint32_t(group_size(g));
    with_fullness(g, n, [&](auto all_full) {
    constexpr bool kFull = decltype(all_full)::value;
    for (uint32_t i = 0; i < n; ++i, advance(c)) {
      const bool full = kFull || c.first + tile_values <= a.numel;
      const uint8_t* slots = local + a.layout.ag_data + c.slots;
      for (int j = 1; j < W; ++j) {
        const int src = rank_after(j);
        Packed p;
        float v[kLaneValues];
        uint16_t scale =
            IO::load(slots + src * src_stride, sl, lane, p, form_at(local + a.layout.ag_forms, c.index + src));
        IO::decode(p, scale, v);
        if constexpr (kRotated) unrotate_lane(v);
        store_output(c.first + src * slice_values, lane_valid(c.first, full, src), v);
      }
    }
    });
    timers.add(Phase::kGather, t);
    return true;
  };

  // Step s scatters group s, reduces s-1 and gathers s-2; a step only waits for flags of earlier
  // steps, so there is no cycle. The scatter is announced after the reduce, so one wait for the
  // bulk copies covers both groups while the reduce's math ran beside the copies. Codec kernels
  // with many groups gather before they announce, so their copies land meanwhile (1 GiB int4
  // 1005-1015 -> 976-989 us); passthrough, and fewer groups, measured up to 1.5% slower that way
  // (64-256 MB; 2x H200).
  const bool gather_first = !kPassthrough && groups >= 10;
  bool ok = true;
  for (size_t step = 0; ok && step < groups + 2; ++step) {
    const bool scatters = step < groups, reduces = step >= 1 && step - 1 < groups;
    long long t = timers.now();
    if (scatters) scatter(step);
    timers.add(Phase::kScatter, t);
    if (reduces) ok = reduce(step - 1);
    const bool reduced = ok && reduces;
    if (gather_first && ok && step >= 2) ok = gather(step - 2);
    t = timers.now();
    if (scatters) announce(a.layout.rs_flags, tile_of(step, 0));
    if (reduced) announce(a.layout.ag_flags, tile_of(step - 1, 0));
    timers.add(Phase::kAnnounce, t);
    if (!gather_first && ok && step >= 2) ok = gather(step - 2);
  }
  if (lane == 0) bulk_wait_all();  // a failed wait may leave copies reading shared memory
  timers.report(me, a.numel);

  // The last CTA to finish advances the epoch: every CTA has read it by then.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&ctrl->two_shot_done, 1u) == gridDim.x - 1) {
      ctrl->two_shot_done = 0;
      ctrl->two_shot_epoch = epoch;
    }
  }
}

}  // namespace qr
