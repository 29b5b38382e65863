"""`quickreduce bench moe`: an expert-parallel MoE layer with the dynamic all-to-all (docs/moe.md).

Two parts (``--part``):

- ``layer``: route (a gate matmul, softmax, top-k), dispatch (one row per (token, expert) pair to the
  expert's rank), a stand-in expert (each received row doubled, by a kernel that reads the received
  count on the device and skips the rows past it, as a count-aware grouped GEMM would), combine (the
  rows back to their tokens' ranks) and the top-k weighted sum, per method:
    qr_graph[:codec]  the whole layer in one CUDA graph, both all-to-alls all_to_all_dynamic (the
                      dispatch through the codec, the combine exact); the counts change at every
                      replay (a device-side step picks another router noise), nothing waits on the host;
    qr_host           the same layer eagerly, with the counts brought to the host (an exact quickreduce
                      all-to-all of the counts, .tolist()) and the host-sized quickreduce all_to_all;
    nccl              the same with torch.distributed.all_to_all_single (NCCL) for the counts and rows.
  Shapes: DeepSeek-V3-like (hidden 7168, 256 experts, top-8) and Mixtral-like (hidden 4096, 8
  experts, top-2), experts spread over the ranks in contiguous blocks; tokens a rank from decode (1)
  to prefill (16384); router skew from uniform to heavy (a Zipf bias over the experts: the first
  ranks' experts get most tokens). The output's error against the exact layer is reported per codec.
- ``a2a``: one all_to_all_dynamic against the host-sized all_to_all at the same counts, both in CUDA
  graphs, message sizes 8 KB to 256 MB a rank.

Timing: the median of ``--iters`` samples, each one layer, after a barrier and between CUDA events,
the GPU kept busy while the host launches it (a2a: each sample one replay of a graph of 20 calls,
per call; the dynamic and the host-sized graphs take turns);
the slowest rank's median is reported.
Writes one CSV (``--csv``), one row per measurement.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from dataclasses import dataclass, field

MODELS = {
    "deepseek-v3": (7168, 256, 8),
    "mixtral": (4096, 8, 2),
}
SKEWS = {"uniform": 0.0, "mild": 0.6, "heavy": 1.5}  # Zipf exponent of the router bias over the experts
DECODE = [1, 8, 32, 128, 256]
PREFILL = [4096, 8192, 16384]
METHODS = ["qr_graph", "qr_graph:fp8", "qr_graph:int4", "qr_host", "nccl"]
FIELDS = ["part", "model", "hidden", "experts", "topk", "world_size", "tokens", "skew", "method", "codec",
          "us", "rows_sent_per_rank", "dispatch_mb_per_rank", "capacity_rows", "rel_err", "expert", "device",
          "bytes", "dynamic_us", "host_sized_us", "ratio", "note"]


@dataclass
class Config:
    part: list = field(default_factory=lambda: ["layer", "a2a"])
    models: list = field(default_factory=lambda: list(MODELS))
    tokens: list = field(default_factory=lambda: DECODE + PREFILL)
    skews: list = field(default_factory=lambda: list(SKEWS))
    methods: list = field(default_factory=lambda: list(METHODS))
    iters: int = 20
    warmup: int = 3
    variants: int = 4  # router noises the graph cycles through (different counts every replay)
    a2a_sizes: list = field(default_factory=lambda: [8 << 10 << (2 * i) for i in range(8)] + [256 << 20])
    csv: str = ""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quickreduce bench moe", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=int, default=None, help="ranks (default: every visible GPU)")
    p.add_argument("--part", default="layer,a2a", help="layer, a2a or both (default)")
    p.add_argument("--model", default=",".join(MODELS), help=f"of {', '.join(MODELS)}")
    p.add_argument("--tokens", default=",".join(map(str, DECODE + PREFILL)), help="tokens a rank, comma-separated")
    p.add_argument("--skew", default=",".join(SKEWS), help=f"of {', '.join(SKEWS)}")
    p.add_argument("--methods", default=",".join(METHODS), help="qr_graph[:codec], qr_host, nccl")
    p.add_argument("--iters", type=int, default=20, help="timed layers (or calls) a point")
    p.add_argument("--a2a-sizes", default="", help="bytes a rank for --part a2a, comma-separated (K/M suffixes); "
                   "default 8K..256M by 4x")
    p.add_argument("--csv", default="moe.csv", help="output CSV")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds before every rank is stopped")
    p.add_argument("--shared-gpu", action="store_true", help="every rank on GPU 0 (checks the flow, not speed)")
    from .launch import add_multicast_option
    add_multicast_option(p)
    return p


def _size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * mult)


def config_from(args) -> Config:
    c = Config(part=[s for s in args.part.split(",") if s], models=[s for s in args.model.split(",") if s],
               tokens=[int(t) for t in args.tokens.split(",") if t], skews=[s for s in args.skew.split(",") if s],
               methods=[m for m in args.methods.split(",") if m], iters=args.iters, csv=args.csv)
    if args.a2a_sizes:
        c.a2a_sizes = [_size(s) for s in args.a2a_sizes.split(",") if s]
    for m in c.models:
        if m not in MODELS:
            raise ValueError(f"unknown model {m!r}; choose from {', '.join(MODELS)}")
    for s in c.skews:
        if s not in SKEWS:
            raise ValueError(f"unknown skew {s!r}; choose from {', '.join(SKEWS)}")
    for m in c.methods:
        if m.split(":")[0] not in ("qr_graph", "qr_host", "nccl"):
            raise ValueError(f"unknown method {m!r}; choose from qr_graph[:codec], qr_host, nccl")
    for p in c.part:
        if p not in ("layer", "a2a"):
            raise ValueError(f"unknown part {p!r}; choose from layer, a2a")
    return c


# ---------------------------------------------------------------- the stand-in expert
def _triton_expert():
    """A kernel doubling the rows [0, sum(counts)) of x into y: it reads the count on the device and
    skips the rows past it (None when triton is missing: then every capacity row is doubled)."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def expert_kernel(x_ptr, y_ptr, counts_ptr, hidden, W: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs_w = tl.arange(0, WP)
        total = tl.sum(tl.load(counts_ptr + offs_w, mask=offs_w < W, other=0).to(tl.int64), axis=0)
        if row < total:
            base = row.to(tl.int64) * hidden
            for start in range(0, hidden, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                m = offs < hidden
                v = tl.load(x_ptr + base + offs, mask=m)
                tl.store(y_ptr + base + offs, v * 2, mask=m)

    def run(x, y, counts):
        W = counts.numel()
        if x.shape[0] == 0:
            return y
        expert_kernel[(x.shape[0],)](x, y, counts, x.shape[1], W=W, WP=triton.next_power_of_2(W), BLOCK=1024)
        return y

    return run


# ---------------------------------------------------------------- the layer
class Layer:
    """One rank's MoE layer state: inputs, router, buffers, and each method's forward."""

    def __init__(self, rank: int, world_size: int, model: str, tokens: int, skew: str, variants: int, seed: int = 0,
                 device=None, shape=None):
        import torch
        self.torch = torch
        self.comm, self.W, self.rank = None, world_size, rank
        self.H, self.E, self.k = shape or MODELS[model]
        self.T = tokens
        dev = device if device is not None else torch.device("cuda", torch.cuda.current_device())
        g = torch.Generator(device=dev).manual_seed(seed + 7919 * self.rank)
        self.x = torch.randn(self.T, self.H, generator=g, device=dev).to(torch.bfloat16)
        gg = torch.Generator(device=dev).manual_seed(seed + 1)  # the same gate on every rank
        self.gate = torch.randn(self.H, self.E, generator=gg, device=dev) / math.sqrt(self.H)
        self.bias = -SKEWS[skew] * torch.log1p(torch.arange(self.E, device=dev, dtype=torch.float32))
        self.noise = torch.randn(variants, self.T, self.E, generator=g, device=dev)
        self.variants = variants
        self.step = torch.zeros((), dtype=torch.int64, device=dev)
        self.expert_kernel = _triton_expert() if dev.type == "cuda" else None

    def route(self):
        torch = self.torch
        noise = self.noise.index_select(0, torch.remainder(self.step, self.variants).view(1)).squeeze(0)
        self.step.add_(1)
        logits = self.x.float() @ self.gate + self.bias + noise
        weights, ids = torch.topk(torch.softmax(logits, -1), self.k, dim=-1)
        return weights, ids

    def sizes(self):
        """(capacity: the most rows any rank receives over the variants, rows a rank sends on average)."""
        torch = self.torch
        from .. import moe
        import torch.distributed as dist
        most, sent = 0, 0
        self.step.zero_()
        for _ in range(self.variants):
            _, ids = self.route()
            _, send, _ = moe.dispatch_layout(ids, self.E, self.W, torch.int64)
            everyone = [None] * self.W
            dist.all_gather_object(everyone, send.tolist())  # setup only: the timed layers never do this
            most = max(most, max(sum(everyone[s][d] for s in range(self.W)) for d in range(self.W)))
            sent += sum(everyone[self.rank])
        self.step.zero_()
        return max(most, 1), sent / self.variants

    def allocate(self, capacity: int):
        torch = self.torch
        self.capacity = capacity
        rows = self.T * self.k
        self.recv = torch.zeros(capacity, self.H, dtype=torch.bfloat16, device=self.x.device)
        self.y = torch.zeros_like(self.recv)
        self.recv_counts = torch.zeros(self.W, dtype=torch.int32, device=self.x.device)
        self.back = torch.zeros(rows, self.H, dtype=torch.bfloat16, device=self.x.device)
        self.back_counts = torch.zeros_like(self.recv_counts)
        self.unsorted = torch.zeros_like(self.back)

    def expert(self, x, y, counts):
        if self.expert_kernel is not None:
            return self.expert_kernel(x, y, counts)
        return self.torch.mul(x, 2, out=y)

    def finish(self, back, order, weights):
        self.unsorted.index_copy_(0, order, back)
        return (self.unsorted.view(self.T, self.k, self.H).float() * weights.unsqueeze(-1)).sum(1).to(self.torch.bfloat16)

    def forward_dynamic(self, codec: str):
        from .. import moe
        weights, ids = self.route()
        order, send, _ = moe.dispatch_layout(ids, self.E, self.W, self.torch.int32)
        rows = self.x.index_select(0, self.torch.div(order, self.k, rounding_mode="floor"))
        self.comm.all_to_all_dynamic(rows, send, self.recv, self.recv_counts, codec=codec)
        self.expert(self.recv, self.y, self.recv_counts)
        self.comm.all_to_all_dynamic(self.y, self.recv_counts, self.back, self.back_counts, codec="bf16")
        return self.finish(self.back, order, weights)

    def forward_host(self, nccl: bool):
        torch = self.torch
        import torch.distributed as dist
        from .. import moe
        weights, ids = self.route()
        order, send, _ = moe.dispatch_layout(ids, self.E, self.W, torch.int64)
        rows = self.x.index_select(0, torch.div(order, self.k, rounding_mode="floor"))
        if nccl:
            recv_counts = torch.empty_like(send)
            dist.all_to_all_single(recv_counts, send)
        else:  # an exact quickreduce all-to-all of the counts (fp32 holds them exactly)
            recv_counts = self.comm.all_to_all(send.float()).to(torch.int64)
        s_list, r_list = send.tolist(), recv_counts.tolist()  # the host synchronization
        recv = torch.empty(sum(r_list), self.H, dtype=torch.bfloat16, device=rows.device)
        if nccl:
            dist.all_to_all_single(recv, rows, r_list, s_list)
        else:
            self.comm.all_to_all(rows, out=recv, codec="bf16", output_split_sizes=r_list, input_split_sizes=s_list)
        y = torch.empty_like(recv)
        self.expert(recv, y, recv_counts)
        back = torch.empty_like(rows)
        if nccl:
            dist.all_to_all_single(back, y, s_list, r_list)
        else:
            self.comm.all_to_all(y, out=back, codec="bf16", output_split_sizes=s_list, input_split_sizes=r_list)
        return self.finish(back, order, weights)


def _time(fn, samples: int, warmup: int) -> float:
    """This rank's median microseconds of fn() over `samples` calls (`_time_alternating` of one)."""
    return _time_alternating([fn], samples, warmup)[0]


def _time_alternating(fns, samples: int, warmup: int) -> list:
    """This rank's median microseconds of each of fns over `samples` calls, each after a barrier and
    between CUDA events, after `warmup` untimed calls (the project's timing rule: harness._time_graph).
    The fns take turns sample by sample, so a slow stretch of the machine falls on all of them, not on
    one (their ratio is what the a2a part reports). The GPU sleeps before the start event, so the host
    has enqueued the call (a graph's launch) when it starts. A host-synced fn's events span its idle
    gaps too, as a wall clock would."""
    import statistics
    import torch
    import torch.distributed as dist
    from .harness import SLEEP_CYCLES
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    for _ in range(samples):
        for fn, fn_times in zip(fns, times):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            dist.barrier()
            torch.cuda.synchronize()
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(SLEEP_CYCLES)
            start.record()
            fn()
            end.record()
            end.synchronize()
            fn_times.append(start.elapsed_time(end) * 1e3)
    return [statistics.median(t) for t in times]


def _slowest(us: float) -> float:
    """The slowest rank's time (a layer is as fast as its slowest rank)."""
    import torch
    import torch.distributed as dist
    t = torch.tensor([us], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def run_layer(rank: int, world_size: int, cfg: Config, model: str, tokens: int, skew: str,
              device: str) -> list[dict]:
    """One point: a communicator sized to it (its capacity: the most rows a rank receives in the run's
    routings), every method, then everything freed."""
    import torch
    import quickreduce as qr
    layer = Layer(rank, world_size, model, tokens, skew, cfg.variants)
    capacity, sent = layer.sizes()
    H, E, k = MODELS[model]
    comm = layer.comm = qr.Communicator(max_size=(max(capacity, tokens * k) * H * 2 + 15) // 16 * 16)
    layer.allocate(capacity)
    base = {"part": "layer", "model": model, "hidden": H, "experts": E, "topk": k, "world_size": comm.world_size,
            "tokens": tokens, "skew": skew, "rows_sent_per_rank": round(sent, 1),
            "dispatch_mb_per_rank": round(sent * H * 2 / 1e6, 3), "capacity_rows": capacity,
            "expert": "triton (count-aware)" if layer.expert_kernel is not None else "torch (all capacity rows)",
            "device": device}
    rows = []
    # the exact layer's output at step 0, the reference of every codec's error
    layer.step.zero_()
    exact = layer.forward_dynamic("bf16").float()
    ref_norm = float(exact.norm()) or 1.0
    for method in cfg.methods:
        name, _, codec = method.partition(":")
        codec = codec or "bf16"
        row = dict(base, method=method, codec=codec if name == "qr_graph" else "bf16")
        try:
            if name == "qr_graph":
                layer.step.zero_()
                err = float((layer.forward_dynamic(codec).float() - exact).norm()) / ref_norm
                out_holder = []
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    layer.forward_dynamic(codec)
                torch.cuda.current_stream().wait_stream(s)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out_holder.append(layer.forward_dynamic(codec))
                us = _time(g.replay, cfg.iters, cfg.warmup)
                comm.check()
                del g
            else:
                layer.step.zero_()
                got = layer.forward_host(nccl=name == "nccl").float()
                err = float((got - exact).norm()) / ref_norm
                us = _time(lambda: layer.forward_host(nccl=name == "nccl"), cfg.iters, cfg.warmup)
            row.update(us=round(_slowest(us), 2), rel_err=f"{err:.3e}")
        except Exception as e:  # noqa: BLE001  (a method that fails on every rank: noted, the run goes on)
            row.update(us="", note=f"{type(e).__name__}: {str(e)[:200]}")
        rows.append(row)
    comm.close()
    del layer
    torch.cuda.empty_cache()
    return rows


def run_a2a(comm, cfg: Config, device: str) -> list[dict]:
    """all_to_all_dynamic against the host-sized all_to_all at the same (even, then skewed) counts,
    each captured in a CUDA graph of 20 calls, the two timed in turns."""
    import torch
    W = comm.world_size
    row_values = 1024  # 2 KB bf16 rows
    rows_out = []
    for nbytes in cfg.a2a_sizes:
        rows = max(W, nbytes // (row_values * 2))
        for shape in ("even", "skewed"):
            if shape == "even":
                counts = [rows // W] * W
                counts[-1] += rows - sum(counts)
            else:  # 60% to the next rank, the rest spread
                counts = [0] * W
                counts[(comm.rank + 1) % W] = rows * 6 // 10
                rest = rows - counts[(comm.rank + 1) % W]
                for d in range(W):
                    counts[d] += rest // W
                counts[comm.rank] += rows - sum(counts)
            everyone = [None] * W
            torch.distributed.all_gather_object(everyone, counts)
            recv_list = [everyone[s][comm.rank] for s in range(W)]
            capacity = max(sum(everyone[s][d] for s in range(W)) for d in range(W))
            x = torch.randn(rows, row_values, device="cuda").to(torch.bfloat16)
            out_d = torch.empty(capacity, row_values, dtype=torch.bfloat16, device="cuda")
            out_h = torch.empty(sum(recv_list), row_values, dtype=torch.bfloat16, device="cuda")
            send = torch.tensor(counts, dtype=torch.int32, device="cuda")
            recv = torch.empty(W, dtype=torch.int32, device="cuda")
            calls = 20  # a graph's worth: a call of 8 KB is ~15 us, so a sample is 0.3 ms

            def dyn():
                comm.all_to_all_dynamic(x, send, out_d, recv)

            def host():
                comm.all_to_all(x, out=out_h, codec="bf16", output_split_sizes=recv_list, input_split_sizes=counts)

            try:
                graphs = []
                for fn in (dyn, host):
                    fn()
                    torch.cuda.synchronize()
                    graphs.append(torch.cuda.CUDAGraph())
                    with torch.cuda.graph(graphs[-1]):
                        for _ in range(calls):
                            fn()
                # Dynamic and host-sized take turns, so their ratio does not see the machine's drift.
                dyn_us, host_us = _time_alternating([g.replay for g in graphs], cfg.iters, 2)
                times = {"dynamic": _slowest(dyn_us / calls), "host": _slowest(host_us / calls)}
                del graphs
                comm.check()
                n = sum(recv_list)
                same = torch.equal(out_d[:n].view(torch.int16), out_h.view(torch.int16))
                rows_out.append({"part": "a2a", "world_size": W, "bytes": rows * row_values * 2, "skew": shape,
                                 "dynamic_us": round(times["dynamic"], 2), "host_sized_us": round(times["host"], 2),
                                 "ratio": round(times["dynamic"] / times["host"], 3), "device": device,
                                 "note": "" if same else "outputs differ"})
            except Exception as e:  # noqa: BLE001
                rows_out.append({"part": "a2a", "world_size": W, "bytes": rows * row_values * 2, "skew": shape,
                                 "device": device, "note": f"{type(e).__name__}: {str(e)[:200]}"})
            del x, out_d, out_h
    return rows_out


def worker(rank: int, world_size: int, cfg: Config) -> list[dict]:
    import torch
    import quickreduce as qr
    device = torch.cuda.get_device_name()
    rows: list[dict] = []
    if "a2a" in cfg.part:
        comm = qr.Communicator(max_size=(2 * max(cfg.a2a_sizes) + (1 << 20)) // 16 * 16)
        try:
            rows += run_a2a(comm, cfg, device)
        finally:
            comm.close()
        if rank == 0:
            for r in rows:
                print(f"a2a {r['bytes']:>10d} B {r['skew']:6s} dynamic {r.get('dynamic_us', '')} us, host-sized "
                      f"{r.get('host_sized_us', '')} us {r.get('note', '')}", file=sys.stderr, flush=True)
    if "layer" in cfg.part:
        for model in cfg.models:
            for tokens in cfg.tokens:
                for skew in cfg.skews:
                    got = run_layer(rank, world_size, cfg, model, tokens, skew, device)
                    rows += got
                    if rank == 0:
                        for r in got:
                            print(f"{model:12s} T={tokens:6d} {skew:8s} {r['method']:16s} "
                                  f"{r.get('us', '')!s:>10s} us  err {r.get('rel_err', '')}  {r.get('note', '')}",
                                  file=sys.stderr, flush=True)
                    if rank == 0 and cfg.csv:
                        write_csv(cfg.csv + ".partial", rows)
    return rows


def write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in FIELDS})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from(args)
    except ValueError as exc:
        print(f"quickreduce bench moe: {exc}", file=sys.stderr)
        return 2
    from . import launch
    import torch
    gpus = args.gpus or (2 if args.shared_gpu else torch.cuda.device_count())
    if gpus < 2:
        print("quickreduce bench moe: needs 2 or more GPUs (or --shared-gpu)", file=sys.stderr)
        return 2
    launch.apply_multicast_option(args)
    try:
        rows = launch.spawn(worker, gpus, cfg, timeout_s=args.timeout, shared_gpu=args.shared_gpu)
    except RuntimeError as exc:
        print(f"quickreduce bench moe: {exc}", file=sys.stderr)
        return 1
    if rows is None:
        return 0
    write_csv(cfg.csv, rows)
    if os.path.exists(cfg.csv + ".partial"):
        os.remove(cfg.csv + ".partial")
    print(f"quickreduce bench moe: {len(rows)} rows in {cfg.csv}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
