#include "comm/communicator.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "collectives/launch.hpp"
#include "collectives/all_reduce/two_shot_layout.hpp"
#include "comm/status.hpp"
#include "transport/ipc.hpp"

namespace qr {
namespace {

// Restores the caller's current device when it leaves scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    QR_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) QR_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

// FNV-1a over what every rank must agree on for one call.
uint32_t call_signature(size_t numel, DType dtype, CodecId codec, Algo algo) {
  uint64_t fields[4] = {numel, uint64_t(dtype), uint64_t(codec), uint64_t(algo)};
  uint32_t h = 2166136261u;
  for (uint64_t f : fields)
    for (int i = 0; i < 8; ++i) h = (h ^ uint32_t((f >> (8 * i)) & 0xff)) * 16777619u;
  return h;
}

// The same over an exchange call: kind, even segment size (0 for all-to-all, whose sizes are
// checked per pair in the kernel), dtype, wire codec, CTA size.
// The small-segment path's place in a signature's `threads` (the slice kernel's are 128-512).
constexpr int kPacketPath = 1;

uint32_t exchange_signature(ExchangeKind kind, size_t even_count, DType dtype, CodecId codec, int threads) {
  return call_signature(even_count, dtype, codec, Algo(0x100 + int(kind) * 0x1000 + threads));
}

// CTA size of an exchange whose segments have n values (reduce-scatter, all-gather, even all-to-all): the largest
// whose slices still give every SM two (the two-shot's rule for tiles), at most 256 threads on 2 GPUs.
// 2026-11-28: on 4x H200, 512 threads where this rule picks them (from ~9 MB) ran the even all-to-all 0-2% faster
// at 32 MB and 1-7% at 128 MB than 256, the coded all-gather and reduce-scatter at 128 MB 2-14%; on 2x H200, 256
// ran the all-to-all and all-gather 4-8% faster at 128 MB (exact 213.7 against 230.7 us) and int4 4-5% at 512 MB.
// The fp32 all-gather and all-to-all on 2 GPUs take 128 (one slice a step, their lanes 32 bytes: more CTAs an SM keep
// more loads in flight): 2x H200, 2026-11-28, 32-512 MB coded 4-9% faster than 256 (all-gather int4 512 MB 321 ->
// 297 us), passthrough even; the fp32 reduce-scatter and 16-bit calls were slower at 128 (up to 13%).
int exchange_threads(size_t n, int world_size, DType dtype, ExchangeKind kind) {
  const int threads = std::min(largest_cta_for_tiles(n, 264), world_size == 2 ? 256 : kTwoShotMaxThreads);
  const bool wide_lanes_one_slice = world_size == 2 && dtype == DType::kFloat32 && kind != ExchangeKind::kReduceScatter;
  return wide_lanes_one_slice ? std::min(threads, kTwoShotMinThreads) : threads;
}

// Bytes from which an all-to-all whose sizes cross uses 512-thread CTAs (two slices at a time), each
// rank choosing by its own bytes (the kernel's slices are the same at either size): 4x H100, bf16, 512
// threads moved 32-256 MB a rank 4-13% faster than 256, and back-to-back calls of 32 KB-2 MB 3-6 us
// slower (two 512-thread CTAs an SM leave the next call's CTAs no room to start early under PDL).
constexpr size_t kPairedCallBytes = size_t(16) << 20;
int crossing_threads(size_t bytes) { return bytes >= kPairedCallBytes ? 2 * kCrossingLanes : kCrossingLanes; }

}  // namespace

Communicator::Communicator(int rank, int world_size, int device, size_t max_bytes, double timeout_s)
    : rank_(rank), world_size_(world_size), device_(device), max_bytes_(max_bytes) {
  if (world_size < 2 || world_size > kMaxWorldSize)
    throw std::invalid_argument("world size " + std::to_string(world_size) + " is not supported (2.." +
                                std::to_string(kMaxWorldSize) + ")");
  if (rank < 0 || rank >= world_size)
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(world_size - 1));
  if (max_bytes == 0 || max_bytes % 16 != 0)
    throw std::invalid_argument("max_size must be a positive multiple of 16 bytes");
  if (!(timeout_s > 0)) throw std::invalid_argument("timeout must be positive");
  timeout_ns_ = uint64_t(timeout_s * 1e9);
  layout_ = WorkspaceLayout::make(world_size, max_bytes);
  DeviceGuard guard(device);
  QR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&workspace_), layout_.total));
  // Control words and flags start at 0 (epochs never take that value); the one-shot's buffers
  // start empty (the sentinel).
  QR_CUDA_CHECK(cudaMemset(workspace_, 0, layout_.lamport));
  QR_CUDA_CHECK(launch_fill_u32(reinterpret_cast<uint32_t*>(workspace_ + layout_.lamport),
                                layout_.lamport_bytes(world_size) / 4, kLamportEmpty, nullptr));
  QR_CUDA_CHECK(cudaMemset(workspace_ + layout_.xp_data, 0xff, layout_.packet_bytes(world_size)));  // empty
  QR_CUDA_CHECK(cudaMemset(workspace_ + layout_.xq_data, 0xff, layout_.packet_bytes(world_size)));
  QR_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&record_host_), sizeof(ErrorRecord), cudaHostAllocMapped));
  std::memset(record_host_, 0, sizeof(ErrorRecord));
  QR_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&record_device_), record_host_, 0));
  QR_CUDA_CHECK(cudaDeviceSynchronize());
  peer_maps_.assign(world_size, nullptr);
}

