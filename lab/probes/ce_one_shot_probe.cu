// Probe (not part of the package): can the copy engine carry the one-shot's bulk faster than SM
// stores? One process drives both GPUs of a 2-GPU host with peer access. Per call and rank:
//   side stream: cudaMemcpyAsync of the input's vectors [sm_vectors, n) into the peer's buffer
//   main stream: a kernel that pushes vectors [0, sm_vectors) with 16-byte stores, then polls
//                its own buffer until every vector has no 0xFFFF half (the "empty" sentinel),
//                sums in rank order, writes the output and empties the slot again.
// Modes (the list in main; lab/NOTES.md runs 77a-87 say which list each run used): sm
// (sm_vectors = n: today's one-shot shape), ce (0), mixes, flagged copy-engine chunks,
// push-only. Each rank's calls are a CUDA graph of kCalls calls; time = median over replays /
// kCalls, per rank. `ce_probe BLOCKS ipc`: the SM one-shot in two processes over CUDA IPC.
// Build: nvcc -O3 -arch=sm_90 -o /tmp/ce_probe lab/probes/ce_one_shot_probe.cu
#include <cuda_bf16.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

constexpr int kCalls = 15;   // divisible by kBuffers so replays keep the rotation
constexpr int kBuffers = 3;
constexpr int kMaxInputs = 20;  // distinct inputs per rank (argv[2], default 5: 5 x 8 MB x 2 > L2)
constexpr uint32_t kEmptyWord = 0xFFFFFFFFu;

__device__ __forceinline__ uint4 ld_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void st_volatile(uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ bool half_empty(uint32_t w) { return (w & 0xffffu) == 0xffffu || (w >> 16) == 0xffffu; }
__device__ __forceinline__ bool arrived(uint4 v) {
  return !(half_empty(v.x) || half_empty(v.y) || half_empty(v.z) || half_empty(v.w));
}
__device__ __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ uint32_t pack(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}
__device__ __forceinline__ uint4 add(uint4 a, uint4 b) {  // a first: rank order
  return make_uint4(pack(lo(a.x) + lo(b.x), hi(a.x) + hi(b.x)), pack(lo(a.y) + lo(b.y), hi(a.y) + hi(b.y)),
                    pack(lo(a.z) + lo(b.z), hi(a.z) + hi(b.z)), pack(lo(a.w) + lo(b.w), hi(a.w) + hi(b.w)));
}

// poll_ns > 0: sleep that long between failed polls; consume == false: push only (no poll, no
// sum; timing only, leaves the peer's buffer full).
__global__ void one_shot(const uint4* in, uint4* out, uint4* mine, uint4* peer, size_t n, size_t sm_vectors, int rank,
                         int poll_ns = 0, bool consume = true, bool empty_slots = true, bool keep = false) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint4 kept[4];  // keep: the first four vectors sent stay in registers for the sum
  int i = 0;
  for (size_t p = first; p < sm_vectors; p += stride, ++i) {
    const uint4 v = in[p];
    st_volatile(peer + p, v);
    if (keep && i < 4) kept[i] = v;
  }
  if (!consume) return;
  const uint4 empty = make_uint4(kEmptyWord, kEmptyWord, kEmptyWord, kEmptyWord);
  i = 0;
  for (size_t p = first; p < n; p += stride, ++i) {
    const uint4 own = keep && i < 4 ? kept[i] : in[p];
    uint4 v;
    long spins = 0;
    while (!arrived(v = ld_volatile(mine + p)) && ++spins < (1l << 26))
      if (poll_ns) __nanosleep(poll_ns);
    out[p] = rank == 0 ? add(own, v) : add(v, own);
    if (empty_slots) mine[p] = empty;
  }
}

// Receive one vector: poll the own buffer until the peer's vector has landed, sum in rank order,
// write the output and empty the slot.
__device__ __forceinline__ void receive(const uint4& own, uint4* out, uint4* mine, size_t p, int rank) {
  uint4 v;
  long spins = 0;
  while (!arrived(v = ld_volatile(mine + p)) && ++spins < (1l << 26)) {
  }
  out[p] = rank == 0 ? add(own, v) : add(v, own);
  mine[p] = make_uint4(kEmptyWord, kEmptyWord, kEmptyWord, kEmptyWord);
}

