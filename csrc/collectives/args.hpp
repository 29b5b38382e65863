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
};
static_assert(std::is_trivially_copyable_v<AllReduceArgs>, "kernel args are copied by value");

}  // namespace qr
