// Byte layout of one rank's shared workspace (one cudaMalloc, exported by CUDA IPC).
// The same function sizes and carves it, so the two can never disagree.
//
//   [control]   epochs and counters this rank alone touches
//   [rs_flags]  [tile][src] u64 {epoch, call signature}: "my slice of tile t is in your rs_data"
//   [ag_flags]  [tile][src] u64 {epoch, call signature}: "reduced slice of tile t is in your ag_data"
//   [lamport]   [3 buffers][src][vector] 16-byte vectors of the one-shot; "empty" = every
//               16-bit half holds the sentinel 0x8000 (-0.0), which real data never carries
//   [rs_forms]  [tile][src] u32: the lossless codec's form (1 raw, 2 packed) of that rs_data slice
//   [ag_forms]  [tile][src] u32: the same for ag_data
//   [rs_data]   [src][tile] encoded slices sent to this rank, the slice's owner (a CTA's
//               consecutive tiles from one source lie side by side: on 2 GPUs at 512 threads the
//               two-shot sends two of int4/fp4/int6 in one copy)
//   [ag_data]   [src][tile] encoded reduced slices broadcast by their owners
//   [xc_flags]  [slice][src] u64 {epoch, call signature}: "src's group starting at this slice landed"
//               (reduce-scatter, all-gather, all-to-all: collectives/exchange/exchange.cuh)
//   [xc_sizes]  [CTA][src] SizeRow: the values src sends each rank (uneven and dynamic all-to-all)
//   [xc_data]   [src][slice] encoded segments pushed to this rank, lower sources first
//   [xp_data]   [3 buffers][src][vector] 16-byte vectors of small segments (exchange/packets.cuh);
//   [xq_data]   the same, the packet all-reduce's all-gather channel;
//               "empty" = every byte 0xFF, a NaN real data is never sent as
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/macros.hpp"