// Warp-specialised: the first push_threads threads of a CTA push, the others poll and sum. Both
// halves walk the same vectors in the same order, so a receiver waits for what the peer's pusher
// of the same CTA sends at the same time, and no receive waits behind a stalled store issue.
__global__ void __launch_bounds__(256) one_shot_ws(const uint4* in, uint4* out, uint4* mine, uint4* peer, size_t n,
                                                   int rank, int push_threads) {
  const bool pusher = int(threadIdx.x) < push_threads;
  const int width = pusher ? push_threads : int(blockDim.x) - push_threads;
  const int t = pusher ? threadIdx.x : threadIdx.x - push_threads;
  const size_t stride = size_t(gridDim.x) * width;
  for (size_t p = size_t(blockIdx.x) * width + t; p < n; p += stride) {
    if (pusher) st_volatile(peer + p, in[p]);
    else receive(in[p], out, mine, p, rank);
  }
}

// Interleaved: push vector k, then receive vector k - lag (its own value kept in registers), so
// the receive work runs while the pushes drain instead of after the last one.
template <int kLag>
__global__ void one_shot_il(const uint4* in, uint4* out, uint4* mine, uint4* peer, size_t n, int rank) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint4 held[kLag];
  int k = 0;
  for (size_t p = first; p < n; p += stride, ++k) {
    const uint4 v = in[p];
    st_volatile(peer + p, v);
    if (k >= kLag) receive(held[k % kLag], out, mine, p - kLag * stride, rank);
    held[k % kLag] = v;
  }
  for (int j = k > kLag ? k - kLag : 0; j < k; ++j) receive(held[j % kLag], out, mine, first + j * stride, rank);
}

// Copy-engine chunks with a flag each: the sender's side stream copies chunk k and then writes
// flags[k] = 1 in this rank's memory (cuStreamWriteValue32, fenced after the copy). The CTAs of
// chunk k wait for that flag (thread 0), sum the chunk and the last of them resets the flag.
// No sentinel and no emptying: the flag says the whole chunk has landed.
__global__ void chunk_sum(const uint4* in, uint4* out, const uint4* mine, uint32_t* flags, uint32_t* done, size_t n,
                          int chunks, int rank) {
  const int per_chunk = gridDim.x / chunks, k = blockIdx.x / per_chunk;
  if (k >= chunks) return;
  const size_t chunk = (n + chunks - 1) / chunks, lo = k * chunk, hi = lo + chunk < n ? lo + chunk : n;
  if (threadIdx.x == 0) {
    long spins = 0;
    while (*reinterpret_cast<volatile uint32_t*>(flags + k) == 0 && ++spins < (1l << 26)) {
    }
  }
  __syncthreads();
  const size_t stride = size_t(per_chunk) * blockDim.x;
  for (size_t p = lo + size_t(blockIdx.x % per_chunk) * blockDim.x + threadIdx.x; p < hi; p += stride) {
    const uint4 own = in[p], v = __ldcg(mine + p);
    out[p] = rank == 0 ? add(own, v) : add(v, own);
  }
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(done + k, 1u) == uint32_t(per_chunk - 1)) {
    done[k] = 0;
    flags[k] = 0;
  }
}

__global__ void fill_random(uint32_t* p, size_t words, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    // two bf16 values with exponents 120..127 (no NaN, so never the sentinel)
    uint32_t a = (h & 0x807fu) | ((120u + ((h >> 8) & 7u)) << 7);
    uint32_t b = ((h >> 16) & 0x807fu) | ((120u + ((h >> 24) & 7u)) << 7);
    p[i] = a | (b << 16);
  }
}
__global__ void fill_words(uint32_t* p, size_t words, uint32_t v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}
__global__ void check(const uint4* x0, const uint4* x1, const uint4* out, size_t n, unsigned long long* bad) {
  for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < n; p += size_t(gridDim.x) * blockDim.x) {
    uint4 e = add(x0[p], x1[p]), o = out[p];
    if (e.x != o.x || e.y != o.y || e.z != o.z || e.w != o.w) atomicAdd(bad, 1ull);
  }
}

