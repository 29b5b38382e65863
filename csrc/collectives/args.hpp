// The one parameter struct every all-reduce launch takes (by value: trivially copyable).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "transport/error_record.hpp"
#include "transport/workspace.hpp"

namespace qr {

struct AllReduceArgs {
  const void* in;
  void* out;  // may equal in
  size_t numel;
  int rank;
  int world_size;
  uint8_t* workspaces[kMaxWorldSize];  // every rank's workspace base, mapped here (own included)
  WorkspaceLayout layout;
  ErrorRecord* record;  // host-mapped, device pointer
  uint64_t timeout_ns;
  int threads;  // two-shot CTA size (slice = threads * 8 values)
  int blocks;   // two-shot grid
  int groups;   // two-shot pipeline groups per CTA
  uint32_t signature;  // hash of (numel, dtype, codec, algorithm): every rank must pass the same
  int pdl;      // launch with programmatic dependent launch (overlaps the previous kernel's tail)
  // Two-shot only, or null: the residual (as `in`) the add + RMSNorm epilogue adds, each output lane
  // stored as to_T(to_T(sum) + residual) (docs/codec-spec.md, "Add + RMSNorm epilogue").
  const uint16_t* residual;
};
static_assert(std::is_trivially_copyable_v<AllReduceArgs>, "kernel args are copied by value");

// The add + RMSNorm epilogue the fused one-shot runs on the summed rows (docs/codec-spec.md, "Add +
// RMSNorm epilogue"; out = AllReduceArgs::out).
struct RowEpilogueArgs {
  const void* residual;
  const void* weight;
  void* residual_out;
  float eps;
  uint32_t hidden;  // a multiple of kFusedRowValues: a thread-block cluster of hidden / 1024 CTAs a row
};
static_assert(std::is_trivially_copyable_v<RowEpilogueArgs>, "kernel args are copied by value");

// The segment collectives (collectives/exchange/): what moves where, as element counts.
// kAllReduce: the packet path only (exchange/packets.cuh): reduce-scatter then all-gather of W chunks in
// one kernel, the all-gather through a second packet channel.
enum class ExchangeKind : int { kAllGather = 0, kAllToAll = 1, kReduceScatter = 2, kAllReduce = 3 };

struct ExchangeArgs {
  const void* in;
  void* out;
  int kind;  // ExchangeKind
  int rank;
  int world_size;
  uint8_t* workspaces[kMaxWorldSize];
  WorkspaceLayout layout;
  ErrorRecord* record;
  uint64_t timeout_ns;
  uint32_t signature;  // hash of the call every rank must agree on (uneven splits: checked per pair)
  int pdl;
  int aligned;  // every segment starts 16-byte aligned in `in` and `out`: full lanes load as vectors
  int sizes_cross;  // all-to-all: the sizes cross the link before the data and are checked per pair
  uint32_t even_count;  // values in every segment when !sizes_cross
  uint32_t groups;      // the slice kernel's pipeline groups a CTA; 0: by the bytes it pushes (two_shot_auto_groups)
  uint32_t send_count[kMaxWorldSize];   // values this rank sends rank d
  uint64_t send_offset[kMaxWorldSize];  // first input element of that segment
  uint32_t recv_count[kMaxWorldSize];   // values this rank receives from rank s (checked when uneven)
  uint64_t recv_offset[kMaxWorldSize];  // first output element they go to
  // The dynamic all-to-all (exchange_kernel<..., true>; dynamic_plan.hpp): the counts are rows in
  // device tensors; send_count/send_offset/recv_count/recv_offset above are unused.
  const void* dyn_send_counts;  // [W] int32 or int64: rows this rank sends each rank, read in the kernel
  void* dyn_recv_counts;        // [W] the same type: rows each rank sent this one (written by CTA 0)
  int dyn_count_bytes;          // 4 (int32) or 8 (int64)
  uint32_t row_values;          // values a row
  uint32_t in_rows;             // rows of the input
  uint32_t capacity_rows;       // rows the output holds
};
static_assert(std::is_trivially_copyable_v<ExchangeArgs>, "kernel args are copied by value");

}  // namespace qr
