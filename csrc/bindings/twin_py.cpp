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
#include "collectives/exchange/dynamic_plan.hpp"
#include "cpu/twin.hpp"
#include "transport/workspace.hpp"

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
qr::DType parse_any_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32") return qr::DType::kFloat32;
  if (name == "fp16" || name == "float16" || name == "bf16" || name == "bfloat16") return parse_dtype(name);
  throw std::invalid_argument("dtype must be 'fp16', 'bf16' or 'fp32', got '" + name + "'");
}

qr::CodecId parse_codec(const std::string& name) {
  if (name == "bf16" || name == "fp32") return qr::CodecId::kPassthrough;  // passthrough under any name
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

// Raw bits of one rank's tensor: uint16 for fp16/bf16, uint32 for fp32.
using AnyBits = nb::ndarray<nb::ro, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

struct RankArrays {
  std::vector<const void*> ptrs;
  std::vector<size_t> sizes;
};
RankArrays rank_arrays(const std::vector<AnyBits>& inputs, qr::DType dtype) {
  if (inputs.size() < 2 || inputs.size() > size_t(qr::kMaxWorldSize))
    throw std::invalid_argument("need 2.." + std::to_string(qr::kMaxWorldSize) + " ranks' inputs");
  const size_t bits = size_t(qr::dtype_bytes(dtype)) * 8;
  RankArrays r;
  for (const auto& x : inputs) {
    if (x.dtype().code != uint8_t(nb::dlpack::dtype_code::UInt) || x.dtype().bits != bits)
      throw std::invalid_argument("inputs must be uint" + std::to_string(bits) + " arrays of raw bits for this dtype");
    r.ptrs.push_back(x.data());
    r.sizes.push_back(x.shape(0));
  }
  return r;
}
// A new numpy array of n raw values of dtype, and its data.
nb::object new_bits(size_t n, qr::DType dtype, void** data) {
  if (dtype == qr::DType::kFloat32) {
    auto* v = new std::vector<uint32_t>(n);
    nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<uint32_t>*>(p); });
    *data = v->data();
    return nb::cast(nb::ndarray<nb::numpy, uint32_t, nb::ndim<1>>(v->data(), {n}, owner));
  }
  auto* v = new std::vector<uint16_t>(n);
  nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<uint16_t>*>(p); });
  *data = v->data();
  return nb::cast(nb::ndarray<nb::numpy, uint16_t, nb::ndim<1>>(v->data(), {n}, owner));
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
        d["kind"] = c.kind == qr::CodecKind::kExact ? "exact" : "scaled";
        d["rotated_of"] = c.rotated_of;
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

  m.def("twin_all_gather", [](const std::vector<AnyBits>& inputs, const std::string& dtype, const std::string& codec) {
    const qr::DType dt = parse_any_dtype(dtype);
    const RankArrays in = rank_arrays(inputs, dt);
    const size_t k = in.sizes[0];
    for (size_t n : in.sizes)
      if (n != k) throw std::invalid_argument("all-gather inputs must have the same length");
    void* out;
    nb::object arr = new_bits(k * in.ptrs.size(), dt, &out);
    qr::twin_all_gather(in.ptrs.data(), int(in.ptrs.size()), out, k, dt, parse_codec(codec));
    return arr;
  }, "inputs"_a, "dtype"_a, "codec"_a, "Emulated all-gather of docs/codec-spec.md: every rank's output (the same).");

  m.def("twin_reduce_scatter", [](const std::vector<AnyBits>& inputs, const std::string& dtype, const std::string& codec) {
    const qr::DType dt = parse_any_dtype(dtype);
    const RankArrays in = rank_arrays(inputs, dt);
    const size_t W = in.ptrs.size(), n = in.sizes[0];
    for (size_t s : in.sizes)
      if (s != n) throw std::invalid_argument("reduce-scatter inputs must have the same length");
    if (n % W) throw std::invalid_argument("reduce-scatter input length must be divisible by the number of ranks");
    std::vector<void*> outs(W);
    nb::list result;
    for (size_t r = 0; r < W; ++r) result.append(new_bits(n / W, dt, &outs[r]));
    qr::twin_reduce_scatter(in.ptrs.data(), int(W), outs.data(), n / W, dt, parse_codec(codec));
    return result;
  }, "inputs"_a, "dtype"_a, "codec"_a, "Emulated reduce-scatter of docs/codec-spec.md: each rank's output.");

  m.def("twin_all_to_all", [](const std::vector<AnyBits>& inputs, const std::string& dtype, const std::string& codec,
                              const std::vector<std::vector<size_t>>& splits) {
    const qr::DType dt = parse_any_dtype(dtype);
    const RankArrays in = rank_arrays(inputs, dt);
    const size_t W = in.ptrs.size();
    if (splits.size() != W) throw std::invalid_argument("splits must have one row per rank");
    std::vector<size_t> flat;
    for (size_t r = 0; r < W; ++r) {
      if (splits[r].size() != W) throw std::invalid_argument("each splits row must have one entry per rank");
      size_t total = 0;
      for (size_t v : splits[r]) total += v, flat.push_back(v);
      if (total != in.sizes[r])
        throw std::invalid_argument("rank " + std::to_string(r) + "'s splits add up to " + std::to_string(total) +
                                    ", its input has " + std::to_string(in.sizes[r]) + " values");
    }
    std::vector<void*> outs(W);
    nb::list result;
    for (size_t d = 0; d < W; ++d) {
      size_t n = 0;
      for (size_t r = 0; r < W; ++r) n += splits[r][d];
      result.append(new_bits(n, dt, &outs[d]));
    }
    qr::twin_all_to_all(in.ptrs.data(), int(W), outs.data(), flat.data(), dt, parse_codec(codec));
    return result;
  }, "inputs"_a, "dtype"_a, "codec"_a, "splits"_a,
        "Emulated all-to-all of docs/codec-spec.md (splits[r][d]: values rank r sends rank d): each rank's output.");

  m.def("dynamic_all_to_all_plan", [](const std::vector<std::vector<int64_t>>& counts, const std::vector<uint64_t>& in_rows,
                                      const std::vector<uint32_t>& capacity) {
    const size_t W = counts.size();
    if (W < 2 || W > size_t(qr::kMaxWorldSize) || in_rows.size() != W || capacity.size() != W)
      throw std::invalid_argument("need W in 2..8 rows of counts, W input row counts and W capacities");
    constexpr int kS = qr::kMaxWorldSize;
    uint32_t rows[kS * kS] = {}, moved[kS * kS] = {}, cap[kS] = {};
    nb::list problems, cuts, announced;
    for (size_t r = 0; r < W; ++r) {
      if (counts[r].size() != W) throw std::invalid_argument("each row of counts needs W entries");
      const qr::SendCountCheck c = qr::check_send_counts(counts[r].data(), int(W), in_rows[r], rows + r * kS);
      problems.append(nb::make_tuple(int(c.problem), c.index, c.value));
      // what rank r's size row says: its capacity beside its bad-counts bit
      cap[r] = qr::info_capacity(qr::dynamic_info(capacity[r], c.problem != qr::CountProblem::kNone));
    }
    for (size_t me = 0; me < W; ++me) {
      uint64_t total = 0;
      cuts.append(qr::fit_to_capacity(rows, cap, int(W), kS, int(me), moved, &total));
      announced.append(total);
    }
    nb::list rows_out, moved_out;
    for (size_t s = 0; s < W; ++s) {
      nb::list a, b;
      for (size_t d = 0; d < W; ++d) a.append(rows[s * kS + d]), b.append(moved[s * kS + d]);
      rows_out.append(a), moved_out.append(b);
    }
    nb::dict out;
    out["rows"] = rows_out;
    out["moved"] = moved_out;
    out["problems"] = problems;
    out["cut"] = cuts;
    out["announced"] = announced;
    return out;
  }, "counts"_a, "in_rows"_a, "capacity"_a,
        "The dynamic all-to-all's plan as every rank's kernel computes it (collectives/exchange/dynamic_plan.hpp): "
        "counts[r][d] rows rank r asks to send rank d; rows (zeros from a rank whose counts are bad), moved "
        "(what moves), problems[r] = (0 none / 1 negative / 2 sum above its rows, index, value), cut[d] (first "
        "source cut short at rank d, W: none), announced[d] (rows sent to d in total).");

  m.def("fp32_all_reduce_chunk", &qr::fp32_all_reduce_chunk, "numel"_a, "world_size"_a,
        "Values per rank's chunk in the fp32 all-reduce: value i is reduced by rank i // chunk.");

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
  m.def("twin_all_reduce", [](const std::vector<AnyBits>& inputs, const std::string& dtype, const std::string& codec) {
    if (parse_any_dtype(dtype) != qr::DType::kFloat32)
      throw std::invalid_argument("uint32 inputs are fp32 tensors: pass dtype 'fp32'");
    const RankArrays in = rank_arrays(inputs, qr::DType::kFloat32);
    const size_t n = in.sizes[0];
    for (size_t s : in.sizes)
      if (s != n) throw std::invalid_argument("all inputs must have the same length");
    void* out;
    nb::object arr = new_bits(n, qr::DType::kFloat32, &out);
    qr::twin_all_reduce_fp32(reinterpret_cast<const uint32_t* const*>(in.ptrs.data()), int(in.ptrs.size()),
                             static_cast<uint32_t*>(out), n, parse_codec(codec));
    return arr;
  }, "inputs"_a, "dtype"_a, "codec"_a, "The fp32 all-reduce (reduce-scatter then all-gather over chunks).");
}