Communicator::~Communicator() {
  try {
    close();
  } catch (...) {
  }
}

std::string Communicator::ipc_handle() const {
  if (closed_) throw Error("communicator is closed");
  DeviceGuard guard(device_);
  return export_ipc_handle(workspace_);
}

void Communicator::open_peers(const std::vector<std::string>& handles) {
  if (closed_) throw Error("communicator is closed");
  if (peers_open_) throw Error("peer handles are already set");
  if (int(handles.size()) != world_size_)
    throw std::invalid_argument("expected " + std::to_string(world_size_) + " handles (one per rank), got " +
                                std::to_string(handles.size()));
  DeviceGuard guard(device_);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    try {
      peer_maps_[r] = static_cast<uint8_t*>(open_ipc_handle(handles[r]));
    } catch (const std::exception& e) {
      for (auto& p : peer_maps_) close_ipc_handle(p), p = nullptr;
      throw CudaError("cannot map the workspace of rank " + std::to_string(r) + ": " + e.what() +
                      " (are all ranks on this node, with NVLink/P2P between their GPUs?)");
    }
  }
  peers_open_ = true;
}

void Communicator::require_usable() const {
  if (closed_) throw Error("communicator is closed");
  if (!peers_open_) throw Error("peer handles are not set: call open_peers/set_comm_handles first");
  if (broken_)
    throw PeerTimeoutError("communicator is broken by an earlier error (a peer timeout, a call mismatch or bad split "
                           "sizes); create a new one");
}

