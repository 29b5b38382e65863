// The packed one-shot's wire format: 40 bf16 values (a "group", 5 vectors of 16 bytes) sent bit
// for bit in 4 vectors when they fit, else raw in 6, every 32-bit word marked as arrived.
//
// Arrival (the Lamport scheme without a sentinel value): every word sent has bit 31 set and an
// empty slot holds 0. An aligned 32-bit element of a vector store is single-copy atomic, so a word
// with bit 31 set has arrived whole; a vector whose 4 words have it has arrived.
//
// Packed form (a group whose nonzero exponent fields all lie within 14 of its largest, E): a value
// travels as a 12-bit code sign(1) | k(4) | mantissa(7), k = e - E + 15 in 1..15, or k = 0 for
// e = 0 (zeros and subnormals, whose mantissa is kept). Word j = 4i + w (i < 4) carries the codes
// of input vector i's word w (bits 0-23) and a 7-bit piece of a side stream (bits 24-30): the
// codes of vector 4 (24 bits of its word w' in the side bits of words 4w'..4w'+3, 7+7+7+3) and in
// the 4 spare bits after each w''s last piece: the form flag (w' = 0, i.e. word 3 bit 30), E's
// low nibble (w' = 1) and high nibble (w' = 2). 40 * 12 + 8 + 1 = 489 of 496 payload bits.
// Raw form (the rest, rare: with 14 binades a group of 40 Gaussian values falls outside with
// p ~ 0.4%): words 0-19 carry the low 15 bits of input word j's two values (bit 30 clear, which
// says "raw" in word 3), words 20-23 the 40 sign bits, 10 a word.
// bf16 only: fp16's 10 mantissa bits do not fit a code.
#pragma once
#include "codecs/lossless.hpp"

namespace qr {

struct LosslessGroup {
  static constexpr int kInVectors = 5;      // 40 values
  static constexpr int kPackedVectors = 4;  // what a packed group sends
  static constexpr int kSlotVectors = 6;    // what a raw group sends: a group's slot in the buffer
  static constexpr uint32_t kArrived = 1u << 31;
  static constexpr uint32_t kPackedForm = 1u << 30;  // in word 3
  static constexpr uint32_t kWindow = 14;           // largest E - e a code holds
  static constexpr uint32_t kLow = LosslessCodec::kLow;

  QR_HD static uint32_t word(const uint4* v, int j) {
    const uint4& x = v[j / 4];
    return j % 4 == 0 ? x.x : j % 4 == 1 ? x.y : j % 4 == 2 ? x.z : x.w;
  }
  QR_HD static void set_word(uint4* v, int j, uint32_t value) {
    uint4& x = v[j / 4];
    if (j % 4 == 0) x.x = value;
    else if (j % 4 == 1) x.y = value;
    else if (j % 4 == 2) x.z = value;
    else x.w = value;
  }
  QR_HD static bool arrived(const uint4& v) { return (v.x & v.y & v.z & v.w & kArrived) != 0; }
  QR_HD static bool packed(const uint4& first) { return (first.w & kPackedForm) != 0; }
  // E of a packed group, from its vectors 1 and 2 (words 7 and 11).
  QR_HD static uint32_t exponent_max(const uint4& v1, const uint4& v2) {
    return ((v1.w >> 27) & 0xfu) | ((v2.w >> 27) & 0xfu) << 4;
  }
  QR_HD static uint32_t exponent_max(const uint4* slot) { return exponent_max(slot[1], slot[2]); }

