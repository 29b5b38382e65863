// Passthrough: the values travel in their own 16-bit format; no scale.
#pragma once
#include "core/block.hpp"

namespace qr {

struct PassthroughCodec {
  static constexpr bool kScaled = false;
  static constexpr bool kKeepsDecoded = false;  // no encode_keep(): the owner decodes its payload
  static constexpr float kDivisor = 1.0f;
  using PlaneA = uint4;  // 8 x 16-bit values
  struct Packed { PlaneA a; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = 0;

  template <DType D>
  QR_HD static Packed encode(const float v[kLaneValues], float /*inv_scale*/) {
    Packed p;
    p.a.x = pack2<D>(v[0], v[1]);
    p.a.y = pack2<D>(v[2], v[3]);
    p.a.z = pack2<D>(v[4], v[5]);
    p.a.w = pack2<D>(v[6], v[7]);
    return p;
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float /*scale*/, float v[kLaneValues]) {
    const uint32_t w[4] = {p.a.x, p.a.y, p.a.z, p.a.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = to_float<D>(uint16_t(w[i] & 0xffffu));
      v[2 * i + 1] = to_float<D>(uint16_t(w[i] >> 16));
    }
  }
};

// The passthrough of fp32 tensors: 8 values in two 16-byte planes (32 bits a value). Not in the
// registry: the "fp16"/"bf16"/"fp32" passthrough id selects it for fp32 tensors (WireCodec below).
struct Fp32PassthroughCodec {
  static constexpr bool kScaled = false;
  static constexpr bool kKeepsDecoded = false;
  static constexpr float kDivisor = 1.0f;
  using PlaneA = uint4;  // values 0-3
  using PlaneB = uint4;  // values 4-7
  struct Packed { PlaneA a; PlaneB b; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = sizeof(PlaneB);

  template <DType D>
  QR_HD static Packed encode(const float v[kLaneValues], float /*inv_scale*/) {
    Packed p;
    p.a.x = float_bits(v[0]), p.a.y = float_bits(v[1]), p.a.z = float_bits(v[2]), p.a.w = float_bits(v[3]);
    p.b.x = float_bits(v[4]), p.b.y = float_bits(v[5]), p.b.z = float_bits(v[6]), p.b.w = float_bits(v[7]);
    return p;
  }
  template <DType D>
  QR_HD static void decode(const Packed& p, float /*scale*/, float v[kLaneValues]) {
    v[0] = bits_float(p.a.x), v[1] = bits_float(p.a.y), v[2] = bits_float(p.a.z), v[3] = bits_float(p.a.w);
    v[4] = bits_float(p.b.x), v[5] = bits_float(p.b.y), v[6] = bits_float(p.b.z), v[7] = bits_float(p.b.w);
  }
};

}  // namespace qr
