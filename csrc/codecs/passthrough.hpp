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

}  // namespace qr
