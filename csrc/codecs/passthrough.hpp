// Passthrough: the values travel in their own 16-bit format; no scale.
#pragma once
#include "core/block.hpp"

namespace qr {

struct PassthroughCodec {
  static constexpr bool kScaled = false;
  static constexpr float kDivisor = 1.0f;
  using PlaneA = uint4;  // 8 x 16-bit values
  struct Packed { PlaneA a; };
  static constexpr int kPlaneABytes = sizeof(PlaneA);
  static constexpr int kPlaneBBytes = 0;

  template <DType D>
  QR_HD static Packed encode(const float v[kLaneValues], float /*inv_scale*/) {
    uint16_t h[kLaneValues];
#pragma unroll
    for (int i = 0; i < kLaneValues; ++i) h[i] = from_float<D>(v[i]);
    Packed p;
    p.a.x = h[0] | (uint32_t(h[1]) << 16);
    p.a.y = h[2] | (uint32_t(h[3]) << 16);
    p.a.z = h[4] | (uint32_t(h[5]) << 16);
    p.a.w = h[6] | (uint32_t(h[7]) << 16);
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
