// A codec on one GPU, no link: encode a tensor into one slice in HBM, decode it back, with the
// lanes the collectives use (LaneIO, the rotation's shuffles). What `quickreduce codec-speed`
// times (a codec's own cost, the rotated codec beside the plain one), and a bit-exact check of
// the device codecs against the CPU twin that needs no second rank.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "codecs/dispatch.hpp"
#include "tools/codec_speed.hpp"
#include "transport/lane_io.cuh"

namespace qr {
namespace {

constexpr int kThreads = 256;
// 8 CTAs of 256 threads an SM, as grid_for launches (unbounded, the rotated encode took 40
// registers, 6 CTAs an SM); the collectives' kernels are register-bounded too (two_shot.cuh).
constexpr int kCtasPerSm = 8;

// Lanes a thread loads before it works on the first of them: the loop's only memory parallelism
// (the encode's chain from load to store is long for the rotated codecs: transform, block max).
// 2 x H100: int4h encode 328.9 -> 317.2 us at 2 (int4 246.7 -> 242.4); the bound of 8 CTAs an SM
// alone (30 registers, was 40) changed nothing.
constexpr int kLanesInFlight = 2;

// Every thread of a warp runs every iteration (the block scale and the rotation shuffle across
// a block's 4 lanes): lanes past the tensor's end load zeros and store nothing.
template <class Codec, DType D>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) encode_kernel(const uint16_t* in, uint8_t* wire, size_t numel) {
  using IO = LaneIO<Codec, D>;
  const auto sl = SliceLayout<Codec>::make((numel + kBlockValues - 1) / kBlockValues * kBlockValues);
  const size_t stride = size_t(gridDim.x) * kThreads * kLanesInFlight;
  for (size_t first = size_t(blockIdx.x) * kThreads * kLanesInFlight; first < sl.lanes; first += stride) {
    float v[kLanesInFlight][kLaneValues];
#pragma unroll
    for (int u = 0; u < kLanesInFlight; ++u) {
      const size_t lane = first + size_t(u) * kThreads + threadIdx.x;
      load_lane<D>(in + lane * kLaneValues, ptrdiff_t(numel) - ptrdiff_t(lane * kLaneValues), v[u]);
    }
#pragma unroll
    for (int u = 0; u < kLanesInFlight; ++u) {
      const size_t lane = first + size_t(u) * kThreads + threadIdx.x;
      if constexpr (kIsRotated<Codec>) rotate_lane(v[u]);
      typename Codec::Packed p;
      const uint16_t scale = IO::encode(v[u], p);
      if (lane < sl.lanes) IO::store(wire, sl, int(lane), p, scale);
    }
  }
}

template <class Codec, DType D>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) decode_kernel(const uint8_t* wire, uint16_t* out, size_t numel) {
  using IO = LaneIO<Codec, D>;
  const auto sl = SliceLayout<Codec>::make((numel + kBlockValues - 1) / kBlockValues * kBlockValues);
  const size_t stride = size_t(gridDim.x) * kThreads * kLanesInFlight;
  for (size_t first = size_t(blockIdx.x) * kThreads * kLanesInFlight; first < sl.lanes; first += stride) {
    typename Codec::Packed p[kLanesInFlight]{};
    uint16_t scale[kLanesInFlight]{};
#pragma unroll
    for (int u = 0; u < kLanesInFlight; ++u) {
      const size_t lane = first + size_t(u) * kThreads + threadIdx.x;
      if (lane < sl.lanes) scale[u] = IO::load(wire, sl, int(lane), p[u], nullptr);
    }
#pragma unroll
    for (int u = 0; u < kLanesInFlight; ++u) {
      const size_t lane = first + size_t(u) * kThreads + threadIdx.x;
      float v[kLaneValues];
      IO::decode(p[u], scale[u], v);
      if constexpr (kIsRotated<Codec>) unrotate_lane(v);
      store_lane<D>(out + lane * kLaneValues, ptrdiff_t(numel) - ptrdiff_t(lane * kLaneValues), v);
    }
  }
}

int grid_for(size_t numel) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const size_t lanes = (numel + kLaneValues - 1) / kLaneValues;
  const size_t needed = (lanes + size_t(kThreads) * kLanesInFlight - 1) / (size_t(kThreads) * kLanesInFlight);
  return int(needed < size_t(sms) * kCtasPerSm ? needed : size_t(sms) * kCtasPerSm);
}

}  // namespace

size_t codec_wire_bytes(size_t numel, CodecId codec) {
  return dispatch_codec_only(codec, std::integral_constant<DType, DType::kBFloat16>{}, [&](auto c, auto) -> size_t {
    using Codec = decltype(c);
    if constexpr (!Codec::kScaled) throw std::invalid_argument("codec_speed takes the block-scaled codecs only");
    else return SliceLayout<Codec>::make((numel + kBlockValues - 1) / kBlockValues * kBlockValues).total;
  });
}

void codec_speed_launch(uintptr_t in, uintptr_t wire, uintptr_t out, size_t numel, DType dtype, CodecId codec,
                        uintptr_t stream, bool encode, bool decode) {
  if (numel == 0 || numel % kLaneValues != 0) throw std::invalid_argument("codec_speed: numel must be a positive multiple of 8");
  const int grid = grid_for(numel);
  auto s = reinterpret_cast<cudaStream_t>(stream);
  dispatch_codec(codec, dtype, [&](auto c, auto d) {
    using Codec = decltype(c);
    constexpr DType D = decltype(d)::value;
    if constexpr (!Codec::kScaled) {
      throw std::invalid_argument("codec_speed takes the block-scaled codecs only");
    } else {
      if (encode)
        encode_kernel<Codec, D><<<grid, kThreads, 0, s>>>(reinterpret_cast<const uint16_t*>(in),
                                                           reinterpret_cast<uint8_t*>(wire), numel);
      if (decode)
        decode_kernel<Codec, D><<<grid, kThreads, 0, s>>>(reinterpret_cast<const uint8_t*>(wire),
                                                           reinterpret_cast<uint16_t*>(out), numel);
    }
  });
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("codec_speed launch: ") + cudaGetErrorString(err));
}

}  // namespace qr
