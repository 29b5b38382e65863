// How the two-shot cuts a message, host side: the CTA size and, from it, which rank owns (reduces)
// which values. Results depend on ownership (the owner adds its own values exactly, everyone
// else's after one quantize/dequantize), so the CPU twin takes the same rule from here.
#pragma once
#include <cstddef>

#include "core/block.hpp"
#include "transport/workspace.hpp"

namespace qr {

// CTA size: the largest whose tiles still give every SM work.
inline int default_two_shot_threads(size_t numel, int world_size) {
  for (int threads = kTwoShotMaxThreads; threads > kTwoShotMinThreads; threads /= 2) {
    size_t tiles = numel / (size_t(threads) * kLaneValues * world_size);
    if (tiles >= 264) return threads;
  }
  return kTwoShotMinThreads;
}

// Values per slice (one lane of 8 per thread); value i belongs to rank (i / slice) % world_size.
inline size_t two_shot_slice_values(size_t numel, int world_size) {
  return size_t(default_two_shot_threads(numel, world_size)) * kLaneValues;
}

}  // namespace qr
