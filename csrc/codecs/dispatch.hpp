// Compile-time dispatch from runtime (dtype, codec) ids to a functor templated on both.
// One switch, read off the registry, serves the kernels' launcher and the CPU twin.
#pragma once
#include <stdexcept>
#include <string>

#include "codecs/codec_list.hpp"

namespace qr {

template <class F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat16: return f(std::integral_constant<DType, DType::kFloat16>{});
    case DType::kBFloat16: return f(std::integral_constant<DType, DType::kBFloat16>{});
  }
  throw std::invalid_argument("unsupported dtype id " + std::to_string(int(dtype)));
}

// f is called as f(CodecType{}, dtype_constant).
template <class F>
decltype(auto) dispatch_codec(CodecId codec, DType dtype, F&& f) {
  return dispatch_dtype(dtype, [&](auto d) -> decltype(auto) {
    switch (codec) {
#define QR_CASE(e, name, profile, type, bits4) \
  case CodecId::e: return f(type{}, d);
      QR_CODEC_LIST(QR_CASE)
#undef QR_CASE
    }
    throw std::invalid_argument("unknown codec id " + std::to_string(int(codec)));
  });
}

}  // namespace qr
