// Dev diagnostic, compiled in only with QR_PHASE_TIMERS (pip install with QR_PHASE_TIMERS=1): thread 0
// of a two-shot CTA adds up the SM cycles it spends in each phase, and CTA 0 printfs them at the end
// of the call (lab/scripts/phase_timers.py runs it). ncu cannot profile the two-rank kernel (its replay
// waits on the unprofiled peer), so this is how to see where a codec kernel's time goes. Thread 0's
// view: it also issues the bulk copies and waits for their reads, and every thread meets it at the
// per-slice barrier, so "send" is the CTA's stall on shared-memory staging.
#pragma once
#include <cstdint>
#include <cstdio>

namespace qr {

enum class Phase { kScatter, kWaitScatter, kReduce, kAnnounce, kWaitReduce, kGather, kSend, kCount };

struct PhaseTimers {
#if QR_PHASE_TIMERS
  long long cycles[int(Phase::kCount)] = {};
  long long whole = 0;
  __device__ void begin() { whole = clock64(); }
  __device__ long long now() const { return clock64(); }
  __device__ void add(Phase p, long long since) {
    if (threadIdx.x == 0) cycles[int(p)] += clock64() - since;
  }
  __device__ void report(int rank, unsigned long long numel) const {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const long long total = clock64() - whole;
    printf("phase_timers rank %d numel %llu CTA 0 of %d: total %lld cycles | scatter %lld wait_rs %lld reduce %lld "
           "announce %lld wait_ag %lld gather %lld | send (inside scatter and reduce) %lld\n",
           rank, numel, int(gridDim.x), total, cycles[0], cycles[1], cycles[2], cycles[3], cycles[4], cycles[5],
           cycles[6]);
  }
#else
  __device__ void begin() {}
  __device__ long long now() const { return 0; }
  __device__ void add(Phase, long long) {}
  __device__ void report(int, unsigned long long) const {}
#endif
};

// The segment exchange's timeline (exchange.cuh), under the same switch: thread 0 of CTA 0 and of the
// call's last CTA (the one that advances the epoch) stamps the SM clock at each point below and prints
// the steps between them when the call ends, with the global timer (ns) at its start and its length, so
// CTA 0's start and the last CTA's end bound the call (lab/scripts/exchange_timers.py runs it). Inside
// push_receive it adds up its laps: encoding and staging the pushes (with thread 0's waits for free
// stage slots), waiting for the sources' flags, decoding, and announcing (waiting for this CTA's bulk
// copies to land: the link) (lab/scripts/exchange_laps.py).
enum class ExchangeMark { kStart, kCounts, kPeersReady, kSizes, kPlan, kMoved, kEnd, kCount };
enum class ExchangeLap { kPush, kWait, kDecode, kAnnounce, kCount };

struct ExchangeTimers {
#if QR_PHASE_TIMERS
  long long at[int(ExchangeMark::kCount)] = {};
  unsigned long long start_ns = 0, end_ns = 0;
  bool last = false;
  long long lap_at = 0, laps[int(ExchangeLap::kCount)] = {};
  __device__ void lap_start() {
    if (threadIdx.x == 0) lap_at = clock64();
  }
  __device__ void lap(ExchangeLap l) {
    if (threadIdx.x != 0) return;
    const long long now = clock64();
    laps[int(l)] += now - lap_at;
    lap_at = now;
  }
  __device__ void mark(ExchangeMark m) {
    if (threadIdx.x != 0) return;
    at[int(m)] = clock64();
    if (m == ExchangeMark::kStart) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start_ns));
    if (m == ExchangeMark::kEnd) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end_ns));
  }
  __device__ void mark_last() { last = true; }
  __device__ void report(int rank, int dynamic) const {
    if (threadIdx.x != 0 || (blockIdx.x != 0 && !last)) return;
    auto step = [&](ExchangeMark a, ExchangeMark b) { return at[int(b)] - at[int(a)]; };
    printf("exchange_timers rank %d dynamic %d CTA %d%s of %d x %d (cycles): counts %lld peers_ready %lld sizes %lld "
           "plan %lld push_receive %lld end %lld | start %llu ns, %llu ns long | laps: push %lld wait %lld decode %lld "
           "announce %lld\n",
           rank, dynamic, int(blockIdx.x), last ? " (last)" : "", int(gridDim.x), int(blockDim.x),
           step(ExchangeMark::kStart, ExchangeMark::kCounts),
           step(ExchangeMark::kCounts, ExchangeMark::kPeersReady), step(ExchangeMark::kPeersReady, ExchangeMark::kSizes),
           step(ExchangeMark::kSizes, ExchangeMark::kPlan), step(ExchangeMark::kPlan, ExchangeMark::kMoved),
           step(ExchangeMark::kMoved, ExchangeMark::kEnd), start_ns, end_ns - start_ns, laps[0], laps[1], laps[2],
           laps[3]);
  }
#else
  __device__ void lap_start() {}
  __device__ void lap(ExchangeLap) {}
  __device__ void mark(ExchangeMark) {}
  __device__ void mark_last() {}
  __device__ void report(int, int) const {}
#endif
};

}  // namespace qr
