// What a kernel leaves for the host when a wait gives up or sees a mismatched call: host-mapped, written once (the first
// thread to time out wins the device-side abort word), read by Communicator::check().
#pragma once
#include <cstdint>

namespace qr {

// kBadCounts: a dynamic all-to-all's device split sizes were bad (exchange/dynamic_plan.hpp); the
// call still finished on every rank, without them.
enum class ErrorCode : uint32_t { kOk = 0, kTimeout = 1, kMismatch = 2, kBadCounts = 3 };

// Phases of the segment collectives (the all-reduce's are 0-2, written as literals in its kernels).
constexpr uint32_t kPhaseExchangeData = 3;   // waiting for a peer's segment slices
constexpr uint32_t kPhaseExchangeSizes = 4;  // waiting for a peer's split sizes (uneven all-to-all)
constexpr uint32_t kPhaseExchangeReady = 5;  // waiting for a peer to finish the previous exchange call
constexpr uint32_t kPhaseExchangePackets = 6;  // waiting for a peer's small segment (exchange/packets.cuh)
// kBadCounts (the dynamic all-to-all): what `rank` found; peer, expected and seen as listed.
constexpr uint32_t kPhaseCountNegative = 7;  // peer: the destination, seen: its count (int32 bits)
constexpr uint32_t kPhaseCountSum = 8;       // expected: the input's rows, seen: the counts' sum (saturated)
constexpr uint32_t kPhaseCountCapacity = 9;  // peer: first source cut, expected: capacity, seen: rows sent (saturated)
constexpr uint32_t kPhaseCountPeer = 10;     // peer: a source whose own counts were bad (it sent nothing)

struct ErrorRecord {
  uint32_t code;      // ErrorCode
  int32_t rank;       // rank that gave up waiting
  int32_t peer;       // rank it was waiting for
  uint32_t block;     // CTA index
  uint32_t expected;  // timeout: the epoch awaited; mismatch: this rank's call signature
  uint32_t seen;      // timeout: the epoch last read; mismatch: the peer's call signature
  uint32_t phase;     // 0 one-shot packets, 1 reduce-scatter, 2 all-gather (all-reduce); kPhaseExchange*, kPhaseCount*
  uint32_t seen_high; // kBadCounts: the high 32 bits of a 64-bit seen value (a count or a sum)
};

}  // namespace qr
