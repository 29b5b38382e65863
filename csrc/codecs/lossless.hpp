// Lossless codec: bf16 values packed to 13.25 bits, bit for bit what the passthrough sends.
//
// A bf16 value is sign (1) | exponent field e (8) | mantissa (7). Within a block of 32 values the
// exponents of real data span few binades, so a value travels as its sign and mantissa (a byte,
// plane A), and a 5-bit code (low 4 bits in plane B, high bit in plane C): e_max - e for e in
// [e_max - 30, e_max], where e_max is the block's largest field (a byte per block, plane E), or
// kZeroCode for e = 0 (zeros and subnormals). A value outside that window cannot be packed (a
// block holding a NaN/Inf and finite values, or exponent fields 31 or more apart): its slice is
// then sent raw, as the passthrough sends it (the two-shot kernel votes per slice, and a word beside the
// slice, in the workspace's rs_forms/ag_forms, says which form it took). fp16 has 10 mantissa
// bits, which do not fit a byte: fp16 slices are always sent raw. Why 5 bits and not 4: with a
// 15-binade window ~30% of 4096-value slices of Gaussian data hold a value below it (numpy),
// with 31 binades almost none do.
//
// The generic codec interface (encode/decode on floats, used by the CPU twin) is the passthrough's:
// the 16-bit rounding of the value is this codec's whole effect on a result. The packing itself
// lives in pack()/unpack() below, shared by the kernels and the CPU round-trip test.
#pragma once
#include "codecs/passthrough.hpp"
#include "core/block.hpp"

namespace qr {

// On the generic interface it is the passthrough (the CPU twin's view of it).
struct LosslessCodec : PassthroughCodec {
  // ---- the packed form (bf16 only) ----
  static constexpr uint32_t kZeroCode = 31;  // exponent field 0
  static constexpr uint32_t kWindow = 30;    // largest e_max - e a code holds
  struct Lane {     // one lane's 8 values packed
    uint2 a;        // sign | mantissa, a byte a value
    uint32_t b;     // code bits 0-3, a nibble a value
    uint32_t c;     // code bit 4, a bit a value (bits 0-7)
  };
  // Both values of a 32-bit word at once, one per 16-bit half ("2" in a name: per half). No half
  // ever carries into the other: fields and codes stay below 2^8.
  static constexpr uint32_t kLow = 0x00010001u;  // 1 in each half
  QR_HD static uint32_t fields2(uint32_t w) { return (w >> 7) & 0x00ff00ffu; }
  // 0xffff in each half that is 0, else 0.
  QR_HD static uint32_t zero_mask2(uint32_t x) { return ((((x + 0x7fff7fffu) >> 15) & kLow) ^ kLow) * 0xffffu; }
  QR_HD static uint32_t max2(uint32_t x, uint32_t y) {
#if QR_DEVICE_COMPILE
    return __vmaxu2(x, y);
#else
    const uint32_t lo = (x & 0xffffu) > (y & 0xffffu) ? x & 0xffffu : y & 0xffffu;
    const uint32_t hi = (x >> 16) > (y >> 16) ? x >> 16 : y >> 16;
    return lo | hi << 16;
#endif
  }
  QR_HD static uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t selector) {
#if QR_DEVICE_COMPILE
    return __byte_perm(x, y, selector);
#else
    const uint64_t bytes = uint64_t(y) << 32 | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= uint32_t((bytes >> (8 * ((selector >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
    return r;
#endif
  }

  // Largest exponent field of the lane's 8 bf16 values (the block's is the max over its 4 lanes).
  QR_HD static uint32_t lane_max_field(const uint4& raw) {
    const uint32_t m = max2(max2(fields2(raw.x), fields2(raw.y)), max2(fields2(raw.z), fields2(raw.w)));
    return (m & 0xffffu) > (m >> 16) ? m & 0xffffu : m >> 16;
  }
  // The codes of a word's two values under the block's e_max (e_max in both halves), and whether
  // either falls outside the window (nonzero = does not fit).
  QR_HD static uint32_t codes2(uint32_t w, uint32_t e_max2, uint32_t& misfit) {
    const uint32_t e = fields2(w), zero = zero_mask2(e);
    const uint32_t d = e_max2 - e;  // e <= e_max: no borrow between halves
    misfit |= (d + 0x7fe17fe1u) & 0x80008000u & ~zero;  // d > kWindow (30) in a nonzero half
    return (d & ~zero) | (kZeroCode * kLow & zero);
  }
  // Whether every value of the lane has a code under the block's e_max.
  QR_HD static bool fits(const uint4& raw, uint32_t e_max) {
    uint32_t misfit = 0;
    codes2(raw.x, e_max * kLow, misfit), codes2(raw.y, e_max * kLow, misfit);
    codes2(raw.z, e_max * kLow, misfit), codes2(raw.w, e_max * kLow, misfit);
    return misfit == 0;
  }
  // Pack a lane whose values fit (fits() held for its block's e_max; otherwise the codes are junk).
  QR_HD static Lane pack(const uint4& raw, uint32_t e_max) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    uint32_t sm[4], nib[4], misfit = 0;
    Lane l{{0u, 0u}, 0u, 0u};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t code = codes2(w[k], e_max * kLow, misfit);
      sm[k] = ((w[k] >> 8) & 0x00800080u) | (w[k] & 0x007f007fu);  // sign | mantissa, bits 0-7 and 16-23
      nib[k] = (code & 0x000fu) | ((code >> 12) & 0x00f0u);         // the two low nibbles, one byte
      l.c |= ((code >> 4) & 1u) << (2 * k) | ((code >> 20) & 1u) << (2 * k + 1);
    }
    l.a.x = byte_perm(sm[0], sm[1], 0x6420);
    l.a.y = byte_perm(sm[2], sm[3], 0x6420);
    l.b = byte_perm(byte_perm(nib[0], nib[1], 0x0040), byte_perm(nib[2], nib[3], 0x0040), 0x5410);
    return l;
  }
  QR_HD static uint4 unpack(const Lane& l, uint32_t e_max) {
    const uint32_t sel[4] = {0x4140, 0x4342, 0x4140, 0x4342};  // bytes 0,1 / 2,3 into the halves
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t sm = byte_perm(k < 2 ? l.a.x : l.a.y, 0u, sel[k]);
      const uint32_t nib = (l.b >> (8 * k)) & 0xffu;
      const uint32_t code = (nib & 0xfu) | ((nib & 0xf0u) << 12) | ((l.c >> (2 * k)) & 1u) << 4 |
                            ((l.c >> (2 * k + 1)) & 1u) << 20;
      const uint32_t zero = zero_mask2(code ^ (kZeroCode * kLow));
      const uint32_t e = (e_max * kLow - (code & ~zero)) & ~zero;  // zero halves subtract 0: no borrow
      w[k] = ((sm & 0x00800080u) << 8) | (e << 7) | (sm & 0x007f007fu);
    }
    uint4 raw;
    raw.x = w[0], raw.y = w[1], raw.z = w[2], raw.w = w[3];
    return raw;
  }
};

// Its slot layout is SliceLayout<LosslessCodec> (codec_list.hpp); a slice's form word says which.
constexpr uint32_t kSliceRaw = 1, kSlicePacked = 2;

}  // namespace qr
