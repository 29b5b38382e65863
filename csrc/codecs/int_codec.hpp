// Symmetric integer codecs (int8, int6, int4): q = rint(clamp(v / scale, -qmax, qmax)),
// scale = absmax / qmax. Symmetric because the error of the asymmetric [-2^(b-1), 2^(b-1)-1] grid
// is no smaller for zero-mean activations and the symmetric one needs no zero point.
#pragma once
#include "core/block.hpp"
#include "core/hadamard.hpp"

namespace qr {

template <int kBits>
struct IntQuant {
  static constexpr int kQMax = (1 << (kBits - 1)) - 1;
  static constexpr float kDivisor = float(kQMax);
  // Round-to-nearest-even by the adder instead of rint + float->int conversion (conversions run
  // at 1/8 of the FP32 rate on Hopper and dominated the codec's time): adding 1.5 * 2^23 leaves
  // round(c) in the low mantissa bits for |c| < 2^22. Same result as rint, on host and device.
  static constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  static constexpr uint32_t kMagicBits = 0x4B400000u;
  // Biased code in [0, 2*qmax] (unsigned fields pack without sign extension). Also leaves in v
  // what the code decodes to, (code - qmax) * scale, the same bits as dequantize(): the owner of a
  // reduced slice keeps its result without decoding it again (encoders that only send ignore it).
  // kClamp = false: only where IntCodecBase::unclamped_safe() holds (the same bits, two FMNMX fewer a value).
  template <bool kClamp = true>
  QR_HD static uint32_t quantize_keep(float& v, float inv_scale, float scale) {
    const float c = v * inv_scale;
    const float biased = (kClamp ? clampf(c, -kDivisor, kDivisor) : c) + kMagic;  // kMagic + round(c)
    v = (biased - kMagic) * scale;
    return float_bits(biased) - kMagicBits + uint32_t(kQMax);
  }
  // (code - qmax) as a float, exactly, by the inverse trick: an integer add and a float add.
  QR_HD static float dequantize(uint32_t code, float scale) {
    return (bits_float(kMagicBits + code) - (kMagic + kDivisor)) * scale;
  }
#if QR_DEVICE_COMPILE
  // Two codes at bits 0.. and 16.. of `pair` at once: 0x6400 | code is the fp16 1024 + code
  // (exact below 2048), so one paired fp16 subtract leaves code - qmax, exactly, in both halves;
  // same values as dequantize() in ~3.5 instructions per value instead of ~5.
  __device__ static void dequantize_pair(uint32_t pair, float scale, float& lo, float& hi) {
    const uint32_t biased = pair | 0x64006400u;
    const __half2 h = __hsub2(*reinterpret_cast<const __half2*>(&biased),
                              __half2half2(__ushort_as_half(uint16_t(0x6400 + kQMax))));
    const float2 f = __half22float2(h);
    lo = f.x * scale;
    hi = f.y * scale;
  }
#endif
};

// What the integer codecs share: a block scale, and encode() as encode_keep() without the kept
// values (Codec: the derived codec, whose encode_keep() packs the codes).
template <class Codec, int kBits>
struct IntCodecBase {
  static constexpr bool kScaled = true;
  static constexpr bool kKeepsDecoded = true;  // encode_keep(): the decoded values come with the codes
  using Q = IntQuant<kBits>;
  static constexpr float kDivisor = Q::kDivisor;
  // Whether the clamp can go (IntQuant::quantize_keep<false>): the block's 16-bit scale (format S) is
  // normal. Then one rounding to S (relative error <= 2^-8, bf16) put it at >= absmax / qmax * 255/256,
  // so |v| / scale <= qmax * 256/255 (127.498 for int8) for every v of the block, and rounding never
  // leaves [-qmax, qmax]: the same codes as with the clamp. Zero, subnormal (fp16), Inf and NaN scales
  // keep the clamp (for a NaN block it keeps the codes the twin's).
  template <DType S>
  QR_HD static bool unclamped_safe(uint16_t scale_bits) {
    static_assert(kBits <= 8, "the margin needs qmax * 256/255 < qmax + 0.5: qmax < 128");
    constexpr uint32_t kExp = S == DType::kFloat16 ? 0x7c00u : 0x7f80u, kExpLsb = kExp & (~kExp + 1u);
    return (uint32_t(scale_bits) & kExp) - kExpLsb < kExp - kExpLsb;  // exponent neither 0 nor all ones
  }
  template <DType D, bool kClamp = true>
  QR_HD static auto encode(const float v[kLaneValues], float inv) {
    float w[kLaneValues];
    for (int i = 0; i < kLaneValues; ++i) w[i] = v[i];
    return Codec::template encode_keep<D, kClamp>(w, inv, 0.0f);  // the kept values are dead code here
  }
};

struct Int8Codec : IntCodecBase<Int8Codec, 8> {
  using PlaneA = uint2;  // 8 x 8 bits
  struct Packed { PlaneA a; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = 0;