void Communicator::check() {
  if (!record_host_) return;
  volatile ErrorRecord* r = record_host_;
  if (r->code == uint32_t(ErrorCode::kOk)) return;
  broken_ = true;
  if (r->code == uint32_t(ErrorCode::kBadCounts)) {
    const std::string rank = std::to_string(r->rank), peer = std::to_string(r->peer);
    const std::string seen = std::to_string(int64_t(uint64_t(r->seen_high) << 32 | r->seen));
    const std::string expected = std::to_string(r->expected);
    const char* unusable = " (the communicator is unusable from now on; create a new one)";
    if (r->phase == kPhaseCountNegative)
      throw SplitSizeError("all_to_all_dynamic: rank " + rank + "'s input_split_sizes[" + peer + "] is " + seen +
                           " (negative); rank " + rank + " sent no rows in that call" + unusable);
    if (r->phase == kPhaseCountSum)
      throw SplitSizeError("all_to_all_dynamic: rank " + rank + "'s input_split_sizes add up to " + seen +
                           " rows, more than its input's " + expected + " rows; rank " + rank +
                           " sent no rows in that call" + unusable);
    if (r->phase == kPhaseCountCapacity)
      throw SplitSizeError("all_to_all_dynamic: the ranks sent rank " + rank + " " + seen +
                           " rows, more than its output's capacity of " + expected +
                           " rows; it kept them in rank order up to the capacity (rank " + peer +
                           "'s cut short, later ranks' dropped) and output_split_sizes counts the rows kept" + unusable);
    throw SplitSizeError("all_to_all_dynamic: rank " + rank + " received no rows from rank " + peer + ", whose input_split_sizes "
                         "were bad (a negative count, or more rows than its input); rank " + peer + "'s error names them" +
                         unusable);
  }
  if (r->code == uint32_t(ErrorCode::kMismatch))
  {
    if (r->phase == kPhaseExchangeSizes)
      throw CallMismatchError("rank " + std::to_string(r->peer) + " and rank " + std::to_string(r->rank) +
                              " disagree on an all-to-all: rank " + std::to_string(r->rank) + " expects " +
                              std::to_string(r->expected) + " values from rank " + std::to_string(r->peer) +
                              ", which sends " + std::to_string(r->seen) +
                              " (or they made different calls); output_split_sizes must match the peers' input_split_sizes");
    throw CallMismatchError("rank " + std::to_string(r->rank) + " and rank " + std::to_string(r->peer) +
                            " made different calls (collective, size, dtype, codec or algorithm differ: signature " +
                            std::to_string(r->expected) + " vs " + std::to_string(r->seen) +
                            "); every rank must make the same calls in the same order");
  }
  const char* phase = r->phase == 0                    ? "one-shot packets"
                      : r->phase == 1                  ? "reduce-scatter"
                      : r->phase == 2                  ? "all-gather"
                      : r->phase == kPhaseExchangeData ? "exchange data"
                      : r->phase == kPhaseExchangeSizes ? "all-to-all sizes"
                      : r->phase == kPhaseExchangePackets ? "small-segment packets"
                                                        : "previous exchange call";
  throw PeerTimeoutError("rank " + std::to_string(r->rank) + " timed out waiting for rank " + std::to_string(r->peer) +
                         " (" + phase + ", call epoch " + std::to_string(r->expected) + ", flag seen " +
                         std::to_string(r->seen) + ", block " + std::to_string(r->block) +
                         "): the peer did not make the same call in time");
}

void Communicator::all_reduce(uintptr_t in, uintptr_t out, size_t numel, DType dtype, CodecId codec, Algo algo,
                              uintptr_t stream, int threads, int blocks, bool pdl, int groups, uintptr_t residual) {
  require_usable();
  check();
  if (numel == 0) return;
  if (numel * 2 > max_bytes_)
    throw std::invalid_argument("message of " + std::to_string(numel * 2) + " bytes exceeds max_size " +
                                std::to_string(max_bytes_));
  if (in % 16 || out % 16 || residual % 16) throw std::invalid_argument("input, output and residual must be 16-byte aligned");
  if (residual != 0 && (algo != Algo::kTwoShot || dtype == DType::kFloat32))
    throw std::invalid_argument("the residual add runs in the fp16/bf16 two-shot only");
  AllReduceArgs args{};
  fill_common(args, in, out, pdl);
  args.numel = numel;
  // The residual-adding two-shot is another call (another kernel, its own grid): ranks that disagree
  // on the epilogue's route get a CallMismatchError, not a wait on slots never sent.
  args.signature = call_signature(numel, dtype, codec, residual != 0 ? Algo(0x20000 + int(algo)) : algo);
  auto s = reinterpret_cast<cudaStream_t>(stream);
  DeviceGuard guard(device_);
  if (algo == Algo::kOneShot) {
    if (codec != CodecId::kPassthrough) throw std::invalid_argument("the one-shot algorithm is passthrough only");
    if (numel * 2 > one_shot_max_bytes())
      throw std::invalid_argument("message of " + std::to_string(numel * 2) + " bytes exceeds the one-shot limit " +
                                  std::to_string(one_shot_max_bytes()));
    QR_CUDA_CHECK(launch_one_shot(args, dtype, s));
  } else {
    if (threads == 0) threads = default_two_shot_threads(numel, world_size_);
    if (threads < kTwoShotMinThreads || threads > kTwoShotMaxThreads || threads % 32)
      throw std::invalid_argument("two-shot threads must be a multiple of 32 in [128, 512]");
    args.threads = threads;
    args.blocks = blocks;
    if (groups < 0 || groups > 64) throw std::invalid_argument("two-shot groups must be in [1, 64] (0 = auto)");
    args.groups = groups;
    args.residual = reinterpret_cast<const uint16_t*>(residual);
    QR_CUDA_CHECK(launch_two_shot(args, dtype, codec, s));
  }
}

