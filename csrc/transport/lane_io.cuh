// One lane's share of a slice on the wire, shared by every collective that moves encoded slices:
// LaneIO encodes a lane of 8 values under its block's scale and moves the packed bits to or from
// a slot laid out as SliceLayout describes; LaneFetcher loads a phase's input lanes one ahead.
// Codecs are arithmetic only (codecs/); which thread owns which lane is the algorithm's business.
#pragma once

#include "codecs/codec_list.hpp"
#include "core/hadamard.hpp"
#include "transport/lanes.cuh"
#include "transport/primitives.cuh"

namespace qr {

// One lane's share of a block-scaled slice: encode with the block's shared scale, move the
// packed bits to/from a slot laid out as SliceLayout describes.
template <class Codec, DType D>
struct LaneIO {
  using Packed = typename Codec::Packed;

  // The block's 16-bit scale (4 consecutive lanes share a block of 32) and its inverse.
  __device__ static uint16_t block_scale_of(const float v[kLaneValues], float& inv) {
    uint32_t m = lane_absmax_bits(v);
    m = max(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = max(m, __shfl_xor_sync(0xffffffffu, m, 2));
    const uint16_t scale = block_scale<D>(m, Codec::kDivisor);
    inv = inverse_scale(scale_value<D>(scale));
    return scale;
  }
  // A tiny block (core/block.hpp) is encoded lifted by 2^K and dropped back after decoding.
  __device__ static void lift(float v[kLaneValues], float by) {
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) v[i] *= by;
  }
  // Whether the integer codecs may quantize without their clamp (IntCodecBase::unclamped_safe: a
  // normal scale; the same codes); the other codecs always take their one path.
  __device__ static bool unclamped(uint16_t scale) {
    if constexpr (Codec::kKeepsDecoded) return Codec::template unclamped_safe<D>(scale);
    else return false;
  }
  template <bool kClamp>
  __device__ static Packed encode_with(const float v[kLaneValues], float inv) {
    if constexpr (Codec::kKeepsDecoded) return Codec::template encode<D, kClamp>(v, inv);
    else return Codec::template encode<D>(v, inv);
  }
  __device__ static uint16_t encode(const float v[kLaneValues], Packed& p) {
    if constexpr (Codec::kScaled) {
      float inv;
      const uint16_t scale = block_scale_of(v, inv);
      if (is_tiny_scale(scale)) {
        float w[kLaneValues];
#pragma unroll
        for (int i = 0; i < kLaneValues; ++i) w[i] = v[i] * kTinyLift<D>;
        p = encode_with<true>(w, inv);
      } else if (unclamped(scale)) {
        p = encode_with<false>(v, inv);
      } else {
        p = encode_with<true>(v, inv);
      }
      return scale;
    } else {
      p = Codec::template encode<D>(v, 1.0f);
      return 0;
    }
  }
  __device__ static void decode(const Packed& p, uint16_t scale, float v[kLaneValues]) {
    if constexpr (Codec::kScaled) {
      Codec::template decode<D>(p, scale_value<D>(scale), v);
      if (is_tiny_scale(scale)) lift(v, kTinyDrop<D>);
    } else {
      Codec::template decode<D>(p, 1.0f, v);
    }
  }
  // encode(), then v = what p decodes to: the integer codecs know it from their rounding (a
  // subtract and a multiply per value), the others decode.
  __device__ static uint16_t encode_keep(float v[kLaneValues], Packed& p) {
    if constexpr (Codec::kKeepsDecoded) {
      float inv;
      const uint16_t scale = block_scale_of(v, inv);
      const bool tiny = is_tiny_scale(scale);
      if (tiny) lift(v, kTinyLift<D>);
      if (!tiny && unclamped(scale)) p = Codec::template encode_keep<D, false>(v, inv, scale_value<D>(scale));
      else p = Codec::template encode_keep<D, true>(v, inv, scale_value<D>(scale));
      if (tiny) lift(v, kTinyDrop<D>);
      return scale;
    } else {
      const uint16_t scale = encode(v, p);
      decode(p, scale, v);
      return scale;
    }
  }
  __device__ static void store(uint8_t* slot, const SliceLayout<Codec>& sl, int lane, const Packed& p,
                               uint16_t scale) {
    reinterpret_cast<typename Codec::PlaneA*>(slot)[lane] = p.a;
    if constexpr (Codec::kPlaneBBytes > 0) reinterpret_cast<typename Codec::PlaneB*>(slot + sl.plane_a)[lane] = p.b;
    if constexpr (Codec::kScaled)
      if (lane % kLanesPerBlock == 0)
        reinterpret_cast<uint16_t*>(slot + sl.plane_a + sl.plane_b)[lane / kLanesPerBlock] = scale;
  }
  // `form`: where the lossless codec reads a slice's form; unused here.
  __device__ static uint16_t load(const uint8_t* slot, const SliceLayout<Codec>& sl, int lane, Packed& p,
                                  const uint32_t* /*form*/) {
    p.a = __ldcg(reinterpret_cast<const typename Codec::PlaneA*>(slot) + lane);
    if constexpr (Codec::kPlaneBBytes > 0)
      p.b = __ldcg(reinterpret_cast<const typename Codec::PlaneB*>(slot + sl.plane_a) + lane);
    if constexpr (Codec::kScaled)
      return __ldcg(reinterpret_cast<const unsigned short*>(slot + sl.plane_a + sl.plane_b) + lane / kLanesPerBlock);
    return 0;
  }
};

// The lossless codec's lanes: the scale word carries the block's largest exponent field (bits
// 0-7) and kNoFit when a value of the lane falls outside the codec's window; the CTA votes per
// slice, and the slice's form word (beside it in rs_forms/ag_forms) says which form it took.
template <DType D>
struct LaneIO<LosslessCodec, D> {
  using Packed = LosslessCodec::Packed;
  using Layout = SliceLayout<LosslessCodec>;
  static constexpr uint16_t kNoFit = 0x100;

