// How the two-shot cuts a message, host side: the CTA size and, from it, which rank owns (reduces)
// which values. Results depend on ownership (the owner adds its own values exactly, everyone
// else's after one quantize/dequantize), so the CPU twin takes the same rule from here.
#pragma once
#include <cstddef>

#include "core/block.hpp"
#include "transport/workspace.hpp"

namespace qr {

// The largest CTA (kTwoShotMaxThreads down to kTwoShotMinThreads) for which `values` make at least
// `min_tiles` tiles of one lane (kLaneValues values) a thread: the two-shot's and the exchange's rule.
inline int largest_cta_for_tiles(size_t values, size_t min_tiles) {
  for (int threads = kTwoShotMaxThreads; threads > kTwoShotMinThreads; threads /= 2)
    if (values / (size_t(threads) * kLaneValues) >= min_tiles) return threads;
  return kTwoShotMinThreads;
}

// CTA size: the largest whose tiles still give every SM work (264 tiles, two an SM of an H100/H200). On
// 4 GPUs the largest with 64 tiles: there CTAs of 512 were faster from 1 MB where the 264 rule took 128
// (4x H200, passthrough: 2M 32.3 -> 24.8 us, 4M 41.5 -> 35.3; 4x H100, 2026-11-27: every codec 1-4 MB
// 7-29% faster). 8 GPUs keep the 264 rule (not measured there).
inline int default_two_shot_threads(size_t numel, int world_size) {
  return largest_cta_for_tiles(numel / size_t(world_size), world_size == 4 ? 64 : 264);
}

// Values per slice (one lane of 8 per thread); value i belongs to rank (i / slice) % world_size.
inline size_t two_shot_slice_values(size_t numel, int world_size) {
  return size_t(default_two_shot_threads(numel, world_size)) * kLaneValues;
}

}  // namespace qr
