// How the two-shot cuts a message, host side: the CTA size and, from it, which rank owns (reduces)
// which values. Results depend on ownership (the owner adds its own values exactly, everyone
// else's after one quantize/dequantize), so the CPU twin takes the same rule from here.
#pragma once
#include <cstddef>

#include "core/block.hpp"
#include "transport/workspace.hpp"

namespace qr {

// CTA size: the largest whose tiles still give every SM work (264 tiles, two an SM of an H100/H200). On
// 4 GPUs the largest with 64 tiles: there CTAs of 512 were faster from 1 MB where the 264 rule took 128
// (4x H200, passthrough: 2M 32.3 -> 24.8 us, 4M 41.5 -> 35.3; 4x H100, 2026-11-27: every codec 1-4 MB
// 7-29% faster). 8 GPUs keep the 264 rule (not measured there).
inline int default_two_shot_threads(size_t numel, int world_size) {
  const size_t min_tiles = world_size == 4 ? 64 : 264;
  for (int threads = kTwoShotMaxThreads; threads > kTwoShotMinThreads; threads /= 2) {
    size_t tiles = numel / (size_t(threads) * kLaneValues * world_size);
    if (tiles >= min_tiles) return threads;
  }
  return kTwoShotMinThreads;
}

// Values per slice (one lane of 8 per thread); value i belongs to rank (i / slice) % world_size.
inline size_t two_shot_slice_values(size_t numel, int world_size) {
  return size_t(default_two_shot_threads(numel, world_size)) * kLaneValues;
}

}  // namespace qr