// cuStreamWriteValue32 through the runtime's driver entry point (no link against libcuda).
using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static WriteValue32 write_value32() {
  static WriteValue32 fn = nullptr;
  if (!fn) {
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", reinterpret_cast<void**>(&fn), 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !fn) {
      std::printf("no cuStreamWriteValue32\n");
      std::exit(1);
    }
  }
  return fn;
}

struct Rank {
  cudaStream_t main, side;
  cudaEvent_t fork[kCalls], join[kCalls], t0, t1;
  uint4 *in[kMaxInputs], *out[kMaxInputs], *buf;  // buf: kBuffers x max_vectors
  uint32_t *flags, *done;                           // kBuffers x 64 each
  cudaGraphExec_t exec = nullptr;
};

// Both GPUs meet here before each timed replay (flags in the peer's buffer tail), so the two
// processes' graphs start within a poll of each other.
__global__ void gpu_barrier(uint32_t* mine, uint32_t* peer, uint32_t value) {
  *reinterpret_cast<volatile uint32_t*>(peer) = value;
  long spins = 0;
  while (*reinterpret_cast<volatile uint32_t*>(mine) < value && ++spins < (1l << 26)) {
  }
}
__global__ void gpu_sleep(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// The SM one-shot as the package runs it: two processes, the buffers shared by CUDA IPC (no peer
// access), pipes for the handles. Same kernel, sizes and timing as the one-process modes, with
// kIpcCalls calls a graph so the start skew spreads thin.
static int run_two_processes(int blocks, int threads) {
  constexpr int kIpcCalls = 60;
  const size_t max_bytes = size_t(16) << 20, max_vectors = max_bytes / 16, tail = 4096;
  int to_child[2], to_parent[2];
  if (pipe(to_child) || pipe(to_parent)) return 1;
  const pid_t pid = fork();
  const int rank = pid == 0 ? 1 : 0;
  const int rd = rank ? to_child[0] : to_parent[0], wr = rank ? to_parent[1] : to_child[1];
  auto swap = [&](const void* mine, void* theirs, size_t n) {
    if (write(wr, mine, n) != ssize_t(n)) std::exit(1);
    size_t got = 0;
    while (got < n) {
      const ssize_t k = read(rd, static_cast<char*>(theirs) + got, n - got);
      if (k <= 0) std::exit(1);
      got += size_t(k);
    }
  };
  CK(cudaSetDevice(rank));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  uint4 *in[5], *out[5], *buf, *peer_buf;
  for (int i = 0; i < 5; ++i) {
    CK(cudaMalloc(&in[i], max_bytes));
    CK(cudaMalloc(&out[i], max_bytes));
    fill_random<<<264, 512>>>(reinterpret_cast<uint32_t*>(in[i]), max_bytes / 4, 977u * rank + 31u * i + 1u);
  }
  CK(cudaMalloc(&buf, kBuffers * max_bytes + tail));
  fill_words<<<264, 512>>>(reinterpret_cast<uint32_t*>(buf), kBuffers * max_bytes / 4, kEmptyWord);
  CK(cudaMemset(reinterpret_cast<char*>(buf) + kBuffers * max_bytes, 0, tail));
  CK(cudaDeviceSynchronize());
  cudaIpcMemHandle_t mine_h, peer_h;
  CK(cudaIpcGetMemHandle(&mine_h, buf));
  swap(&mine_h, &peer_h, sizeof mine_h);
  CK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&peer_buf), peer_h, cudaIpcMemLazyEnablePeerAccess));
  auto* my_flag = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(buf) + kBuffers * max_bytes);
  auto* peer_flag = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(peer_buf) + kBuffers * max_bytes);
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  if (rank == 0) std::printf("two processes, CUDA IPC, blocks %d, %d calls a graph\n", blocks, kIpcCalls);
  uint32_t meeting = 0;
  for (double mb : {1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0}) {
    const size_t n = size_t(mb * (1 << 20)) / 16;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int c = 0; c < kIpcCalls; ++c)
      one_shot<<<blocks, threads, 0, st>>>(in[c % 5], out[c % 5], buf + size_t(c % kBuffers) * max_vectors,
                                           peer_buf + size_t(c % kBuffers) * max_vectors, n, n, rank);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
    std::vector<float> t;
    for (int rep = 0; rep < 12; ++rep) {
      char b = 0, o;
      swap(&b, &o, 1);  // both hosts here: the two barrier kernels are enqueued close together
      gpu_sleep<<<1, 1, 0, st>>>(200000);
      gpu_barrier<<<1, 1, 0, st>>>(my_flag, peer_flag, ++meeting);
      CK(cudaEventRecord(t0, st));
      CK(cudaGraphLaunch(exec, st));
      CK(cudaEventRecord(t1, st));
      CK(cudaStreamSynchronize(st));
      float ms;
      CK(cudaEventElapsedTime(&ms, t0, t1));
      if (rep >= 2) t.push_back(ms * 1000.f / kIpcCalls);
    }
    std::sort(t.begin(), t.end());
    float mine_us = t[t.size() / 2], peer_us;
    swap(&mine_us, &peer_us, sizeof mine_us);
    if (rank == 0) std::printf("%-8.0f %-10s %10.2f %10.1f\n", mb, "ipc-sm", std::max(mine_us, peer_us), n * 16 / (std::max(mine_us, peer_us) * 1e3));
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g));
  }
  if (rank == 1) std::exit(0);
  return 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows survive a timeout kill behind a pipe
  const size_t max_bytes = size_t(16) << 20, max_vectors = max_bytes / 16;
  const int blocks = argc > 1 ? std::atoi(argv[1]) : 1056, threads = 128;
  if (argc > 2 && std::strcmp(argv[2], "ipc") == 0) return run_two_processes(blocks, threads);
  const int kInputs = argc > 2 ? std::atoi(argv[2]) : 5, outputs = argc > 3 ? std::atoi(argv[3]) : kInputs;
  Rank r[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaStreamCreateWithFlags(&r[d].main, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&r[d].side, cudaStreamNonBlocking));
    for (int i = 0; i < kCalls; ++i) {
      CK(cudaEventCreateWithFlags(&r[d].fork[i], cudaEventDisableTiming));
      CK(cudaEventCreateWithFlags(&r[d].join[i], cudaEventDisableTiming));
    }
    CK(cudaEventCreate(&r[d].t0));
    CK(cudaEventCreate(&r[d].t1));
    for (int i = 0; i < kInputs; ++i) {
      CK(cudaMalloc(&r[d].in[i], max_bytes));
      if (i < outputs) CK(cudaMalloc(&r[d].out[i], max_bytes));
      fill_random<<<264, 512>>>(reinterpret_cast<uint32_t*>(r[d].in[i]), max_bytes / 4, 977u * d + 31u * i + 1u);
    }
    CK(cudaMalloc(&r[d].buf, kBuffers * max_bytes));
    CK(cudaMalloc(&r[d].flags, kBuffers * 64 * 4));
    CK(cudaMalloc(&r[d].done, kBuffers * 64 * 4));
    CK(cudaMemset(r[d].flags, 0, kBuffers * 64 * 4));
    CK(cudaMemset(r[d].done, 0, kBuffers * 64 * 4));
    fill_words<<<264, 512>>>(reinterpret_cast<uint32_t*>(r[d].buf), kBuffers * max_bytes / 4, kEmptyWord);
    CK(cudaDeviceSynchronize());
  }
  std::printf("blocks %d inputs %d outputs %d\n%-8s %-10s %10s %10s %8s\n", blocks, kInputs, outputs, "size", "mode", "us/call", "GB/s", "bad");
  const double sizes_mb[] = {2, 4, 8, 16};
  // frac >= 0: SM pushes that fraction, the copy engine the rest (one copy); -K: K flagged
  // copy-engine chunks summed by chunk_sum; -100-K: the K flagged copies alone, no kernel.
  // 1.0 + k/1000 (k < 100): SM one-shot polling with a k*10 ns sleep; 2: push only, both ranks;
  // 3: push only, rank 0 (one direction).
  // 4: the copy engine empties each buffer (cudaMemsetAsync on a forked stream, joined two calls
  // later) instead of the kernel; 5: own vectors kept in registers; 6: both. Run 87: with these
  // modes listed the probe never printed a row in 120 s (unexplained; a guess: the memset runs
  // as a kernel that cannot start beside a spinning one-shot that fills every SM). Unverified.
  // Session 11 found the cause: a dangling else launched chunk_sum (waiting ~forever for a flag
  // nobody sets) after every call of those modes; fixed.
  // 7: warp-specialised (one_shot_ws, 128 pushers + 128 receivers a CTA); 7.5: 128 + 64;
  // 8 / 8.5: interleaved (one_shot_il, lag 1 / 2); 9: the SM one-shot into the own buffer (no link).
  // Run 86 listed {1.0, 1.005, 1.02, 1.1, 2.0, 3.0}.
  const double sm_fracs[] = {1.0, 2.0, 7.0, 7.5, 8.0, 8.5, 9.0, 1.0, 7.0};
  for (double mb : sizes_mb) {
    const size_t n = size_t(mb * (1 << 20)) / 16;
    for (double frac : sm_fracs) {
      const bool push_only = frac == 2.0 || frac == 3.0, sm_variant = frac > 1.0;
      const bool ce_empty = frac == 4.0 || frac == 6.0, keep = frac == 5.0 || frac == 6.0;
      const int poll_ns = sm_variant && frac < 2.0 ? int((frac - 1.0) * 1000 + 0.5) * 10 : 0;
      const size_t sm_vectors = frac < 0 ? 0 : sm_variant ? n : size_t(frac * n) / 128 * 128;
      const int chunks = frac < -100 ? int(-frac - 100) : frac < 0 ? int(-frac) : 1;
      const bool kernel = frac > -100, flagged = frac < 0;
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(r[d].main, cudaStreamCaptureModeThreadLocal));
        for (int c = 0; c < kCalls; ++c) {
          uint4* mine = r[d].buf + size_t(c % kBuffers) * max_vectors;
          uint4* peer = r[1 - d].buf + size_t(c % kBuffers) * max_vectors;
          const uint4* in = r[d].in[c % kInputs];
          if (sm_vectors < n) {
            CK(cudaEventRecord(r[d].fork[c], r[d].main));
            CK(cudaStreamWaitEvent(r[d].side, r[d].fork[c], 0));
            if (!flagged) {
              CK(cudaMemcpyAsync(peer + sm_vectors, in + sm_vectors, (n - sm_vectors) * 16, cudaMemcpyDeviceToDevice, r[d].side));
            } else {
              const size_t chunk = (n + chunks - 1) / chunks;
              uint32_t* peer_flags = r[1 - d].flags + (c % kBuffers) * 64;
              for (int k = 0; k < chunks; ++k) {
                const size_t lo = k * chunk, hi = std::min(n, lo + chunk);
                CK(cudaMemcpyAsync(peer + lo, in + lo, (hi - lo) * 16, cudaMemcpyDeviceToDevice, r[d].side));
                if (write_value32()(r[d].side, CUdeviceptr(peer_flags + k), 1, 0) != CUDA_SUCCESS) {
                  std::printf("cuStreamWriteValue32 failed\n");
                  std::exit(1);
                }
              }
            }
            CK(cudaEventRecord(r[d].join[c], r[d].side));
          }
          if (frac >= 7.0 && frac < 8.0)  // 7: 128 pushers + 128 receivers a CTA; 7.5: 128 + 64
            one_shot_ws<<<blocks, frac == 7.0 ? 256 : 192, 0, r[d].main>>>(in, r[d].out[c % kInputs % outputs], mine,
                                                                         peer, n, d, 128);
          else if (frac == 8.0 || frac == 8.5)  // push k, receive k - lag (lag 1 or 2)
            (frac == 8.0 ? one_shot_il<1> : one_shot_il<2>)<<<blocks, threads, 0, r[d].main>>>(
                in, r[d].out[c % kInputs % outputs], mine, peer, n, d);
          else if (frac >= 0)
            one_shot<<<blocks, threads, 0, r[d].main>>>(in, r[d].out[c % kInputs % outputs], mine, frac == 9.0 ? mine : peer, n,
                                                        frac == 3.0 && d == 1 ? 0 : sm_vectors, d, poll_ns, !push_only,
                                                        !ce_empty, keep);
          if (ce_empty) {  // empty this call's buffer off the SMs; call c + 2 waits for it
            CK(cudaEventRecord(r[d].fork[c], r[d].main));
            CK(cudaStreamWaitEvent(r[d].side, r[d].fork[c], 0));
            CK(cudaMemsetAsync(mine, 0xff, n * 16, r[d].side));
            CK(cudaEventRecord(r[d].join[c], r[d].side));
          }
          if (ce_empty && c + 1 < kCalls && c >= 1) CK(cudaStreamWaitEvent(r[d].main, r[d].join[c - 1], 0));
          else if (kernel && flagged)
            chunk_sum<<<blocks / chunks * chunks, threads, 0, r[d].main>>>(in, r[d].out[c % kInputs % outputs], mine,
                r[d].flags + (c % kBuffers) * 64, r[d].done + (c % kBuffers) * 64, n, chunks, d);
          if (sm_vectors < n) CK(cudaStreamWaitEvent(r[d].main, r[d].join[c], 0));
        }
        if (ce_empty)
          for (int c = kCalls - 2; c < kCalls; ++c) CK(cudaStreamWaitEvent(r[d].main, r[d].join[c], 0));
        CK(cudaStreamEndCapture(r[d].main, &g));
        if (r[d].exec) CK(cudaGraphExecDestroy(r[d].exec));
        CK(cudaGraphInstantiate(&r[d].exec, g, 0));
        CK(cudaGraphDestroy(g));
      }
      std::vector<float> t[2];
      for (int rep = 0; rep < 12; ++rep) {
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          CK(cudaEventRecord(r[d].t0, r[d].main));
          CK(cudaGraphLaunch(r[d].exec, r[d].main));
          CK(cudaEventRecord(r[d].t1, r[d].main));
        }
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          CK(cudaStreamSynchronize(r[d].main));
          float ms;
          CK(cudaEventElapsedTime(&ms, r[d].t0, r[d].t1));
          if (rep >= 2) t[d].push_back(ms * 1000.f / kCalls);
        }
      }
      unsigned long long bad_total = 0;
      if (kernel && !push_only) {
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          unsigned long long* bad;
          CK(cudaMallocManaged(&bad, 8));
          *bad = 0;
          const int c = kCalls - 1;
          check<<<264, 512>>>(r[0].in[c % kInputs], r[1].in[c % kInputs], r[d].out[c % kInputs % outputs], n, bad);
          CK(cudaDeviceSynchronize());
          bad_total += *bad;
          CK(cudaFree(bad));
        }
      }
      if (!kernel || flagged || push_only) {  // copies nobody emptied, flags nobody reset: clean for the next mode
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          fill_words<<<264, 512>>>(reinterpret_cast<uint32_t*>(r[d].buf), kBuffers * max_bytes / 4, kEmptyWord);
          CK(cudaMemset(r[d].flags, 0, kBuffers * 64 * 4));
          CK(cudaMemset(r[d].done, 0, kBuffers * 64 * 4));
          CK(cudaDeviceSynchronize());
        }
      }
      for (int d = 0; d < 2; ++d) std::sort(t[d].begin(), t[d].end());
      const float us = std::max(t[0][t[0].size() / 2], t[1][t[1].size() / 2]);
      char mode[32];
      if (!kernel) std::snprintf(mode, sizeof mode, "ce%d-only", chunks);
      else if (flagged) std::snprintf(mode, sizeof mode, "ce%d-flag", chunks);
      else if (push_only) std::snprintf(mode, sizeof mode, frac == 2.0 ? "push-both" : "push-one");
      else if (poll_ns) std::snprintf(mode, sizeof mode, "sm-nap%d", poll_ns);
      else if (frac >= 7.0) std::snprintf(mode, sizeof mode, frac == 7.0 ? "ws128+128" : frac == 7.5 ? "ws128+64" : frac == 8.0 ? "il-lag1" : frac == 8.5 ? "il-lag2" : "local-sm");
      else if (ce_empty || keep) std::snprintf(mode, sizeof mode, "sm%s%s", ce_empty ? "-memset" : "", keep ? "-keep" : "");
      else std::snprintf(mode, sizeof mode, "sm%.3f", frac);
      std::printf("%-8.0f %-10s %10.2f %10.1f %8llu\n", mb, mode, us, n * 16 / (us * 1e3), bad_total);
    }
  }
  return 0;
}
