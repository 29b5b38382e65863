// Compile-time dispatch from runtime (dtype, codec) ids to a functor templated on both.
// One switch, read off the registry, serves the kernels' launcher and the CPU twin.
#pragma once
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

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

// f(CodecType{}, d) for a dtype already fixed at compile time.
template <class D, class F>
decltype(auto) dispatch_codec_only(CodecId codec, D d, F&& f) {
  switch (codec) {
#define QR_CASE(e, name, profile, type, bits4, kind, rotated_of) \
  case CodecId::e: return f(type{}, d);
    QR_CODEC_LIST(QR_CASE)
#undef QR_CASE
  }
  throw std::invalid_argument("unknown codec id " + std::to_string(int(codec)));
}

// The 16-bit dtypes and fp32 (the collectives that take fp32 tensors).
template <class F>
decltype(auto) dispatch_any_dtype(DType dtype, F&& f) {
  if (dtype == DType::kFloat32) return f(std::integral_constant<DType, DType::kFloat32>{});
  return dispatch_dtype(dtype, std::forward<F>(f));
}

// f is called as f(CodecType{}, dtype_constant).
template <class F>
decltype(auto) dispatch_codec(CodecId codec, DType dtype, F&& f) {
  return dispatch_dtype(dtype, [&](auto d) -> decltype(auto) {
    return dispatch_codec_only(codec, d, f);
  });
}
// The same over fp32 too.
template <class F>
decltype(auto) dispatch_codec_any_dtype(CodecId codec, DType dtype, F&& f) {
  return dispatch_any_dtype(dtype, [&](auto d) -> decltype(auto) {
    return dispatch_codec_only(codec, d, f);
  });
}

}  // namespace qr