  QR_HD static uint32_t sub2(uint32_t x, uint32_t y) {  // per 16-bit half, wrapping, no borrow across
#if QR_DEVICE_COMPILE
    return __vsub2(x, y);
#else
    return ((x - y) & 0xffffu) | (((x >> 16) - (y >> 16)) & 0xffffu) << 16;
#endif
  }
  QR_HD static uint32_t min2(uint32_t x, uint32_t y) {
#if QR_DEVICE_COMPILE
    return __vminu2(x, y);
#else
    const uint32_t lo = (x & 0xffffu) < (y & 0xffffu) ? x & 0xffffu : y & 0xffffu;
    const uint32_t hi = (x >> 16) < (y >> 16) ? x >> 16 : y >> 16;
    return lo | hi << 16;
#endif
  }
  // Two codes of a word's two values (bits 0-11 and 12-23) under E (junk for a value that does not fit).
  QR_HD static uint32_t codes2(uint32_t w, uint32_t e_max) {
    const uint32_t f = LosslessCodec::fields2(w), zero = LosslessCodec::zero_mask2(f);
    const uint32_t k = ((f + (256u + 15u - e_max) * kLow) & 0x000f000fu) & ~zero;  // f - E + 15 mod 16
    const uint32_t c = ((w >> 4) & 0x08000800u) | (k << 7) | (w & 0x007f007fu);  // a code in each half
    return (c & 0xfffu) | ((c >> 4) & 0xfff000u);
  }
  // The word of two values back from their two codes.
  QR_HD static uint32_t values2(uint32_t codes, uint32_t e_max) {
    const uint32_t c = (codes & 0xfffu) | ((codes & 0xfff000u) << 4);
    const uint32_t k = (c >> 7) & 0x000f000fu, zero = LosslessCodec::zero_mask2(k);
    const uint32_t e = ((k + (e_max + 241u) * kLow) & 0x00ff00ffu) & ~zero;  // k + E - 15, never borrowing
    return ((c << 4) & 0x80008000u) | (e << 7) | (c & 0x007f007fu);
  }