bool Communicator::fused_add_rmsnorm_fits(size_t rows, size_t hidden) const {
  const size_t numel = rows * hidden, ctas = hidden / kFusedRowValues;
  if (rows == 0 || hidden % kFusedRowValues != 0 || ctas < size_t(kFusedMinClusterCtas) ||
      ctas > size_t(kFusedMaxClusterCtas) || numel * 2 > kFusedOneShotMaxBytes || numel * 2 > one_shot_max_bytes() ||
      numel * 2 > max_bytes_)
    return false;
  if (fused_resident_ctas_ == 0) {  // a failed query raises, never a silent other route
    DeviceGuard guard(device_);
    QR_CUDA_CHECK(fused_one_shot_resident_ctas(&fused_resident_ctas_));
    if (fused_resident_ctas_ == 0) fused_resident_ctas_ = -1;
  }
  return numel <= size_t(std::clamp(fused_resident_ctas_, 0, kOneShotBlocks)) * kFusedRowValues;
}

void Communicator::all_reduce_add_rmsnorm(uintptr_t in, uintptr_t out, uintptr_t residual, uintptr_t weight,
                                          uintptr_t residual_out, size_t rows, size_t hidden, float eps, DType dtype,
                                          uintptr_t stream, bool pdl) {
  require_usable();
  check();
  if (dtype == DType::kFloat32) throw std::invalid_argument("the fused add + RMSNorm takes float16 and bfloat16");
  if (!fused_add_rmsnorm_fits(rows, hidden))
    throw std::invalid_argument("the fused add + RMSNorm takes rows of a multiple of 1024 values up to 16384, "
                                "at most " + std::to_string(std::min({one_shot_max_bytes(), kFusedOneShotMaxBytes, max_bytes_})) +
                                " bytes (the communicator's max_size included) in CTAs resident at once; got " +
                                std::to_string(rows) + " x " + std::to_string(hidden));
  if ((in | out | residual | weight | residual_out) % 16)
    throw std::invalid_argument("the fused add + RMSNorm's tensors must be 16-byte aligned");
  AllReduceArgs args{};
  fill_common(args, in, out, pdl);
  args.numel = rows * hidden;
  // A plain one-shot of the same size on a peer (or another row length) is a different call.
  args.signature = call_signature(args.numel, dtype, CodecId::kPassthrough, Algo(0x10000 + int(hidden)));
  const RowEpilogueArgs epilogue{reinterpret_cast<const void*>(residual), reinterpret_cast<const void*>(weight),
                                 reinterpret_cast<void*>(residual_out), eps, uint32_t(hidden)};
  DeviceGuard guard(device_);
  QR_CUDA_CHECK(launch_one_shot_add_rmsnorm(args, epilogue, dtype, reinterpret_cast<cudaStream_t>(stream)));
}

