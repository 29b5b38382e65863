#include "comm/communicator.hpp"

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
  if (broken_) throw PeerTimeoutError("communicator is broken by an earlier peer timeout; create a new one");
}

void Communicator::check() {
  if (!record_host_) return;
  volatile ErrorRecord* r = record_host_;
  if (r->code == uint32_t(ErrorCode::kOk)) return;
  broken_ = true;
  if (r->code == uint32_t(ErrorCode::kMismatch))
    throw CallMismatchError("rank " + std::to_string(r->rank) + " and rank " + std::to_string(r->peer) +
                            " made different all-reduce calls (size, dtype, codec or algorithm differ: signature " +
                            std::to_string(r->expected) + " vs " + std::to_string(r->seen) +
                            "); every rank must make the same calls in the same order");
  const char* phase = r->phase == 0 ? "one-shot packets" : r->phase == 1 ? "reduce-scatter" : "all-gather";
  throw PeerTimeoutError("rank " + std::to_string(r->rank) + " timed out waiting for rank " + std::to_string(r->peer) +
                         " (" + phase + ", call epoch " + std::to_string(r->expected) + ", flag seen " +
                         std::to_string(r->seen) + ", block " + std::to_string(r->block) +
                         "): the peer did not make the same call in time");
}

void Communicator::all_reduce(uintptr_t in, uintptr_t out, size_t numel, DType dtype, CodecId codec, Algo algo,
                              uintptr_t stream, int threads, int blocks, bool pdl, int groups) {
  require_usable();
  check();
  if (numel == 0) return;
  if (numel * 2 > max_bytes_)
    throw std::invalid_argument("message of " + std::to_string(numel * 2) + " bytes exceeds max_size " +
                                std::to_string(max_bytes_));
  if (in % 16 || out % 16) throw std::invalid_argument("input and output must be 16-byte aligned");
  AllReduceArgs args{};
  args.in = reinterpret_cast<const void*>(in);
  args.out = reinterpret_cast<void*>(out);
  args.numel = numel;
  args.rank = rank_;
  args.world_size = world_size_;
  for (int r = 0; r < world_size_; ++r) args.workspaces[r] = r == rank_ ? workspace_ : peer_maps_[r];
  args.layout = layout_;
  args.record = record_device_;
  args.timeout_ns = timeout_ns_;
  args.pdl = pdl ? 1 : 0;
  args.signature = call_signature(numel, dtype, codec, algo);
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
    QR_CUDA_CHECK(launch_two_shot(args, dtype, codec, s));
  }
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
