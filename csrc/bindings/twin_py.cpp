// CPU twin and codec registry bindings: numpy arrays of raw 16-bit patterns in and out.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/all_reduce/two_shot_layout.hpp"
#include "codecs/codec_list.hpp"
#include "cpu/twin.hpp"

namespace nb = nanobind;
using namespace nb::literals;

using Bits = nb::ndarray<const uint16_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using BitsOut = nb::ndarray<nb::numpy, uint16_t, nb::ndim<1>>;

namespace {

qr::DType parse_dtype(const std::string& name) {
  if (name == "fp16" || name == "float16") return qr::DType::kFloat16;
  if (name == "bf16" || name == "bfloat16") return qr::DType::kBFloat16;
  throw std::invalid_argument("dtype must be 'fp16' or 'bf16', got '" + name + "'");
}

qr::CodecId parse_codec(const std::string& name) {
  if (name == "bf16") return qr::CodecId::kPassthrough;  // passthrough under either name
  for (const auto& c : qr::kCodecs)
    if (name == c.name) return c.id;
  throw std::invalid_argument("unknown codec '" + name + "'");
}

BitsOut new_array(size_t n, std::vector<uint16_t>** storage) {
  auto* v = new std::vector<uint16_t>(n);
  nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<uint16_t>*>(p); });
  *storage = v;
  return BitsOut(v->data(), {n}, owner);
}

}  // namespace

void register_twin(nb::module_& m) {
  m.def("codec_names", [] {
    std::vector<std::string> names;
    for (const auto& c : qr::kCodecs) names.emplace_back(c.name);
    return names;
  }, "Codec names in profile order (1..7).");
  m.def("codec_info", [](const std::string& name) {
    auto id = parse_codec(name);
    for (const auto& c : qr::kCodecs)
      if (c.id == id) {
        nb::dict d;
        d["name"] = c.name;
        d["profile"] = c.profile;
        d["id"] = int(c.id);
        d["bits_per_value"] = c.bits_per_value;
        d["ratio"] = c.bits_per_value / 16.0f;
        return d;
      }
    throw std::invalid_argument("unknown codec '" + name + "'");
  }, "name"_a);
  m.def("codec_id", [](const std::string& name) { return int(parse_codec(name)); }, "name"_a);

  m.def("twin_round_trip", [](Bits x, const std::string& dtype, const std::string& codec, bool as_owner) {
    std::vector<uint16_t>* out;
    auto arr = new_array(x.shape(0), &out);
    qr::twin_round_trip(x.data(), out->data(), x.shape(0), parse_dtype(dtype), parse_codec(codec), as_owner);
    return arr;
  }, "x"_a, "dtype"_a, "codec"_a, "as_owner"_a = false,
        "One quantize/dequantize round trip, blockwise: to_T(D(Q(x))); as_owner: computed the way the "
        "two-shot's owner keeps its result (the same bits).");

  m.def("lossless_pack_round_trip", [](Bits x) {
    const size_t n = x.shape(0), blocks = (n + qr::kBlockValues - 1) / qr::kBlockValues;
    std::vector<uint16_t>* out;
    auto arr = new_array(n, &out);
    auto* fits = new std::vector<uint8_t>(blocks);
    nb::capsule owner(fits, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
    qr::lossless_pack_round_trip(x.data(), out->data(), fits->data(), n);
    return nb::make_tuple(arr, nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(fits->data(), {blocks}, owner));
  }, "x"_a, "The lossless codec's packing of bf16 bits x, blockwise: (packed-then-unpacked, packs per block).");

  m.def("two_shot_slice_values", &qr::two_shot_slice_values, "numel"_a, "world_size"_a,
        "Values per two-shot slice for this message: value i is reduced by rank (i // slice) % world_size.");

  m.def("twin_all_reduce", [](const std::vector<Bits>& inputs, const std::string& dtype, const std::string& codec,
                              size_t slice_values) {
    if (inputs.size() < 1) throw std::invalid_argument("need at least one input");
    size_t n = inputs[0].shape(0);
    std::vector<const uint16_t*> ptrs;
    for (auto& x : inputs) {
      if (x.shape(0) != n) throw std::invalid_argument("all inputs must have the same length");
      ptrs.push_back(x.data());
    }
    std::vector<uint16_t>* out;
    auto arr = new_array(n, &out);
    if (slice_values == 0) slice_values = qr::two_shot_slice_values(n, int(ptrs.size()));
    qr::twin_all_reduce(ptrs.data(), int(ptrs.size()), out->data(), n, parse_dtype(dtype), parse_codec(codec),
                        slice_values);
    return arr;
  }, "inputs"_a, "dtype"_a, "codec"_a, "slice_values"_a = 0,
        "Emulated all-reduce of docs/codec-spec.md over len(inputs) ranks (slice_values 0: the two-shot's own).");
}