  __device__ static uint16_t encode(const float v[kLaneValues], Packed& p) {
    p = LosslessCodec::encode<D>(v, 1.0f);  // the 16-bit values, rounded as the passthrough rounds
    if constexpr (D != DType::kBFloat16) {
      return kNoFit;  // fp16: 10 mantissa bits do not fit the packed byte
    } else {
      uint32_t m = LosslessCodec::lane_max_field(p.a);  // 4 consecutive lanes share a block of 32
      m = max(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = max(m, __shfl_xor_sync(0xffffffffu, m, 2));
      return uint16_t(m | (LosslessCodec::fits(p.a, m) ? 0u : kNoFit));
    }
  }
  __device__ static void decode(const Packed& p, uint16_t /*scale*/, float v[kLaneValues]) {
    LosslessCodec::decode<D>(p, 1.0f, v);
  }
  __device__ static uint16_t encode_keep(float v[kLaneValues], Packed& p) {
    const uint16_t scale = encode(v, p);
    decode(p, scale, v);
    return scale;
  }
  __device__ static void store(uint8_t* body, const Layout& sl, int lane, const Packed& p, uint16_t scale, bool raw) {
    if (raw) {
      reinterpret_cast<uint4*>(body)[lane] = p.a;
      return;
    }
    const LosslessCodec::Lane l = LosslessCodec::pack(p.a, scale & 0xffu);
    reinterpret_cast<uint2*>(body)[lane] = l.a;
    reinterpret_cast<uint32_t*>(body + sl.plane_a)[lane] = l.b;
    body[sl.plane_a + sl.plane_b + lane] = uint8_t(l.c);
    if (lane % kLanesPerBlock == 0) body[sl.plane_a + sl.plane_b + sl.plane_c + lane / kLanesPerBlock] = uint8_t(scale);
  }
  // The planes are loaded beside the form word, not after it: slices are nearly always packed, and
  // waiting for the form first put a second L2 round trip on every slice's path.
  __device__ static uint16_t load(const uint8_t* body, const Layout& sl, int lane, Packed& p, const uint32_t* form) {
    // (volatile asm: the compiler may not sink the plane loads below the test of the form)
    const uint32_t slice_form = ld_cg_u32(form);
    LosslessCodec::Lane l;
    l.a = ld_cg_u64(reinterpret_cast<const uint64_t*>(body) + lane);
    l.b = ld_cg_u32(reinterpret_cast<const uint32_t*>(body + sl.plane_a) + lane);
    l.c = ld_cg_u8(body + sl.plane_a + sl.plane_b + lane);
    const uint32_t e_max = ld_cg_u8(body + sl.plane_a + sl.plane_b + sl.plane_c + lane / kLanesPerBlock);
    if (slice_form == kSliceRaw) {
      p.a = __ldcg(reinterpret_cast<const uint4*>(body) + lane);
    } else {
      p.a = LosslessCodec::unpack(l, e_max);
    }
    return 0;
  }
};

// The rotated codecs' block transform (core/hadamard.hpp) on one lane: its 8 values, with the 3
// partner lanes of its block (consecutive threads 4k..4k+3, as the block scale's shuffles) through
// shuffles for the butterflies h = 8 (lane ^ 1) and 16 (lane ^ 2). The same operations, in the same
// order, as the host's rotate_block: every lane of the warp must take part.
// Cheaper forms of the same bits: the upper partner's a - b is fma(-1, b, a) (the product is exact,
// so one rounding, as the subtraction), which takes one FFMA where a select and an add took two;
// the sign flips fold into the power-of-two multiplies (signed_factor).
__device__ __forceinline__ void hadamard_lane(float v[kLaneValues]) {
  hadamard_lane_stages(v);
  const int lane = threadIdx.x;
#pragma unroll
  for (int mask = 1; mask <= 2; mask *= 2) {
    const float sign = (lane & mask) ? -1.0f : 1.0f;  // lower index: a + b; upper: a - b
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) {
      const float other = __shfl_xor_sync(0xffffffffu, v[i], mask);
      v[i] = __fmaf_rn(sign, v[i], other);
    }
  }
}
// The sign flips ride on the power-of-two multiplies (signed_factor: one FMUL by an immediate).
__device__ __forceinline__ void rotate_lane(float v[kLaneValues]) {
#pragma unroll
  for (int i = 0; i < kLaneValues; ++i) v[i] = __fmul_rn(v[i], signed_factor(i, kRotateScale));  // (_rn: never fused into an add)
  hadamard_lane(v);
}
__device__ __forceinline__ void unrotate_lane(float v[kLaneValues]) {
#pragma unroll
  for (int i = 0; i < kLaneValues; ++i) v[i] = __fmul_rn(v[i], kUnrotatePreScale);
  hadamard_lane(v);
#pragma unroll
  for (int i = 0; i < kLaneValues; ++i) v[i] = __fmul_rn(v[i], signed_factor(i, kUnrotatePostScale));
}

// The user's input lanes a phase reads, each loaded one lane ahead into registers: the next
// lane's HBM latency overlaps this lane's encode and send, where the kernel had one 16-byte load
// in flight per thread and a full latency to wait per slice. Use: issue() the first lane, then
// per lane take() it and issue() the next; a lane cut by the tensor's end is loaded when taken.
// kAhead = false loads at take(): every world size but 2, where the live register made most
// kernels spill (12-84 bytes) and no 4- or 8-GPU machine was there to time it.
template <bool kAhead>
struct LaneFetcher {
  uint4 next;
  __device__ void issue(const uint16_t* p, ptrdiff_t valid) {
    if constexpr (kAhead)
      if (valid >= kLaneValues) next = *reinterpret_cast<const uint4*>(p);
  }
  template <DType D>
  __device__ void take(const uint16_t* p, ptrdiff_t valid, float v[kLaneValues]) {
    if (kAhead && valid >= kLaneValues) {
      unpack_lane<D>(next, v);
    } else {
      load_lane<D>(p, valid, v);
    }
  }
};

}  // namespace qr