void Communicator::exchange(ExchangeKind kind, uintptr_t in, uintptr_t out, DType dtype, CodecId codec,
                            const std::vector<size_t>& send_counts, const std::vector<size_t>& recv_counts,
                            uintptr_t stream, bool pdl, int threads, bool even_splits, size_t packet_max_bytes,
                            int groups) {
  require_usable();
  check();
  const int W = world_size_;
  if (groups < 0 || groups > 64) throw std::invalid_argument("exchange groups must be in [1, 64] (0 = auto)");
  if (int(send_counts.size()) != W || int(recv_counts.size()) != W)
    throw std::invalid_argument("send_counts and recv_counts need one entry per rank");
  const size_t elem = size_t(dtype_bytes(dtype));
  size_t in_values = 0, out_values = 0;
  for (int r = 0; r < W; ++r) {
    if (send_counts[r] > UINT32_MAX || recv_counts[r] > UINT32_MAX)
      throw std::invalid_argument("a segment of more than 2^32 - 1 values");
    in_values += kind == ExchangeKind::kAllGather ? (r == 0 ? send_counts[r] : 0) : send_counts[r];
    out_values += kind == ExchangeKind::kReduceScatter ? (r == 0 ? recv_counts[r] : 0) : recv_counts[r];
  }
  if (std::max(in_values, out_values) * elem > max_bytes_)
    throw std::invalid_argument("message of " + std::to_string(std::max(in_values, out_values) * elem) +
                                " bytes exceeds max_size " + std::to_string(max_bytes_));
  if (in % 16 || out % 16) throw std::invalid_argument("input and output must be 16-byte aligned");
  ExchangeArgs args{};
  fill_common(args, in, out, pdl);
  args.kind = int(kind);
  args.sizes_cross = kind == ExchangeKind::kAllToAll && !even_splits;
  args.even_count = uint32_t(send_counts[0]);
  bool aligned = true;
  size_t send_at = 0, recv_at = 0;
  for (int r = 0; r < W; ++r) {
    if (!args.sizes_cross && (send_counts[r] != send_counts[0] || recv_counts[r] != send_counts[0]))
      throw std::invalid_argument("all-gather, reduce-scatter and even all-to-all segments must all have the same size");
    args.send_count[r] = uint32_t(send_counts[r]);
    args.recv_count[r] = uint32_t(recv_counts[r]);
    args.send_offset[r] = kind == ExchangeKind::kAllGather ? 0 : send_at;
    args.recv_offset[r] = kind == ExchangeKind::kReduceScatter ? 0 : recv_at;
    aligned = aligned && (args.send_offset[r] * elem) % 16 == 0 && (args.recv_offset[r] * elem) % 16 == 0;
    send_at += send_counts[r];
    recv_at += recv_counts[r];
  }
  args.aligned = aligned ? 1 : 0;
  if (codec == CodecId::kLossless) codec = CodecId::kPassthrough;  // the same bits, the same wire here
  DeviceGuard guard(device_);
  if (threads == 0 && groups == 0 && codec == CodecId::kPassthrough && !args.sizes_cross &&
      layout_.packet_path_fits(send_counts[0] * elem, packet_max_bytes)) {
    args.signature = exchange_signature(kind, send_counts[0], dtype, codec, kPacketPath);
    QR_CUDA_CHECK(launch_exchange_packets(args, dtype, reinterpret_cast<cudaStream_t>(stream)));
    return;
  }
  if (threads == 0 && groups == 0 && codec_is_scaled(codec) && !args.sizes_cross &&
      layout_.coded_packet_path_fits(send_counts[0], elem, codec_lane_code_bits(codec), packet_max_bytes, W)) {
    args.signature = exchange_signature(kind, send_counts[0], dtype, codec, kPacketPath);
    QR_CUDA_CHECK(launch_exchange_coded_packets(args, dtype, codec, reinterpret_cast<cudaStream_t>(stream)));
    return;
  }
  if (threads == 0)
    threads = args.sizes_cross ? crossing_threads(std::max(in_values, out_values) * elem) : exchange_threads(send_counts[0], W, dtype, kind);
  if (threads != 128 && threads != 256 && threads != 512) throw std::invalid_argument("exchange threads must be 128, 256 or 512");
  if (args.sizes_cross && threads != kCrossingLanes && threads != 2 * kCrossingLanes)
    throw std::invalid_argument("an all-to-all with split sizes takes 256 or 512 threads");
  // Ranks of an all-to-all whose sizes cross may run different CTA sizes (the same slices): its
  // signature names the slice's lanes. Groups place the flags: ranks must agree on them.
  args.groups = uint32_t(groups);
  args.signature = exchange_signature(kind, args.sizes_cross ? 0 : send_counts[0], dtype, codec,
                                      (args.sizes_cross ? kCrossingLanes : threads) + groups * 0x10000);
  QR_CUDA_CHECK(launch_exchange(args, dtype, codec, threads, reinterpret_cast<cudaStream_t>(stream)));
}

// The packet all-reduce's W chunks of K values, K a whole number of 16-byte vectors, so every chunk
// starts aligned; the sum is elementwise, so the chunking changes no bit.
static size_t packet_all_reduce_chunk(size_t numel, int world_size, size_t elem) {
  const size_t per_vector = 16 / elem;
  return ((numel + world_size - 1) / world_size + per_vector - 1) / per_vector * per_vector;
}

bool Communicator::all_reduce_packets_fit(size_t numel, DType dtype, size_t packet_max_bytes) const {
  const size_t elem = size_t(dtype_bytes(dtype));
  const size_t chunk = packet_all_reduce_chunk(numel, world_size_, elem);
  return numel > 0 && numel * elem <= max_bytes_ && layout_.packet_path_fits(chunk * elem, packet_max_bytes);
}

