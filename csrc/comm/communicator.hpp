// Communicator: one rank's workspace, its peers' mappings, and the all-reduce entry point.
//
// Contract (NCCL-like):
//  - Every rank of the group creates one with the same world size and max_bytes, exchanges
//    ipc_handle() bytes out of band, then calls open_peers(all handles, in rank order).
//  - all_reduce() enqueues a sum on `stream` (the caller's) and returns at once; it is CUDA-graph
//    capturable (no host state changes per call: epochs live on the device).
//  - Every rank must make the same sequence of calls (same numel, dtype, codec, algorithm).
//  - Calls on one communicator must not run concurrently on different streams.
//  - A peer that never arrives makes the kernel give up after timeout_s; check() then throws
//    PeerTimeoutError and every later all_reduce() throws at once.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/args.hpp"
#include "codecs/codec_list.hpp"

namespace qr {

enum class Algo : int { kOneShot = 0, kTwoShot = 1 };

class Communicator {
 public:
  Communicator(int rank, int world_size, int device, size_t max_bytes, double timeout_s);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  std::string ipc_handle() const;
  void open_peers(const std::vector<std::string>& handles);
  // in/out: device pointers, 16-byte aligned; out may equal in. threads = 0 picks the CTA size.
  // residual (two-shot only; 0: none): out = to_T(to_T(sum) + residual), the add + RMSNorm epilogue's
  // add done at the all-reduce's stores (residual 16-byte aligned; may equal out).
  void all_reduce(uintptr_t in, uintptr_t out, size_t numel, DType dtype, CodecId codec, Algo algo,
                  uintptr_t stream, int threads = 0, int blocks = 0, bool pdl = false, int groups = 0,
                  uintptr_t residual = 0);
  // The one-shot all-reduce of rows x hidden values with the add + RMSNorm epilogue in the same
  // kernel (out = the normed rows, residual_out = sum + residual): where fused_add_rmsnorm_fits.
  void all_reduce_add_rmsnorm(uintptr_t in, uintptr_t out, uintptr_t residual, uintptr_t weight,
                              uintptr_t residual_out, size_t rows, size_t hidden, float eps, DType dtype,
                              uintptr_t stream, bool pdl = false);
  // Whether that kernel takes the shape: a row a cluster of whole 128-thread CTAs (hidden a
  // multiple of 1024, 1 to 16 of them), one vector a thread, within the one-shot's buffers, at
  // most kFusedOneShotMaxBytes (above it the two-kernel path measured faster).
  bool fused_add_rmsnorm_fits(size_t rows, size_t hidden) const;
  // Reduce-scatter, all-gather or all-to-all (docs/codec-spec.md). Counts are values, one per rank:
  //  - all-gather: send_counts[d] = k (my whole input to everyone), recv_counts[s] = k;
  //  - all-to-all: send_counts[d] = my input split for d, recv_counts[s] = my output split from s
  //    (both in rank order, segments contiguous); the peers' sizes are checked in the kernel;
  //  - reduce-scatter: send_counts[d] = recv_counts[s] = k (block d of my input goes to d).
  // dtype may be fp32. in/out: device pointers, 16-byte aligned, not overlapping.
  // even_splits (all-to-all): every rank sends every rank the same count, which every rank knows
  // (split sizes not given), so no sizes cross the link. Passthrough segments of at most
  // min(packet_max_bytes, 2 MiB) take the flag-in-data path (exchange/packets.cuh) unless
  // threads is set (which picks the slice kernel's CTA size). groups: the slice kernel's pipeline groups
  // a CTA, 1-64 (0: the rule); every rank passes the same.
  void exchange(ExchangeKind kind, uintptr_t in, uintptr_t out, DType dtype, CodecId codec,
                const std::vector<size_t>& send_counts, const std::vector<size_t>& recv_counts, uintptr_t stream,
                bool pdl = false, int threads = 0, bool even_splits = false, size_t packet_max_bytes = SIZE_MAX,
                int groups = 0);
  // The dynamic all-to-all (collectives/exchange/dynamic_plan.hpp): rows of row_values values; in
  // holds in_rows rows, out capacity_rows. send_counts/recv_counts: device pointers to W int32
  // (count_bytes 4) or int64 (8) row counts, read (this rank's rows for each rank, in rank order)
  // and written (the rows received from each rank, in rank order in out) by the kernel; the host
  // never reads them. Bad counts are reported through the error record (SplitSizeError), never
  // followed past a buffer. Every rank passes the same row_values, dtype and codec.
  // Exact all-reduce of 16-bit or fp32 values as reduce-scatter + all-gather in one packet kernel
  // (the bits of the two-shot's passthrough, as algo rs_ag), where W chunks fit the packet path.
  bool all_reduce_packets_fit(size_t numel, DType dtype, size_t packet_max_bytes) const;
  void all_reduce_packets(uintptr_t in, uintptr_t out, size_t numel, DType dtype, uintptr_t stream, bool pdl,
                          size_t packet_max_bytes);
  void all_to_all_dynamic(uintptr_t in, uintptr_t out, uintptr_t send_counts, uintptr_t recv_counts, int count_bytes,
                          size_t row_values, size_t in_rows, size_t capacity_rows, DType dtype, CodecId codec,
                          uintptr_t stream, bool pdl = false);
  // Throws PeerTimeoutError, CallMismatchError or SplitSizeError if a kernel recorded a timeout, a
  // mismatch or bad dynamic all-to-all counts.
  void check();
  void close();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int device() const { return device_; }
  size_t max_bytes() const { return max_bytes_; }
  size_t workspace_bytes() const { return layout_.total; }
  size_t one_shot_max_bytes() const { return layout_.lamport_vectors * 16; }
  bool is_open() const { return peers_open_ && !closed_; }
  bool is_broken() const { return broken_; }

 private:
  void require_usable() const;
  // What every launch's Args struct holds alike: pointers, this rank, every workspace, the error path.
  template <class Args>
  void fill_common(Args& args, uintptr_t in, uintptr_t out, bool pdl) const {
    args.in = reinterpret_cast<const void*>(in);
    args.out = reinterpret_cast<void*>(out);
    args.rank = rank_;
    args.world_size = world_size_;
    for (int r = 0; r < world_size_; ++r) args.workspaces[r] = r == rank_ ? workspace_ : peer_maps_[r];
    args.layout = layout_;
    args.record = record_device_;
    args.timeout_ns = timeout_ns_;
    args.pdl = pdl ? 1 : 0;
  }
  int rank_, world_size_, device_;
  size_t max_bytes_;
  // one_shot_add_rmsnorm_kernel's CTAs resident at once (queried once; 0: not yet, -1: none fit)
  mutable int fused_resident_ctas_ = 0;
  uint64_t timeout_ns_;
  WorkspaceLayout layout_;
  uint8_t* workspace_ = nullptr;
  ErrorRecord* record_host_ = nullptr;
  ErrorRecord* record_device_ = nullptr;
  std::vector<uint8_t*> peer_maps_;  // mapped peer workspaces (nullptr at own rank)
  bool peers_open_ = false, closed_ = false, broken_ = false;
};

}  // namespace qr