  // encode() that leaves in v what p decodes to (scale: the block's stored scale, as decode reads it).
  template <DType D, bool kClamp = true>
  QR_HD static Packed encode_keep(float v[kLaneValues], float inv, float scale) {
    auto q = [&](int i) { return Q::template quantize_keep<kClamp>(v[i], inv, scale); };
    Packed p;
    p.a.x = q(0) | q(1) << 8 | q(2) << 16 | q(3) << 24;
    p.a.y = q(4) | q(5) << 8 | q(6) << 16 | q(7) << 24;
    return p;
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float s, float v[kLaneValues]) {
#if QR_DEVICE_COMPILE
    Q::dequantize_pair(p.a.x & 0x00ff00ffu, s, v[0], v[2]);
    Q::dequantize_pair((p.a.x >> 8) & 0x00ff00ffu, s, v[1], v[3]);
    Q::dequantize_pair(p.a.y & 0x00ff00ffu, s, v[4], v[6]);
    Q::dequantize_pair((p.a.y >> 8) & 0x00ff00ffu, s, v[5], v[7]);
#else
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[i] = Q::dequantize((p.a.x >> (8 * i)) & 0xffu, s);
      v[4 + i] = Q::dequantize((p.a.y >> (8 * i)) & 0xffu, s);
    }
#endif
  }
};

struct Int4Codec : IntCodecBase<Int4Codec, 4> {
  using PlaneA = uint32_t;  // 8 x 4 bits
  struct Packed { PlaneA a; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = 0;

  template <DType D, bool kClamp = true>
  QR_HD static Packed encode_keep(float v[kLaneValues], float inv, float scale) {
    Packed p{0};
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) p.a |= Q::template quantize_keep<kClamp>(v[i], inv, scale) << (4 * i);
    return p;
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float s, float v[kLaneValues]) {
#if QR_DEVICE_COMPILE
#pragma unroll
    for (int i = 0; i < 4; ++i) Q::dequantize_pair((p.a >> (4 * i)) & 0x000f000fu, s, v[i], v[i + 4]);
#else
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) v[i] = Q::dequantize((p.a >> (4 * i)) & 0xfu, s);
#endif
  }
};

// 6 bits split into two planes, the low 4 bits (like int4) and the high 2 bits, so every store
// stays a power-of-two width (4 + 2 bytes per 8 values).
struct Int6Codec : IntCodecBase<Int6Codec, 6> {
  using PlaneA = uint32_t;
  using PlaneB = uint16_t;
  struct Packed { PlaneA a; PlaneB b; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = sizeof(PlaneB);

  template <DType D, bool kClamp = true>
  QR_HD static Packed encode_keep(float v[kLaneValues], float inv, float scale) {
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) {
      uint32_t q = Q::template quantize_keep<kClamp>(v[i], inv, scale);
      lo |= (q & 0xfu) << (4 * i);
      hi |= (q >> 4) << (2 * i);
    }
    return Packed{lo, uint16_t(hi)};
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float s, float v[kLaneValues]) {
#if QR_DEVICE_COMPILE
    // high bits of values 0-3 at bits 0..7, of values 4-7 at bits 16..23: pairs (i, i + 4) line up
    const uint32_t hi = (uint32_t(p.b) & 0xffu) | ((uint32_t(p.b) & 0xff00u) << 8);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      Q::dequantize_pair(((p.a >> (4 * i)) & 0x000f000fu) | (((hi >> (2 * i)) & 0x00030003u) << 4), s, v[i], v[i + 4]);
#else
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) {
      uint32_t q = ((p.a >> (4 * i)) & 0xfu) | (((uint32_t(p.b) >> (2 * i)) & 3u) << 4);
      v[i] = Q::dequantize(q, s);
    }
#endif
  }
};

// The rotated integer codecs (core/hadamard.hpp): each block of 32 is rotated before it is encoded
// and rotated back after it is decoded (the algorithms do it: the transform spans a block's 4
// lanes); on the wire they are int4 and int6.
struct Int4HCodec : Int4Codec {
  static constexpr bool kRotated = true;
};
struct Int6HCodec : Int6Codec {
  static constexpr bool kRotated = true;
};

}  // namespace qr
