// Communicator binding: raw device pointers and the stream as integers (no torch C++ ABI).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "collectives/all_reduce/add_rmsnorm.hpp"
#include "comm/communicator.hpp"
#include "comm/status.hpp"
#include "tools/codec_speed.hpp"
#include "transport/workspace.hpp"

namespace nb = nanobind;
using namespace nb::literals;

void register_comm(nb::module_& m) {
  auto base = nb::exception<qr::Error>(m, "QuickReduceError", PyExc_RuntimeError);
  nb::exception<qr::CudaError>(m, "CudaError", base.ptr());
  nb::exception<qr::PeerTimeoutError>(m, "PeerTimeoutError", base.ptr());
  nb::exception<qr::CallMismatchError>(m, "CallMismatchError", base.ptr());
  nb::exception<qr::SplitSizeError>(m, "SplitSizeError", base.ptr());

  m.attr("DTYPE_FLOAT16") = int(qr::DType::kFloat16);
  m.attr("DTYPE_BFLOAT16") = int(qr::DType::kBFloat16);
  m.attr("DTYPE_FLOAT32") = int(qr::DType::kFloat32);
  m.attr("EXCHANGE_ALL_GATHER") = int(qr::ExchangeKind::kAllGather);
  m.attr("EXCHANGE_ALL_TO_ALL") = int(qr::ExchangeKind::kAllToAll);
  m.attr("EXCHANGE_REDUCE_SCATTER") = int(qr::ExchangeKind::kReduceScatter);
  m.attr("ALGO_ONE_SHOT") = int(qr::Algo::kOneShot);
  m.attr("ALGO_TWO_SHOT") = int(qr::Algo::kTwoShot);
  m.attr("MAX_WORLD_SIZE") = qr::kMaxWorldSize;
  m.attr("PACKET_CHANNEL_VALUES") = size_t(qr::kPacketBlocks) * qr::kPacketThreads * qr::kLaneValues;
  m.def("one_shot_max_bytes", &qr::one_shot_max_bytes, "world_size"_a,
        "Largest message the one-shot takes for this world size (a smaller max_size lowers it).");

  m.def("workspace_bytes", [](int world_size, size_t max_bytes) { return qr::WorkspaceLayout::make(world_size, max_bytes).total; },
        "world_size"_a, "max_bytes"_a, "Device memory one rank's workspace takes for this world size and max_size.");
  m.def("packet_path_fits", [](int world_size, size_t max_bytes, size_t segment_bytes, size_t packet_max_bytes) {
          return qr::WorkspaceLayout::make(world_size, max_bytes).packet_path_fits(segment_bytes, packet_max_bytes);
        }, "world_size"_a, "max_bytes"_a, "segment_bytes"_a, "packet_max_bytes"_a,
        "Whether an even exact segment of this size takes the collectives' flag-in-data path.");
  m.def("coded_packet_path_fits",
        [](int world_size, size_t max_bytes, size_t segment_values, size_t value_bytes, int codec, size_t packet_max_bytes) {
          return qr::WorkspaceLayout::make(world_size, max_bytes)
              .coded_packet_path_fits(segment_values, value_bytes, qr::codec_lane_code_bits(qr::CodecId(codec)),
                                      packet_max_bytes, world_size);
        },
        "world_size"_a, "max_bytes"_a, "segment_values"_a, "value_bytes"_a, "codec"_a, "packet_max_bytes"_a,
        "Whether an even segment with this scaled codec takes the flag-in-data path (any collective).");
  m.def("coded_packet_vectors",
        [](size_t segment_values, int codec) {
          return qr::coded_packet_vectors(segment_values, qr::codec_lane_code_bits(qr::CodecId(codec)));
        },
        "segment_values"_a, "codec"_a,
        "16-byte wire vectors one source sends for such a segment on the coded flag-in-data path.");

  m.def("codec_wire_bytes", [](size_t numel, int codec) { return qr::codec_wire_bytes(numel, qr::CodecId(codec)); },
        "numel"_a, "codec"_a, "Bytes a tensor of numel values takes encoded (planes and scales), for codec_speed.");
  m.def("codec_speed", [](uintptr_t in, uintptr_t wire, uintptr_t out, size_t numel, int dtype, int codec, uintptr_t stream,
                          bool encode, bool decode) {
    qr::codec_speed_launch(in, wire, out, numel, qr::DType(dtype), qr::CodecId(codec), stream, encode, decode);
  }, "in_ptr"_a, "wire_ptr"_a, "out_ptr"_a, "numel"_a, "dtype"_a, "codec"_a, "stream"_a, "encode"_a = true,
        "decode"_a = true, "One GPU, no link: encode a 16-bit tensor into wire and/or decode it into out (block-scaled codecs).");

  m.def("add_rmsnorm", [](uintptr_t sum, uintptr_t residual, uintptr_t weight, uintptr_t out, uintptr_t residual_out,
                          uintptr_t fp8, uintptr_t fp8_scales, size_t rows, size_t hidden, float eps, int dtype, int fp8_mode,
                          uintptr_t stream, bool pdl) {
    if (hidden == 0 || hidden % 8 != 0 || hidden > 65536)
      throw std::invalid_argument("add_rmsnorm: hidden size must be a multiple of 8 in [8, 65536], got " + std::to_string(hidden));
    qr::AddRmsNormArgs a{reinterpret_cast<const void*>(sum), reinterpret_cast<const void*>(residual),
                         reinterpret_cast<const void*>(weight), reinterpret_cast<void*>(out),
                         reinterpret_cast<void*>(residual_out), reinterpret_cast<uint8_t*>(fp8),
                         reinterpret_cast<float*>(fp8_scales), rows, hidden, eps, qr::Fp8Out(fp8_mode), pdl};
    const cudaError_t err = qr::launch_add_rmsnorm(a, qr::DType(dtype), reinterpret_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) throw qr::CudaError(std::string("add_rmsnorm launch: ") + cudaGetErrorString(err));
  }, "sum"_a, "residual"_a, "weight"_a, "out"_a, "residual_out"_a, "fp8"_a, "fp8_scales"_a, "rows"_a, "hidden"_a,
        "eps"_a, "dtype"_a, "fp8_mode"_a, "stream"_a, "pdl"_a,
        "The all-reduce's residual-add + RMSNorm (+ FP8) epilogue over rows of `sum` (docs/codec-spec.md).");
  m.attr("FP8_OUT_NONE") = int(qr::Fp8Out::kNone);
  m.attr("FP8_OUT_PER_TOKEN") = int(qr::Fp8Out::kPerToken);
  m.attr("FP8_OUT_PER_TENSOR") = int(qr::Fp8Out::kPerTensor);

  nb::class_<qr::Communicator>(m, "Communicator")
      .def(nb::init<int, int, int, size_t, double>(), "rank"_a, "world_size"_a, "device"_a, "max_bytes"_a, "timeout_s"_a)
      .def("ipc_handle", [](const qr::Communicator& c) { auto h = c.ipc_handle(); return nb::bytes(h.data(), h.size()); })
      .def("open_peers", [](qr::Communicator& c, const std::vector<nb::bytes>& handles) {
        std::vector<std::string> hs;
        for (auto& h : handles) hs.emplace_back(h.c_str(), h.size());
        c.open_peers(hs);
      }, "handles"_a)
      .def("all_reduce", [](qr::Communicator& c, uintptr_t in, uintptr_t out, size_t numel, int dtype, int codec, int algo,
                            uintptr_t stream, int threads, int blocks, bool pdl, int groups, uintptr_t residual) {
        c.all_reduce(in, out, numel, qr::DType(dtype), qr::CodecId(codec), qr::Algo(algo), stream, threads, blocks, pdl, groups,
                     residual);
      }, "in_ptr"_a, "out_ptr"_a, "numel"_a, "dtype"_a, "codec"_a, "algo"_a, "stream"_a, "threads"_a = 0, "blocks"_a = 0,
      "pdl"_a = false, "groups"_a = 0, "residual_ptr"_a = 0)
      .def("all_reduce_add_rmsnorm", [](qr::Communicator& c, uintptr_t in, uintptr_t out, uintptr_t residual,
                                        uintptr_t weight, uintptr_t residual_out, size_t rows, size_t hidden, float eps,
                                        int dtype, uintptr_t stream, bool pdl) {
        c.all_reduce_add_rmsnorm(in, out, residual, weight, residual_out, rows, hidden, eps, qr::DType(dtype), stream, pdl);
      }, "in_ptr"_a, "out_ptr"_a, "residual_ptr"_a, "weight_ptr"_a, "residual_out_ptr"_a, "rows"_a, "hidden"_a, "eps"_a,
      "dtype"_a, "stream"_a, "pdl"_a = false)
      .def("fused_add_rmsnorm_fits", &qr::Communicator::fused_add_rmsnorm_fits, "rows"_a, "hidden"_a)
      .def("exchange", [](qr::Communicator& c, int kind, uintptr_t in, uintptr_t out, int dtype, int codec,
                          const std::vector<size_t>& send_counts, const std::vector<size_t>& recv_counts, uintptr_t stream,
                          bool pdl, int threads, bool even_splits, size_t packet_max_bytes, int groups) {
        c.exchange(qr::ExchangeKind(kind), in, out, qr::DType(dtype), qr::CodecId(codec), send_counts, recv_counts, stream,
                   pdl, threads, even_splits, packet_max_bytes, groups);
      }, "kind"_a, "in_ptr"_a, "out_ptr"_a, "dtype"_a, "codec"_a, "send_counts"_a, "recv_counts"_a, "stream"_a,
      "pdl"_a = false, "threads"_a = 0, "even_splits"_a = false, "packet_max_bytes"_a = SIZE_MAX, "groups"_a = 0)
      .def("all_reduce_packets_fit", [](qr::Communicator& c, size_t numel, int dtype, size_t packet_max_bytes) {
        return c.all_reduce_packets_fit(numel, qr::DType(dtype), packet_max_bytes);
      }, "numel"_a, "dtype"_a, "packet_max_bytes"_a = SIZE_MAX)
      .def("all_reduce_packets", [](qr::Communicator& c, uintptr_t in, uintptr_t out, size_t numel, int dtype,
                                    uintptr_t stream, bool pdl, size_t packet_max_bytes) {
        c.all_reduce_packets(in, out, numel, qr::DType(dtype), stream, pdl, packet_max_bytes);
      }, "in_ptr"_a, "out_ptr"_a, "numel"_a, "dtype"_a, "stream"_a, "pdl"_a = false, "packet_max_bytes"_a = SIZE_MAX)
      .def("all_to_all_dynamic", [](qr::Communicator& c, uintptr_t in, uintptr_t out, uintptr_t send_counts,
                                    uintptr_t recv_counts, int count_bytes, size_t row_values, size_t in_rows,
                                    size_t capacity_rows, int dtype, int codec, uintptr_t stream, bool pdl) {
        c.all_to_all_dynamic(in, out, send_counts, recv_counts, count_bytes, row_values, in_rows, capacity_rows,
                             qr::DType(dtype), qr::CodecId(codec), stream, pdl);
      }, "in_ptr"_a, "out_ptr"_a, "send_counts_ptr"_a, "recv_counts_ptr"_a, "count_bytes"_a, "row_values"_a, "in_rows"_a,
      "capacity_rows"_a, "dtype"_a, "codec"_a, "stream"_a, "pdl"_a = false)
      .def("check", &qr::Communicator::check)
      .def("close", &qr::Communicator::close)
      .def_prop_ro("rank", &qr::Communicator::rank)
      .def_prop_ro("world_size", &qr::Communicator::world_size)
      .def_prop_ro("device", &qr::Communicator::device)
      .def_prop_ro("max_bytes", &qr::Communicator::max_bytes)
      .def_prop_ro("workspace_bytes", &qr::Communicator::workspace_bytes)
      .def_prop_ro("one_shot_max_bytes", &qr::Communicator::one_shot_max_bytes)
      .def_prop_ro("is_open", &qr::Communicator::is_open)
      .def_prop_ro("is_broken", &qr::Communicator::is_broken);
}