  // Encoding, one output vector at a time so that a kernel can store each as soon as it is made
  // (and hold fewer registers): plan() once, then packed_vector(i) for i < 4 when it fits, else
  // raw_vector(i) for i < 6.
  struct Plan {
    uint32_t e_max;
    bool fits;
    uint32_t side[4];  // the codes of input vector 4, a word each
  };
  // The largest exponent field (E) and the smallest nonzero one decide whether a group fits. The
  // fields are compared in place (w & 0x7f80 in each half), an expression codes2 does not share:
  // sharing it let the compiler keep 40 fields and masks live up to the packing. Accumulated per
  // vector (hi = 0, lo = ~0 to start) so that lanes holding a group's vectors can combine theirs.
  QR_HD static void accumulate_fields(const uint4& v, uint32_t& hi, uint32_t& lo) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t f = word(&v, k) & 0x7f807f80u;  // fields << 7
      hi = LosslessCodec::max2(hi, f);
      lo = min2(lo, sub2(f, 0x00800080u));  // field - 1 in each half: a zero field wraps to the top
    }
  }
  QR_HD static uint32_t e_max_of(uint32_t hi) { return ((hi & 0xffffu) > (hi >> 16) ? hi & 0xffffu : hi >> 16) >> 7; }
  QR_HD static bool fits_of(uint32_t hi, uint32_t lo) {
    const uint32_t smallest = (((lo & 0xffffu) < (lo >> 16) ? lo & 0xffffu : lo >> 16) + 0x80u) >> 7;
    return smallest + kWindow >= e_max_of(hi);  // all zero: smallest = 512
  }
  QR_HD static Plan plan(const uint4 in[kInVectors]) {
    uint32_t hi = 0, lo = 0xffffffffu;
#pragma unroll
    for (int i = 0; i < kInVectors; ++i) accumulate_fields(in[i], hi, lo);
    Plan p;
    p.e_max = e_max_of(hi);
    p.fits = fits_of(hi, lo);
#pragma unroll
    for (int w = 0; w < 4; ++w) p.side[w] = codes2(word(in, 16 + w), p.e_max);
    return p;
  }
  // The sign bits of one input vector (bits 2w and 2w+1: word w's two values), and the sign row
  // built from the 5 vectors' (input word j = 4i + w goes to row word j / 5, bits 2 (j % 5) + 0/1).
  QR_HD static uint32_t signs_of(const uint4& v) {
    uint32_t s = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) s |= ((word(&v, w) >> 15) & 1u) << (2 * w) | (word(&v, w) >> 31) << (2 * w + 1);
    return s;
  }
  QR_HD static uint4 sign_row_of(const uint32_t signs[kInVectors]) {
    uint32_t t[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int i = 0; i < kInVectors; ++i)
#pragma unroll
      for (int w = 0; w < 4; ++w) t[(4 * i + w) / 5] |= ((signs[i] >> (2 * w)) & 3u) << (2 * ((4 * i + w) % 5));
    uint4 v;
    v.x = kArrived | t[0], v.y = kArrived | t[1], v.z = kArrived | t[2], v.w = kArrived | t[3];
    return v;
  }
  // Packed vector i (< 4) from input vector i, the codes of input vector 4's word i (`side`) and E.
  QR_HD static uint4 packed_row(const uint4& in_i, uint32_t side, int i, uint32_t e_max) {
    const uint32_t spare = i == 0 ? kPackedForm >> 27 : i == 1 ? e_max & 0xfu : i == 2 ? e_max >> 4 : 0u;
    uint4 v;
#pragma unroll
    for (int piece = 0; piece < 4; ++piece) {  // word 4i + piece carries piece `piece` of side
      const uint32_t bits = piece < 3 ? (side >> (7 * piece)) & 0x7fu : (side >> 21) | spare << 3;  // bits 27-30
      set_word(&v, piece, kArrived | bits << 24 | codes2(word(&in_i, piece), e_max));
    }
    return v;
  }
  QR_HD static uint4 packed_vector(const uint4& in_i, const Plan& p, int i) {
    return packed_row(in_i, p.side[i], i, p.e_max);
  }
  // Raw vector i < 5 (from input vector i alone) and the sign vector 5 (from all of them).
  QR_HD static uint4 raw_row(const uint4& in_i) {
    uint4 v;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t x = word(&in_i, k);
      set_word(&v, k, kArrived | (x & 0x7fffu) | ((x >> 16) & 0x7fffu) << 15);
    }
    return v;
  }
  QR_HD static uint4 sign_row(const uint4 in[kInVectors]) {
    uint32_t signs[kInVectors];
#pragma unroll
    for (int i = 0; i < kInVectors; ++i) signs[i] = signs_of(in[i]);
    return sign_row_of(signs);
  }
  QR_HD static uint4 raw_vector(const uint4 in[kInVectors], int i) { return i < 5 ? raw_row(in[i]) : sign_row(in); }
  // The whole slot at once (the CPU twin): 4 vectors (returns true) or 6 (raw, returns false).
  QR_HD static bool encode(const uint4 in[kInVectors], uint4 out[kSlotVectors]) {
    const Plan p = plan(in);
#pragma unroll
    for (int i = 0; i < kSlotVectors; ++i)
      if (p.fits ? i < kPackedVectors : true) out[i] = p.fits ? packed_vector(in[i], p, i) : raw_vector(in, i);
    return p.fits;
  }

  // Decoding. Packed: vector i < 4 from packed vector i and E; vector 4 from the side bits of all
  // four. Raw: vector i from raw vector i and the sign vector.
  QR_HD static uint4 decode_row(const uint4& row, uint32_t e_max) {
    uint4 v;
#pragma unroll
    for (int w = 0; w < 4; ++w) set_word(&v, w, values2(word(&row, w) & 0xffffffu, e_max));
    return v;
  }
  QR_HD static uint4 decode_side(const uint4& r0, const uint4& r1, const uint4& r2, const uint4& r3, uint32_t e_max) {
    const uint4 rows[4] = {r0, r1, r2, r3};
    uint4 v;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t codes = 0;
#pragma unroll
      for (int piece = 0; piece < 4; ++piece)
        codes |= ((word(rows, 4 * w + piece) >> 24) & (piece < 3 ? 0x7fu : 0x7u)) << (7 * piece);
      set_word(&v, w, values2(codes, e_max));
    }
    return v;
  }
  QR_HD static uint4 decode_raw_row(const uint4& row, const uint4& signs, int i) {
    uint4 v;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int j = 4 * i + k;
      const uint32_t x = word(&row, k), t = uint32_t(j) / 5u;
      const uint32_t s = (t == 0 ? signs.x : t == 1 ? signs.y : t == 2 ? signs.z : signs.w) >> (2 * (j % 5));
      set_word(&v, k, (x & 0x7fffu) | (s & 1u) << 15 | ((x >> 15) & 0x7fffu) << 16 | ((s >> 1) & 1u) << 31);
    }
    return v;
  }
  // Input vector i (0..4) of a slot that has arrived, in either form.
  QR_HD static uint4 decode(const uint4 slot[kSlotVectors], int i) {
    if (!packed(slot[0])) return decode_raw_row(slot[i], slot[5], i);
    const uint32_t e_max = exponent_max(slot);
    return i < 4 ? decode_row(slot[i], e_max) : decode_side(slot[0], slot[1], slot[2], slot[3], e_max);
  }
};

}  // namespace qr
