"""The per-rank body of `quickreduce bench` and `quickreduce tune`: for each size and method,
one eager call checked against a float64 reference, then K calls captured in one CUDA graph and
timed over several replays.

Timing, per (size, method):
- K calls (50 below 1 MiB, 20 up to 64 MiB, 5 above) captured in one torch.cuda.CUDAGraph;
  2 warm-up replays, then 7 replays each bracketed by CUDA events; per-call time = median
  replay time / K; the reported time is the slowest rank's.
- The calls rotate over B distinct input (and output) buffers, enough that one replay touches
  several times the L2 cache. In-place methods (NCCL, symm two-shot) get B = K and fresh random
  inputs before each replay, outside the events: repeated in-place sums would otherwise grow
  every replay until they saturate to inf, and uniform data can move faster than real data.
- Every replay starts after a barrier (CUDA sync + dist.barrier), as the baselines were taken:
  replays run back to back read NCCL ~5 us/call slower at small sizes (measured 2x H200,
  2026-11-22: 8 KB 16.1 vs 10.9 us; symm_mem unaffected). A short GPU sleep after the barrier
  lets the host enqueue refill, events and replay before the GPU reaches them, so no host
  launch gap lands inside the event pair.
- Then a one-element NCCL all-reduce, before the start event, lines the ranks' GPUs up: the
  host barrier releases the ranks microseconds apart, and the first rank's first call would
  wait that long for its peers inside the timed replay, adding skew/K to every method's time
  at random (`align_start`).

Correctness, per (size, method): relative L2 error of one eager call against a float64
reference built from every rank's input (all-gathered; inputs are drawn from a seed per rank and
size), and whether every rank holds bitwise the same result. Per collective:
- all-reduce: the reference is the float64 sum; `identical` compares every rank's result.
- reduce-scatter: the reference is block `rank` of that sum; each rank holds a different block,
  so `identical` is None ("n/a").
- all-gather: the reference is the concatenation of the inputs (exact rows give rel_err 0);
  every rank must hold identical bits, lossy codecs included (their contract).
- all-to-all: the reference is block `rank` of every rank's input, in rank order (exact rows give
  rel_err 0); the blocks differ per rank, so `identical` is None ("n/a").
- the all-reduce + add + RMSNorm epilogue (bench --epilogue): the reference is epilogue.reference
  of the float64 sum (residual and weight the same on every rank); both columns are about the
  normed output.

Shared GPU (bench --shared-gpu): every rank on GPU 0 over gloo. The ranks' kernels take turns
on the GPU, so the timings mean nothing; methods that need a GPU each (NCCL, torch symm_mem,
FlashInfer) are not run; the correctness checks run as usual.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed as dist

from . import epilogue
from .methods import Method, RunContext, SkipMethod, close_shared, collective_numels, collective_skip_reason
from .peers import close_shared_peers
from .registry import make_method
from .report import EPILOGUE, REPLICATED_COLLECTIVES, complete_rows, human_size, write_csv

L2_MULTIPLE = 4  # data touched per replay, in L2 sizes
DEFAULT_L2_BYTES = 60 << 20
SLEEP_CYCLES = 200_000  # ~0.1 ms at H200 clocks: room for the host to enqueue one replay
CHECK_CHUNK = 16 << 20  # elements per chunk of the float64 error and equality checks
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
SHARED_GPU_SKIP = "shared GPU: needs a GPU per rank (the ranks share GPU 0 over gloo)"
# torch 2.13 renamed the flat all-gather (the old name warns); the signature is the same.
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


@dataclass
class SweepConfig:
    # All-reduce methods, or {collective: its methods} (bench --collective; report.EPILOGUE for
    # bench --epilogue).
    methods: list[str] | dict[str, list[str]]
    sizes: list[int]
    dtypes: list[str]
    iters: tuple[int, int, int] = (50, 20, 5)  # calls per graph: < 1 MiB, <= 64 MiB, larger
    warmup: int = 2
    replays: int = 7
    qr_max_bytes: int | None = None  # default: the largest size
    peer_max_bytes: int = 64 << 20
    pool_budget_bytes: int = 6 << 30  # cap on one method's rotating input (or output) buffers
    partial_csv: str | None = None  # rank 0 rewrites this after every size (survives a kill)
    warm_up_first_size: bool = True  # run the first size once untimed before the sweep
    align_start: bool = True  # line the GPUs up with a tiny all-reduce before each timed replay
    verbose: bool = True
    shared_gpu: bool = False  # every rank on GPU 0 over gloo: results checked, timings meaningless
    hidden: int = 4096  # the epilogue's row length: its tensors are [size / row bytes, hidden]
    # A one-element kernel between every two calls, as a model has compute between its collectives
    # (NCCL back to back costs it 4-7 us a call below 1 MB; 2x H200); the time of
    # that kernel alone, in a graph of the same length timed just before, is subtracted.
    gap: bool = False

    def plan(self) -> dict[str, list[str]]:
        """{collective: method names}, in the order given."""
        if isinstance(self.methods, dict):
            return {c: list(m) for c, m in self.methods.items()}
        return {"all_reduce": list(self.methods)}


@dataclass
class SweepState:
    device_name: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: dict[tuple[str, str], list[int]] = field(default_factory=dict)


def calls_per_graph(nbytes: int, iters: tuple[int, int, int]) -> int:
    small, medium, large = iters
    return small if nbytes < (1 << 20) else medium if nbytes <= (64 << 20) else large


def graph_plan(nbytes: int, inplace: bool, iters: tuple[int, int, int], l2_bytes: int,
               budget_bytes: int) -> tuple[int, int]:
    """(calls per graph K, distinct buffers B) for one method at one size."""
    fit = max(1, budget_bytes // nbytes)
    calls = calls_per_graph(nbytes, iters)
    if inplace:
        calls = min(calls, fit)  # one buffer per call keeps in-place growth to one step
        return calls, calls
    return calls, min(calls, fit, max(1, math.ceil(L2_MULTIPLE * l2_bytes / nbytes)))


def local_device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


def run_sweep(rank: int, world_size: int, config: SweepConfig) -> dict[str, Any] | None:
    """Launched on every rank (see launch.spawn); rank 0 returns the results."""
    device = local_device()
    props = torch.cuda.get_device_properties(device)
    l2_bytes = getattr(props, "L2_cache_size", 0) or DEFAULT_L2_BYTES
    state = SweepState(device_name=props.name)
    plan = config.plan()
    steps = sum(len(names) for names in plan.values())
    progress = Progress(len(config.dtypes) * len(config.sizes) * steps,
                        enabled=rank == 0 and config.verbose)
    for dtype_name in config.dtypes:
        dtype = DTYPES[dtype_name]
        element = torch.tensor([], dtype=dtype).element_size()
        ctx = RunContext(
            rank=rank, world_size=world_size, device=device, group=dist.group.WORLD,
            dtype=dtype, dtype_name=dtype_name, max_bytes=max(config.sizes),
            qr_max_bytes=config.qr_max_bytes or max(config.sizes),
            peer_max_bytes=config.peer_max_bytes,
            symm_pool_elems=max(graph_plan(s, True, config.iters, l2_bytes,
                                           config.pool_budget_bytes)[1] * s // element
                                for s in config.sizes),
            shared_gpu=config.shared_gpu, hidden=config.hidden)
        methods = {collective: _set_up(ctx, names, state, collective)
                   for collective, names in plan.items()}
        # One untimed pass over the first size: its row used to be timed while the GPUs and the
        # host were still settling (the same one-shot kernel read 2.66, 2.48 and 2.28 us at 8 KB
        # as three methods of one row). Same for every method.
        if config.warm_up_first_size and config.sizes:
            for collective, mine in methods.items():
                _sweep_size(ctx, list(mine), config.sizes[0], config, l2_bytes, SweepState(),
                            Progress(0, enabled=False), collective, len(plan[collective]))
        for size in config.sizes:
            for collective, mine in methods.items():
                _sweep_size(ctx, mine, size, config, l2_bytes, state, progress, collective,
                            len(plan[collective]))
            if rank == 0 and config.partial_csv:
                write_csv(complete_rows(state.rows, world_size), config.partial_csv)
        _close(ctx, [m for mine in methods.values() for m in mine], state)
    progress.close()
    if rank != 0:
        return None
    for (method, reason), sizes in state.skipped.items():
        state.notes.append(f"{method}: skipped at {_size_list(sizes)}: {reason}")
    return {"rows": state.rows, "notes": state.notes, "device": state.device_name,
            "world_size": world_size, "dtypes": config.dtypes, "shared_gpu": config.shared_gpu}


def _label(name: str, collective: str) -> str:
    """How notes name a method: as before for all-reduce, 'reduce_scatter/nccl' for the others."""
    return name if collective == "all_reduce" else f"{collective}/{name}"


def _set_up(ctx: RunContext, names: list[str], state: SweepState,
            collective: str = "all_reduce") -> list[Method]:
    methods = []
    for name in names:
        method = make_method(name, collective)
        if ctx.shared_gpu and not method.shared_gpu_ok:
            state.notes.append(f"{_label(name, collective)}: not run ({ctx.dtype_name}): "
                               f"{SHARED_GPU_SKIP}")
            continue
        error = agreed(ctx, lambda: method.setup(ctx))
        if error is None:
            methods.append(method)
        else:
            state.notes.append(f"{_label(name, collective)}: not run ({ctx.dtype_name}): {error}")
            agreed(ctx, method.close)  # release whatever a half-done setup holds
        barrier(ctx)
    return methods


def _close(ctx: RunContext, methods: list[Method], state: SweepState) -> None:
    for method in methods:
        error = agreed(ctx, method.close)
        if error:
            state.notes.append(f"{_label(method.name, method.collective)}: close failed: {error}")
    for closer in (close_shared_peers, close_shared):
        error = agreed(ctx, lambda: closer(ctx))
        if error:
            state.notes.append(f"closing shared resources failed: {error}")
    barrier(ctx)


def _sweep_size(ctx: RunContext, methods: list[Method], size: int, config: SweepConfig,
                l2_bytes: int, state: SweepState, progress: "Progress",
                collective: str = "all_reduce", planned: int | None = None) -> None:
    title = "" if collective == "all_reduce" else f" {collective}"
    progress.advance((len(config.methods) if planned is None else planned) - len(methods))
    progress.show(f"{ctx.dtype_name} {human_size(size):>5}{title}", log=True)
    element = torch.tensor([], dtype=ctx.dtype).element_size()
    reason = collective_skip_reason(collective, size, ctx.world_size, element, ctx.hidden)
    if reason:
        for method in methods:
            progress.advance(1)
            state.skipped.setdefault((_label(method.name, collective), reason), []).append(size)
        return
    in_numel, _ = collective_numels(collective, size, element, ctx.world_size)
    check_input = _random(in_numel, ctx, seed=_seed(ctx.rank, size, 0))
    reference = _reference(collective, check_input, ctx)
    for method in list(methods):
        progress.show(f"{ctx.dtype_name} {human_size(size):>5}{title} {method.name}")
        progress.advance(1)
        reason = method.skip_reason(size)
        if reason:
            state.skipped.setdefault((_label(method.name, collective), reason), []).append(size)
            continue
        measured: dict[str, Any] = {}
        error = agreed(ctx, lambda: measured.update(
            _measure(ctx, method, size, check_input, reference, config, l2_bytes)))
        if error is None:
            state.rows.append({"size": size, "method": method.name, "lossy": method.lossy,
                               "dtype": ctx.dtype_name, "device": state.device_name,
                               "collective": collective, **measured})
        else:
            methods.remove(method)  # a method that failed once is not trusted with larger sizes
            state.notes.append(f"{_label(method.name, collective)}: failed at {human_size(size)} "
                               f"({ctx.dtype_name}), dropped for the rest of the run: {error}")
        barrier(ctx)


def _measure(ctx: RunContext, method: Method, size: int, check_input: torch.Tensor,
             reference: torch.Tensor, config: SweepConfig, l2_bytes: int) -> dict[str, Any]:
    in_numel, out_numel = collective_numels(method.collective, size, check_input.element_size(),
                                            ctx.world_size)
    calls, buffers = graph_plan(size, method.inplace, config.iters, l2_bytes,
                                config.pool_budget_bytes)
    inputs = method.alloc_inputs(buffers, in_numel)
    outputs = None if method.inplace else method.alloc_outputs(buffers, out_numel)

    def output(i: int) -> torch.Tensor | None:
        return None if outputs is None else outputs[i % buffers]

    # --gap: the kernel's time alone, first, while every rank is sure to get here (it runs collectives)
    gap = _gap_kernel(ctx) if config.gap else None
    gap_us = _gap_alone_us(ctx, gap, calls, config) if gap is not None else 0.0

    # Correctness: one eager call on the known input.
    inputs[0].copy_(check_input)
    result = method.run(inputs[0], output(0))
    torch.cuda.synchronize()
    method.raise_async_errors()
    rel_err = _relative_error(result, reference, ctx)
    identical = (_identical_on_all_ranks(result, ctx)
                 if method.collective in REPLICATED_COLLECTIVES else None)

    # Timing: K calls in one graph over B buffers of fresh random data.
    generator = torch.Generator(device=ctx.device).manual_seed(_seed(ctx.rank, size, 1))

    def refill() -> None:
        inputs.normal_(generator=generator)

    refill()
    barrier(ctx)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for i in range(calls):
            method.run(inputs[i % buffers], output(i))
            if gap is not None:
                gap()
    method.after_capture()
    per_call_us = _time_graph(ctx, graph, calls, config.warmup, config.replays,
                              refill if method.inplace else None,
                              config.align_start and not ctx.shared_gpu)
    method.raise_async_errors()
    del graph
    if gap is not None:  # the same on every rank (both times are the slowest rank's), so raising is too
        if per_call_us <= gap_us:
            raise RuntimeError(f"--gap: a call took {per_call_us:.2f} us with the gap kernel, which alone "
                               f"took {gap_us:.2f}: nothing left to report")
        per_call_us -= gap_us
    return {"time_us": per_call_us, "rel_err": rel_err, "identical": identical,
            "calls": calls, "buffers": buffers}


def _gap_kernel(ctx: RunContext) -> Callable[[], None]:
    """bench --gap: the kernel put between two calls (a one-element add)."""
    if "gap_flag" not in ctx.shared:
        ctx.shared["gap_flag"] = torch.zeros(1, device=ctx.device)
    flag = ctx.shared["gap_flag"]
    return lambda: flag.add_(1)


def _gap_alone_us(ctx: RunContext, gap: Callable[[], None], calls: int, config: SweepConfig) -> float:
    """Per-call time of the gap kernel alone, in a graph of `calls` of them (timed each time: it is
    cheap, and a cached value would carry the warm-up pass's unsettled clocks)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for _ in range(calls):
            gap()
    gap_us = _time_graph(ctx, graph, calls, config.warmup, config.replays, None,
                         config.align_start and not ctx.shared_gpu)
    del graph
    return gap_us


def _time_graph(ctx: RunContext, graph, calls: int, warmup: int, replays: int,
                refill: Callable[[], None] | None, align_start: bool) -> float:
    """Microseconds per call: median replay time / calls, slowest rank."""
    times_ms = []
    token = torch.zeros(1, device=ctx.device)
    for _ in range(warmup + replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if refill is not None:
            refill()
        barrier(ctx)
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(SLEEP_CYCLES)
        if align_start:
            dist.all_reduce(token, group=ctx.group)  # the current stream waits for it
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times_ms.append(start.elapsed_time(end))
    times_ms = times_ms[warmup:]
    local = torch.tensor([statistics.median(times_ms) * 1e3 / calls], device=ctx.device)
    dist.all_reduce(local, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(local.item())


# --------------------------------------------------------------------------- correctness

def _seed(rank: int, size: int, purpose: int) -> int:
    return (rank * 1_000_003 + size * 31 + purpose) % (2**62)


def _random(numel: int, ctx: RunContext, seed: int) -> torch.Tensor:
    generator = torch.Generator(device=ctx.device).manual_seed(seed)
    return torch.randn(numel, generator=generator, dtype=ctx.dtype, device=ctx.device)


def _reference(collective: str, local: torch.Tensor, ctx: RunContext) -> torch.Tensor:
    """What this rank's output must be, from every rank's `local` input: float64 for the sums,
    the inputs' own dtype for the data movers (exact copies; _relative_error upcasts)."""
    if collective == "all_reduce":
        return _float64_sum(local, ctx)
    if collective == EPILOGUE:
        residual, weight = epilogue.operands(ctx, local.numel())
        return epilogue.reference(_float64_sum(local, ctx), residual, weight)
    if collective == "reduce_scatter":
        block = local.numel() // ctx.world_size
        return _float64_sum(local, ctx)[ctx.rank * block:(ctx.rank + 1) * block].clone()
    if collective == "all_gather":
        return _gather(local, ctx).reshape(-1)
    if collective == "all_to_all":
        # Rank s's block `rank`, for every s: one all-gather per block, each rank keeping its own,
        # so no rank holds more than one output's worth of the others' data at a time.
        block = local.numel() // ctx.world_size
        reference = None
        for owner in range(ctx.world_size):
            gathered = _gather(local[owner * block:(owner + 1) * block].contiguous(), ctx)
            if owner == ctx.rank:
                reference = gathered.reshape(-1)
        return reference
    raise ValueError(f"unknown collective {collective!r}")


def _gather(local: torch.Tensor, ctx: RunContext) -> torch.Tensor:
    """[world_size, numel]: every rank's `local`, in rank order."""
    gathered = torch.empty(ctx.world_size * local.numel(), dtype=local.dtype, device=ctx.device)
    _ALL_GATHER(gathered, local, group=ctx.group)  # the flat form: every backend
    return gathered.view(ctx.world_size, local.numel())


def _float64_sum(local: torch.Tensor, ctx: RunContext) -> torch.Tensor:
    """The exact all-reduce of everyone's `local`, in float64."""
    gathered = _gather(local, ctx)
    reference = torch.empty(local.numel(), dtype=torch.float64, device=ctx.device)
    for begin in range(0, local.numel(), CHECK_CHUNK):
        end = begin + CHECK_CHUNK
        reference[begin:end] = gathered[:, begin:end].double().sum(dim=0)
    return reference


def _relative_error(result: torch.Tensor, reference: torch.Tensor, ctx: RunContext) -> float:
    """||result - reference|| / ||reference|| (float64), the worst rank's."""
    flat = result.reshape(-1)
    sums = torch.zeros(2, dtype=torch.float64, device=ctx.device)
    if flat.numel() != reference.numel():
        raise RuntimeError(f"result has {flat.numel()} values; the reference {reference.numel()}")
    for begin in range(0, flat.numel(), CHECK_CHUNK):
        ref = reference[begin:begin + CHECK_CHUNK].double()
        sums[0] += (flat[begin:begin + CHECK_CHUNK].double() - ref).square().sum()
        sums[1] += ref.square().sum()
    error = (sums[0] / sums[1]).sqrt().nan_to_num(nan=float("inf")).reshape(1)
    dist.all_reduce(error, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(error.item())


def _identical_on_all_ranks(result: torch.Tensor, ctx: RunContext) -> bool:
    """Bitwise comparison with rank 0's result, chunk by chunk (no rank holds all copies)."""
    flat = result.reshape(-1)
    # 32-bit words: every backend broadcasts int32 (gloo has no int16); sizes are 16-byte multiples.
    bits = flat.view(torch.int32) if flat.numel() * flat.element_size() % 4 == 0 \
        else flat.view(torch.uint8)
    same = torch.ones(1, dtype=torch.int32, device=ctx.device)
    source = dist.get_global_rank(ctx.group, 0)
    for begin in range(0, bits.numel(), CHECK_CHUNK):
        mine = bits[begin:begin + CHECK_CHUNK]
        theirs = mine.clone()
        dist.broadcast(theirs, src=source, group=ctx.group)
        if not torch.equal(mine, theirs):
            same.zero_()
    dist.all_reduce(same, op=dist.ReduceOp.MIN, group=ctx.group)
    return bool(same.item())


# --------------------------------------------------------------------------- agreement

def agreed(ctx: RunContext, action: Callable[[], Any]) -> str | None:
    """Run `action` on every rank; None if it worked everywhere, else the first error.

    All ranks then take the same branch, so a method that fails (the same way) everywhere is
    skipped without a collective mismatch. A failure on one rank inside a collective kernel can
    still hang; launch.spawn's timeout is the last line of defence.
    """
    error = None
    try:
        action()
    except SkipMethod as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001 - reported, and the method skipped
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        error = f"{type(exc).__name__}: {first_line}"
        if torch.cuda.is_current_stream_capturing():
            raise  # a broken capture leaves the stream unusable: stop this rank
    errors: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(errors, error, group=ctx.group)
    failed = [(rank, e) for rank, e in enumerate(errors) if e is not None]
    if not failed:
        return None
    rank, message = failed[0]
    return message if len(failed) == ctx.world_size else f"rank {rank}: {message}"


def barrier(ctx: RunContext) -> None:
    torch.cuda.synchronize()
    dist.barrier(group=ctx.group)
    torch.cuda.synchronize()


def _size_list(sizes: list[int]) -> str:
    sizes = sorted(sizes)
    if len(sizes) > 2:
        return f"{human_size(sizes[0])}..{human_size(sizes[-1])} ({len(sizes)} sizes)"
    return ", ".join(human_size(s) for s in sizes)


class Progress:
    """Rank 0's progress: a rich bar on a terminal, one line per step otherwise (logs)."""

    def __init__(self, total: int, enabled: bool):
        self.enabled, self.total, self.done = enabled, total, 0
        self.started = time.monotonic()
        self.bar = None
        if not enabled or not sys.stderr.isatty():
            return
        try:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                       TextColumn, TimeElapsedColumn)
        except ImportError:
            return
        self.bar = RichProgress(TextColumn("{task.description:<32}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(),
                                console=Console(stderr=True), transient=True)
        self.bar.start()
        self.task = self.bar.add_task("starting", total=total)

    def show(self, description: str, log: bool = False) -> None:
        """Update the bar; without one (output captured), print only the `log` steps."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(self.task, description=description)
        elif log:
            print(f"[{self.done}/{self.total} done, {time.monotonic() - self.started:.0f} s] "
                  f"{description}", file=sys.stderr, flush=True)

    def advance(self, steps: int) -> None:
        self.done += steps
        if self.bar is not None and steps:
            self.bar.update(self.task, advance=steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