namespace qr {

constexpr int kMaxWorldSize = 8;
// Vector p belongs to CTA (p / kOneShotThreads) % kOneShotBlocks in every call, whatever the size;
// a call launches only the CTAs that own vectors (8 KB: 4 CTAs on 4 SMs, as TensorRT-LLM's
// one-shot spreads it). 1056 CTAs (8 of 160 threads per SM of 132, all resident) give every data
// thread one vector up to 2 MiB: at 2 MiB, 528 CTAs (two vectors a thread, one after the other)
// measured ~10% slower against TensorRT-LLM's one-shot in the same run (2x H200).
constexpr int kOneShotBlocks = 1056;
constexpr int kOneShotThreads = 128;        // data threads per one-shot CTA
constexpr int kOneShotControlThreads = 32;  // plus one warp that checks the peers' calls
// The one-shot with the add + RMSNorm epilogue fused in: a row of hidden values is hidden / 1024
// whole CTAs (128 lanes of 8 values each), a thread-block cluster, at most 16 CTAs (hidden 16384).
constexpr int kFusedRowValues = kOneShotThreads * 8;
constexpr int kFusedMaxClusterCtas = 16;
// Rows of one CTA (hidden 1024) too: the CTA's own slot is a plain store, since st.async into a
// one-CTA cluster is undefined (compute-sanitizer's memcheck). At 1024 the fused call
// took 3.16-4.03 us at 8-256 KiB against 3.29-4.49 for the two kernels and 3.13-4.60 for FlashInfer's
// fused op (2x H200).
constexpr int kFusedMinClusterCtas = 1;
// Largest all-reduce the fused one-shot takes: above it the one-shot and then the epilogue kernel
// measured as fast or faster (2x H200, hidden 4096, two kernels against fused: 3.71 / 3.42 us at
// 8 KiB, 4.71 / 4.86 at 256 KiB, 5.61 / 6.32 at 512 KiB; on another host of the same kind 5.05 / 4.27
// at 256 KiB). Every rank computes the same route.
constexpr size_t kFusedOneShotMaxBytes = 256 << 10;
// Largest message the one-shot accepts. On 2 GPUs it moves the same bytes as the two-shot with one
// crossing instead of two, and measured faster up to 8 MiB (8 MiB: 30.5 against 32.7 us; 12 MiB:
// 46.0 against 44.5; 2x H200); on more GPUs it moves W-1 times the message.
QR_HD constexpr size_t one_shot_max_bytes(int world_size) { return size_t(world_size == 2 ? 8 : 4) << 20; }
// From this size a one-shot call empties each buffer slot as it reads it rather than leaving its
// buffer to the next call's clearing pass: at 6-8 MiB that pass cost ~1 us (2x H200);
// below 4 MiB neither way measured faster.
constexpr size_t kOneShotEmptyOnReadBytes = size_t(4) << 20;
// The segment exchange's small-message path (exchange/packets.cuh): vector p of a segment belongs
// to CTA (p / kPacketThreads) % kPacketBlocks (a grid stride: one vector a thread up to 512 KiB,
// four at kPacketMaxSegmentBytes, the largest segment it takes; Communicator::exchange's
// packet_max_bytes lowers it).
constexpr int kPacketBlocks = 256;
constexpr int kPacketThreads = 128;
constexpr int kPacketControlThreads = 32;
constexpr size_t kPacketMaxSegmentBytes = size_t(2) << 20;  // 4 vectors a thread at the most
// The scaled codecs' small path (exchange/coded_packets.cuh) on the same channel: a segment crosses
// as lanes of 8 values, whole warps of 32 lanes, each lane as its codes and its block's scale in
// 8-byte units, each {32 payload bits, a 16-bit mark of the call, 16 payload bits} (the mark says the
// unit arrived), two a lane (one 16-byte vector); a lane of 32 bits of codes (int4, fp4, int4h) takes
// one unit once the segment has more lanes than the channel has threads. (One unit puts two lanes in
// a CTA's vector, so a thread takes two lanes: on 2x H200, 2026-11-28, int4 at 8 KB took 3.83 us on
// one unit a lane where fp8 and int6 took 2.69-2.77 on two; with 1 MB segments int4 on one unit took
// 5.6 us, fp8 on two 7.7.)
QR_HD constexpr size_t coded_packet_lanes(size_t values) { return (values + 255) / 256 * 32; }
QR_HD constexpr int coded_units_per_lane(int lane_code_bits, size_t lanes) {
  return lane_code_bits + 16 <= 48 && lanes > size_t(kPacketBlocks) * kPacketThreads ? 1 : 2;
}
// 16-byte wire vectors one source sends for a segment of this many values (lane_code_bits: the
// codec's, codec_lane_code_bits). (The lanes that cross as values, coded_packets.cuh, take one vector,
// as two units do.)
QR_HD constexpr size_t coded_packet_vectors(size_t values, int lane_code_bits) {
  const size_t lanes = coded_packet_lanes(values);
  return lanes * size_t(coded_units_per_lane(lane_code_bits, lanes)) / 2;
}
// The most wire a coded call's rank takes in from all its peers on that path (past it the slice path
// was faster where the wire carried decoded values, two to four times the codec's bytes).
// 2026-11-28: on 4x H200, 16-bit all-gather / all-to-all ran faster on packets with 512 KB segments (1.5 MB in
// from 3 peers) and on slices from 1 MB (int4, 4 MB in all: 17-19 us against 14-16). On 2x H200 the packets
// stayed faster up to the channel's 2 MiB (all-gather fp8 4 MB in all: 12.0 against 15.1 us), the reduce-scatter
// in units too (fp8 2 MB segments: 12.1 against 13.7 us). The reduce-scatter's units at W = 4 and anything at
// W = 8 (292 KB a peer) take the same 2 MiB in, not measured there.
constexpr size_t kCodedPacketMaxIngressBytes = size_t(2) << 20;
constexpr int kTwoShotMinThreads = 128;  // smallest CTA, so the most tiles a message can have
constexpr int kTwoShotMaxThreads = 512;
constexpr int kTwoShotGroups = 16;  // most groups the automatic rule picks (explicit groups: up to 64)

// Pipeline groups a two-shot CTA cuts its tiles into when the call does not set them. Each group
// costs a handshake with every peer and buys overlap of one group's pushes with another's work.
// push_bytes: what the CTA pushes to each peer in a phase. Measured on 2x H200: one group until a
// CTA pushes three groups' worth, then one group per ~16 KB pushed for passthrough (little work per
// byte) and per ~24 KB for the codecs, at most kTwoShotGroups; on 4x H200 and 4x H100 counted per
// peer as well.
// The scaled codecs' two-shot at 4 GPUs (fine_groups) takes a group per ~8 KB: with one fence an announce
// (primitives.cuh) a handshake got cheap enough that int4 at 256 MB ran 4 groups 5% faster than 1 and at
// 1 GiB 16 groups 4% faster than 6, fp8 at 256 MB 8-16 groups 8% faster than 3, while at 64 MB the 1-2
// groups this gives stayed best (4x H100, 2026-11-28). The lossless codec kept 24 KB (more groups: slower).
QR_HD constexpr size_t two_shot_auto_groups(size_t push_bytes, bool passthrough, bool fine_groups = false) {
  const size_t per_group = size_t(passthrough ? 16 : fine_groups ? 8 : 24) << 10;
  if (push_bytes < 3 * per_group) return 1;
  const size_t n = (push_bytes + per_group / 2) / per_group;
  return n < size_t(kTwoShotGroups) ? n : size_t(kTwoShotGroups);
}
// The measured optima (bytes one CTA of 512 pushes to its peer per phase on 2 GPUs -> best group count).
static_assert(two_shot_auto_groups(31 << 10, true) == 1, "32 MB passthrough: 1 group (2: +2.5%)");
static_assert(two_shot_auto_groups(62 << 10, true) == 4, "64 MB passthrough: 4 groups (2: +1.3%)");
static_assert(two_shot_auto_groups(25 << 10, false) == 1, "64 MB int6: 1 group (4: +9%)");
static_assert(two_shot_auto_groups(143 << 10, false) == 6, "512 MB int4: 6 groups (1: +6%)");
static_assert(two_shot_auto_groups(286 << 10, false) == 12, "1 GiB int4: 8-12 groups (4: +4%)");

struct ControlBlock {
  uint32_t two_shot_epoch;  // advanced by the last CTA of each two-shot call
  uint32_t two_shot_done;   // CTAs finished in the current two-shot call
  uint32_t abort;           // set by the first wait that times out; later calls return at once
  uint32_t count_error;     // set by the first bad-counts report (dynamic all-to-all); no call stops for it
  uint32_t one_shot_epoch[kOneShotBlocks];      // per CTA, advanced by that CTA
  uint32_t one_shot_prev_vectors[kOneShotBlocks];  // vectors of that CTA's previous call, to clear
  // Written by peers: {epoch, call signature} of their one-shot call, per CTA, epoch parity and
  // source rank, so ranks that make different calls get an error instead of each other's data.
  // Two slots: a peer may start its next call (and send its signature) as soon as it has this
  // call's data, before this rank has read the signature of this call; it cannot start the call
  // after that before this rank has finished this one.
  uint64_t one_shot_signature[kOneShotBlocks][2][kMaxWorldSize];
  // The segment collectives (exchange.cuh). A sender writes a peer's xc_* regions only after that
  // peer's exchange_done_by[sender] (written by the peer) shows it finished the previous exchange
  // call, so it no longer reads them: one region serves every call without double buffering.
  uint32_t exchange_epoch;                   // advanced by the last CTA of each exchange call
  uint32_t exchange_finished;                // CTAs finished in the current exchange call
  uint32_t exchange_done_by[kMaxWorldSize];  // written by rank s: the last exchange epoch it finished
  // The small-segment path's own epochs, clearing counts and signatures, as the one-shot's above.
  uint32_t packet_epoch[kPacketBlocks];
  uint32_t packet_prev_vectors[kPacketBlocks];
  uint64_t packet_signature[kPacketBlocks][2][kMaxWorldSize];
  // The packet all-reduce's all-gather channel (xq_data): its own epochs and clearing counts, advanced
  // only by packet all-reduce calls (the signature check is the first channel's).
  uint32_t packet_ag_epoch[kPacketBlocks];
  uint32_t packet_ag_prev_vectors[kPacketBlocks];
};

// Most CTAs an exchange launch may have (size rows are per CTA): more than fit at once on any GPU
// we target at 128 threads.
constexpr int kExchangeMaxBlocks = 2048;
// Lanes of a slice of an all-to-all whose sizes cross, at any CTA size (exchange.cuh): 256 or 512
// threads, chosen by each rank for itself.
constexpr int kCrossingLanes = 256;
// One rank's send sizes for one call, as a peer's CTA receives them (uneven all-to-all).
struct SizeRow {
  uint32_t count[kMaxWorldSize];  // values the sender sends each rank (dynamic all-to-all: rows)
  uint64_t flag;                  // {epoch, call signature}, released after the counts
  uint64_t info;                  // dynamic all-to-all: the sender's capacity and bad-counts bit (dynamic_plan.hpp)
};
// Largest wire slice of any codec: fp32 passthrough, 512 threads x 8 values x 4 bytes.
constexpr size_t kMaxWireSliceBytes = size_t(kTwoShotMaxThreads) * 8 * 4;

// A flag word: the call's epoch (low half) and its signature (high half) in one 8-byte store.
QR_HD constexpr uint64_t flag_word(uint32_t epoch, uint32_t signature) { return uint64_t(signature) << 32 | epoch; }

// Epochs cycle through 1..kEpochPeriod: never 0 (fresh memory), and with a period divisible by
// 6, epoch % 3 (the one-shot's buffer) and the parity keep cycling even across the wrap.
constexpr uint32_t kEpochPeriod = 3u << 29;
constexpr uint32_t kLamportEmptyHalf = 0x8000u;  // -0.0: "not arrived yet"
constexpr uint32_t kLamportEmpty = kLamportEmptyHalf << 16 | kLamportEmptyHalf;  // a word of two
constexpr int kLamportBuffers = 3;

inline size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct WorkspaceLayout {
  size_t lamport_bytes(int world_size) const { return size_t(kLamportBuffers) * world_size * lamport_vectors * 16; }
  size_t packet_bytes(int world_size) const { return size_t(kLamportBuffers) * world_size * packet_vectors * 16; }
  size_t control, rs_flags, ag_flags, rs_forms, ag_forms, lamport, rs_data, ag_data;
  size_t xc_flags, xc_sizes, xc_data, xp_data, xq_data, total;
  size_t max_tiles, lamport_vectors;  // lamport_vectors: per buffer and source
  size_t packet_vectors;              // small-segment vectors per buffer and source
  size_t max_exchange_slices;         // most slices one exchange segment can have

  // Whether an even passthrough segment of this many bytes takes the flag-in-data path
  // (Communicator::exchange; Python asks it too, to keep `auto:<codec>` exact there).
  bool packet_path_fits(size_t segment_bytes, size_t packet_max_bytes) const {
    return segment_bytes > 0 && segment_bytes <= std::min(packet_max_bytes, packet_vectors * 16);
  }
  // The coded path: the segment within packet_max_bytes, its wire within a buffer, all peers' within
  // kCodedPacketMaxIngressBytes.
  bool coded_packet_path_fits(size_t segment_values, size_t value_bytes, int lane_code_bits, size_t packet_max_bytes,
                              int world_size) const {
    const size_t wire = coded_packet_vectors(segment_values, lane_code_bits);
    return segment_values > 0 && segment_values * value_bytes <= packet_max_bytes && wire <= packet_vectors &&
           wire * 16 * size_t(world_size - 1) <= kCodedPacketMaxIngressBytes;
  }

  static WorkspaceLayout make(int world_size, size_t max_bytes) {
    WorkspaceLayout w{};
    size_t max_values = max_bytes / 2;
    size_t min_tile_values = size_t(world_size) * kTwoShotMinThreads * 8;
    w.max_tiles = (max_values + min_tile_values - 1) / min_tile_values;
    size_t one_shot_bytes = std::min(max_bytes, one_shot_max_bytes(world_size));
    w.lamport_vectors = align_up(one_shot_bytes, 16) / 16;
    size_t off = 0;
    auto take = [&](size_t bytes) { size_t at = off; off = align_up(off + bytes, 256); return at; };
    w.control = take(sizeof(ControlBlock));
    w.rs_flags = take(w.max_tiles * world_size * 8);
    w.ag_flags = take(w.max_tiles * world_size * 8);
    w.lamport = take(w.lamport_bytes(world_size));
    w.rs_forms = take(w.max_tiles * world_size * 4);
    w.ag_forms = take(w.max_tiles * world_size * 4);
    // Data slots: at most the message itself plus one partly filled tile of the largest CTA.
    size_t slack = size_t(world_size) * kTwoShotMaxThreads * 8 * 2;
    w.rs_data = take(max_bytes + slack);
    w.ag_data = take(max_bytes + slack);
    // Exchange: a segment has at most max_bytes / 2 values (16-bit; fp32 halves it) in slices of
    // at least kTwoShotMinThreads * 8; each of the W segments a rank receives may end in a partly
    // filled slice.
    w.max_exchange_slices = max_values / (size_t(kTwoShotMinThreads) * 8) + 1;
    w.xc_flags = take(w.max_exchange_slices * world_size * 8);
    w.xc_sizes = take(size_t(kExchangeMaxBlocks) * world_size * sizeof(SizeRow));
    w.xc_data = take(max_bytes + size_t(world_size) * kMaxWireSliceBytes);
    w.packet_vectors = align_up(std::min(max_bytes, kPacketMaxSegmentBytes), 16) / 16;
    w.xp_data = take(w.packet_bytes(world_size));
    w.xq_data = take(w.packet_bytes(world_size));  // the packet all-reduce's all-gather channel
    w.total = off;
    return w;
  }
};

}  // namespace qr