void Communicator::all_reduce_packets(uintptr_t in, uintptr_t out, size_t numel, DType dtype, uintptr_t stream,
                                      bool pdl, size_t packet_max_bytes) {
  require_usable();
  check();
  if (!all_reduce_packets_fit(numel, dtype, packet_max_bytes))
    throw std::invalid_argument("all-reduce of " + std::to_string(numel) + " values does not fit the packet path");
  if (in % 16 || out % 16) throw std::invalid_argument("input and output must be 16-byte aligned");
  const int W = world_size_;
  const size_t chunk = packet_all_reduce_chunk(numel, W, size_t(dtype_bytes(dtype)));
  ExchangeArgs args{};
  fill_common(args, in, out, pdl);
  args.kind = int(ExchangeKind::kAllReduce);
  args.even_count = uint32_t(chunk);
  for (int r = 0; r < W; ++r) {
    const size_t first = size_t(r) * chunk;
    args.send_count[r] = uint32_t(first < numel ? std::min(chunk, numel - first) : 0);  // values inside the tensor
    args.recv_count[r] = args.send_count[r];
    args.send_offset[r] = first;
    args.recv_offset[r] = first;
  }
  args.aligned = 1;
  args.signature = exchange_signature(ExchangeKind::kAllReduce, chunk, dtype, CodecId::kPassthrough, kPacketPath);
  DeviceGuard guard(device_);
  QR_CUDA_CHECK(launch_exchange_packets(args, dtype, reinterpret_cast<cudaStream_t>(stream)));
}

void Communicator::all_to_all_dynamic(uintptr_t in, uintptr_t out, uintptr_t send_counts, uintptr_t recv_counts,
                                      int count_bytes, size_t row_values, size_t in_rows, size_t capacity_rows,
                                      DType dtype, CodecId codec, uintptr_t stream, bool pdl) {
  require_usable();
  check();
  if (count_bytes != 4 && count_bytes != 8) throw std::invalid_argument("split sizes must be int32 or int64");
  if (send_counts == 0 || recv_counts == 0 || send_counts % count_bytes || recv_counts % count_bytes)
    throw std::invalid_argument("split sizes must be device tensors of W aligned int32 or int64 counts");
  if (row_values == 0) throw std::invalid_argument("rows must hold at least one value");
  if (in_rows > UINT32_MAX / row_values || capacity_rows > UINT32_MAX / row_values)
    throw std::invalid_argument("a tensor of more than 2^32 - 1 values");
  const size_t elem = size_t(dtype_bytes(dtype));
  const size_t bytes = std::max(in_rows, capacity_rows) * row_values * elem;
  if (bytes > max_bytes_)
    throw std::invalid_argument("message of " + std::to_string(bytes) + " bytes (the larger of the input and the output's "
                                "capacity) exceeds max_size " + std::to_string(max_bytes_));
  if (in % 16 || out % 16) throw std::invalid_argument("input and output must be 16-byte aligned");
  ExchangeArgs args{};
  fill_common(args, in, out, pdl);
  args.kind = int(ExchangeKind::kAllToAll);
  args.sizes_cross = 1;
  args.aligned = (row_values * elem) % 16 == 0 ? 1 : 0;  // every segment starts at a whole row
  args.dyn_send_counts = reinterpret_cast<const void*>(send_counts);
  args.dyn_recv_counts = reinterpret_cast<void*>(recv_counts);
  args.dyn_count_bytes = count_bytes;
  args.row_values = uint32_t(row_values);
  args.in_rows = uint32_t(in_rows);
  args.capacity_rows = uint32_t(capacity_rows);
  if (codec == CodecId::kLossless) codec = CodecId::kPassthrough;  // the same bits, the same wire here
  const int threads = crossing_threads(bytes);
  // Another call than the host-sized all-to-all (ranks must agree on it), and rows of another
  // length are another call too; not the CTA size (as the host-sized call's).
  args.signature = call_signature(row_values, dtype, codec, Algo(0x100 + 3 * 0x1000 + kCrossingLanes));
  DeviceGuard guard(device_);
  QR_CUDA_CHECK(launch_exchange_dynamic(args, dtype, codec, threads, reinterpret_cast<cudaStream_t>(stream)));
}

void Communicator::close() {
  if (closed_) return;
  closed_ = true;
  DeviceGuard guard(device_);
  cudaDeviceSynchronize();  // no kernel of ours may still touch the mappings
  for (auto& p : peer_maps_) close_ipc_handle(p), p = nullptr;
  if (workspace_) cudaFree(workspace_), workspace_ = nullptr;
  if (record_host_) cudaFreeHost(record_host_), record_host_ = record_device_ = nullptr;
}

}  // namespace qr
