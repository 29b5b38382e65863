"""The per-rank body of `quickreduce e2e` (speed): a tensor-parallel decoder with random weights,
timed with each all-reduce provider, after a check that the exact providers give the right tokens.

Per provider (and once with no communication at all, `no_comm`):
- prefill: one sequence of T tokens from position 0, logits of the last position: the time to
  first token. Captured in a CUDA graph, as engines with piecewise graphs run it: run eagerly, the
  1k-token prefill's time moved 10-15% between two runs on one machine (no_comm 5.40 and 6.19 ms,
  llama3-70b, 4 layers, 4x H100), more than the providers differ. `warmup` untimed replays, then
  the median of `iters` replays, each after a barrier and bracketed by CUDA events; the slowest
  rank's median.
- decode: one step for a batch of B sequences, each with `context` tokens already in the KV
  cache, captured once in a CUDA graph; the median over `iters` samples of `decode_steps`
  back-to-back replays (per step), slowest rank.
The all-reduce share of a step is 1 - t(no_comm) / t(provider): what removing the communication
would save (a tensor-parallel decoder overlaps none of it).

Token check (before timing): greedy generation from a fixed random prompt with the reduction done
three ways: gathered and summed exactly in float64 (the reference), gathered and summed in fp32 in
rank order (what quickreduce's lossless paths promise), and through each provider, eagerly and
replayed from a CUDA graph. quickreduce's exact providers must match the fp32 rank-order run
bit for bit, and the exact run too at W=2; at W>2 they may differ from it only if some reduced
element rounds differently in fp32 rank order than in float64 (counted, one example kept). Other
providers' agreement is reported, not judged.

Shared GPU (--shared-gpu): every rank on GPU 0 over gloo. The kernels of the ranks take turns, so
the times measure nothing; NCCL, torch symm_mem and FlashInfer need a GPU each and are not run.
"""
from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed as dist

from ..cli.harness import agreed, barrier  # the bench's: all ranks take one branch
from ..cli.methods import RunContext, close_shared
from ..cli.peers import close_shared_peers
from .config import ModelConfig, ShardPlan
from .model import (GraphedDecodeStep, GraphedPrefill, TensorParallelDecoder, greedy_generate, no_reduction,
                    random_rank_weights)
from .providers import EXACT_QR_PROVIDERS, MethodReducer, make_provider_method
from .reducers import GatheredSum, exact_sum, rank_order_fp32_sum

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
NO_COMM = "no_comm"
SHARED_GPU_BANNER = "shared GPU: every rank on one GPU, timings are not speed; tokens are checked"


@dataclass
class SpeedConfig:
    model: ModelConfig
    providers: list[str]
    prefill_tokens: list[int] = field(default_factory=lambda: [1024, 4096, 8192])
    decode_batches: list[int] = field(default_factory=lambda: [1, 16, 64, 256])
    context: int = 1024  # tokens in the KV cache at each timed decode step
    warmup: int = 2
    iters: int = 10
    decode_steps: int = 10  # graph replays per timed decode sample
    dtype: str = "bf16"
    seed: int = 0
    shared_gpu: bool = False
    check: bool = True  # the token check before timing
    check_batch: int = 2
    check_prompt: int = 16
    check_new_tokens: int = 16
    timing: bool = True
    verbose: bool = True

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        for name in ("prefill_tokens", "decode_batches"):
            values = getattr(self, name)
            if any(not isinstance(v, int) or v < 1 for v in values):
                raise ValueError(f"{name} must be positive integers, got {values}")
        for name in ("context", "iters", "decode_steps", "check_batch", "check_prompt", "check_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be at least 0, got {self.warmup}")

    def max_message_numel(self) -> int:
        """Values in the largest all-reduce any phase makes (tokens in flight x hidden)."""
        tokens = max([*self.prefill_tokens, *self.decode_batches, self.check_batch * self.check_prompt])
        return tokens * self.model.hidden


class Log:
    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.started = time.monotonic()

    def __call__(self, text: str) -> None:
        if self.enabled:
            print(f"[e2e {time.monotonic() - self.started:6.0f} s] {text}", file=sys.stderr, flush=True)


def local_device() -> torch.device:
    """This rank's GPU (launch.spawn bound it); the CPU tests put a CPU here."""
    return torch.device("cuda", torch.cuda.current_device())


def run_speed(rank: int, world_size: int, cfg: SpeedConfig) -> dict[str, Any] | None:
    """Launched on every rank (cli/launch.spawn); rank 0 returns the results."""
    device = local_device()
    dtype = DTYPES[cfg.dtype]
    log = Log(rank == 0 and cfg.verbose)
    plan = ShardPlan(cfg.model, world_size, rank)
    log(f"{cfg.model.name}, {cfg.model.layers} layers, {world_size} ranks: drawing random weights")
    model = TensorParallelDecoder(plan, random_rank_weights(plan, cfg.seed, dtype, device))
    max_numel = cfg.max_message_numel()
    max_bytes = max_numel * dtype.itemsize
    ctx = RunContext(rank=rank, world_size=world_size, device=device, group=dist.group.WORLD, dtype=dtype,
                     dtype_name=cfg.dtype, max_bytes=max_bytes, qr_max_bytes=max_bytes, peer_max_bytes=max_bytes,
                     symm_pool_elems=max_numel, shared_gpu=cfg.shared_gpu)
    notes: list[str] = []
    reducers = _set_up(ctx, cfg.providers, max_numel, notes)

    checks: list[dict[str, Any]] = []
    rounding = None
    if cfg.check:
        log("token check: exact and fp32 rank-order references, then each provider")
        checks, rounding = check_tokens(model, reducers, ctx, cfg, notes)

    rows: list[dict[str, Any]] = []
    if cfg.timing:
        for name, reducer in [(NO_COMM, no_reduction), *reducers.items()]:
            rows += _time_provider(model, name, reducer, ctx, cfg, notes, log)

    for name, reducer in reducers.items():
        error = agreed(ctx, reducer.method.close)
        if error:
            notes.append(f"{name}: close failed: {error}")
    for closer in (close_shared_peers, close_shared):
        error = agreed(ctx, lambda: closer(ctx))
        if error:
            notes.append(f"closing shared resources failed: {error}")
    barrier(ctx)
    if rank != 0:
        return None
    return {"rows": rows, "checks": checks, "rounding": rounding.as_dict() if rounding else None,
            "rounding_text": rounding.describe(cfg.dtype) if rounding else None, "notes": notes,
            "device": torch.cuda.get_device_name(device), "world_size": world_size,
            "model": dataclasses.asdict(cfg.model), "shared_gpu": cfg.shared_gpu, "context": cfg.context,
            "dtype": cfg.dtype}


def _set_up(ctx: RunContext, names: list[str], max_numel: int, notes: list[str]) -> dict[str, MethodReducer]:
    reducers: dict[str, MethodReducer] = {}
    for name in names:
        method = make_provider_method(name)
        if ctx.shared_gpu and not method.shared_gpu_ok:
            notes.append(f"{name}: not run: needs a GPU per rank (the ranks share GPU 0 over gloo)")
            continue
        made: dict[str, MethodReducer] = {}

        def build() -> None:
            method.setup(ctx)
            made["reducer"] = MethodReducer(method, max_numel)

        error = agreed(ctx, build)
        if error is None:
            reducers[name] = made["reducer"]
        else:
            notes.append(f"{name}: not run: {error}")
            agreed(ctx, method.close)
        barrier(ctx)
    return reducers


# --------------------------------------------------------------------------- token check

def check_tokens(model: TensorParallelDecoder, reducers: dict[str, MethodReducer], ctx: RunContext,
                 cfg: SpeedConfig, notes: list[str]):
    """Greedy tokens of every provider against the references; rows for rank 0's report."""
    generator = torch.Generator().manual_seed(cfg.seed + 1)  # the same prompt on every rank
    prompt = torch.randint(cfg.model.vocab, (cfg.check_batch, cfg.check_prompt), generator=generator).to(ctx.device)
    n = cfg.check_new_tokens

    exact = GatheredSum(ctx.group, exact_sum, track_rounding=True)
    model.reducer = exact
    exact_tokens = greedy_generate(model, prompt, n).cpu()
    model.reducer = GatheredSum(ctx.group, rank_order_fp32_sum)
    fp32_tokens = greedy_generate(model, prompt, n).cpu()
    rows = [judge_tokens("exact (float64)", ctx.world_size, exact_tokens, None, exact_tokens, fp32_tokens,
                         exact.rounding.differing, _same_on_all_ranks(exact_tokens, ctx))]
    for name, reducer in list(reducers.items()):
        got: dict[str, torch.Tensor] = {}

        def run() -> None:
            model.reducer = reducer
            got["eager"] = greedy_generate(model, prompt, n).cpu()
            got["graph"] = greedy_generate(model, prompt, n, graph=True,
                                           after_capture=reducer.method.after_capture).cpu()
            reducer.method.raise_async_errors()

        error = agreed(ctx, run)
        if error is not None:
            notes.append(f"{name}: token check failed to run, dropped: {error}")
            del reducers[name]
            continue
        rows.append(judge_tokens(name, ctx.world_size, got["eager"], got["graph"], exact_tokens, fp32_tokens,
                                 exact.rounding.differing, _same_on_all_ranks(got["eager"], ctx)))
    model.reducer = no_reduction
    return rows, exact.rounding


def _same_on_all_ranks(tokens: torch.Tensor, ctx: RunContext) -> bool:
    everyone: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(everyone, tokens.tolist(), group=ctx.group)
    return all(t == everyone[0] for t in everyone)


def judge_tokens(provider: str, world_size: int, tokens: torch.Tensor, graph_tokens: torch.Tensor | None,
                 exact_tokens: torch.Tensor, fp32_tokens: torch.Tensor, rounding_differences: int,
                 same_on_all_ranks: bool) -> dict[str, Any]:
    """One row of the token check. `ok` is None for providers that are reported, not judged."""
    differs = tokens != exact_tokens
    first = None
    if differs.any():
        seq, pos = (int(i) for i in differs.nonzero()[0])
        first = f"sequence {seq}, token {pos}"
    row = {"provider": provider, "tokens": tokens.numel(), "differ_from_exact": int(differs.sum()),
           "first_difference": first, "equal_fp32_order": bool(torch.equal(tokens, fp32_tokens)),
           "graph_equals_eager": None if graph_tokens is None else bool(torch.equal(tokens, graph_tokens)),
           "same_on_all_ranks": same_on_all_ranks, "ok": None, "why": ""}
    if provider == "exact (float64)":
        if world_size == 2 and rounding_differences:
            row.update(ok=False, why="W=2, yet fp32 and float64 sums rounded differently: the reference is wrong")
        else:
            row.update(ok=same_on_all_ranks, why="the reference" if same_on_all_ranks else "ranks disagree")
        return row
    if provider not in EXACT_QR_PROVIDERS:
        row["why"] = ("identical to the exact run" if first is None else
                      f"{row['differ_from_exact']} of {row['tokens']} tokens differ from the exact run "
                      "(reported: this provider's own summation order or codec)")
        return row
    if not same_on_all_ranks:
        row.update(ok=False, why="ranks generated different tokens")
    elif not row["equal_fp32_order"]:
        row.update(ok=False, why="differs from the fp32 rank-order run, which the lossless paths must equal")
    elif row["graph_equals_eager"] is False:
        row.update(ok=False, why="CUDA-graph replay generated other tokens than eager calls")
    elif first is None:
        row.update(ok=True, why="identical to the exact run")
    elif world_size == 2:
        row.update(ok=False, why="W=2 must equal the exact run (an fp32 sum of two 16-bit values is exact)")
    elif not rounding_differences:
        row.update(ok=False, why="differs from the exact run although no reduction rounded differently")
    else:
        row.update(ok=True, why=f"differs from the exact run from {first}: fp32 rank-order sums rounded "
                                f"differently from float64 ({rounding_differences:,} elements, see below)")
    return row


# --------------------------------------------------------------------------- timing

def _time_provider(model: TensorParallelDecoder, name: str, reducer, ctx: RunContext, cfg: SpeedConfig,
                   notes: list[str], log: Log) -> list[dict[str, Any]]:
    rows = []
    model.reducer = reducer
    method = getattr(reducer, "method", None)
    scenarios = [("prefill", t) for t in cfg.prefill_tokens] + [("decode", b) for b in cfg.decode_batches]
    for phase, size in scenarios:
        numel = size * cfg.model.hidden
        reason = reducer.skip_reason(numel) if isinstance(reducer, MethodReducer) else None
        if reason:
            notes.append(f"{name}: {phase} {size} skipped: {reason}")
            continue
        measured: dict[str, float] = {}

        def measure() -> None:
            if phase == "prefill":
                measured["ms"] = _time_prefill(model, size, ctx, cfg,
                                               method.after_capture if method is not None else None)
            else:
                measured["ms"] = _time_decode(model, size, ctx, cfg,
                                              method.after_capture if method is not None else None)
            if method is not None:
                method.raise_async_errors()

        error = agreed(ctx, measure)
        torch.cuda.empty_cache()
        if error is not None:
            if "out of memory" in error.lower():
                notes.append(f"{name}: {phase} {size}: out of GPU memory, skipped")
                continue
            notes.append(f"{name}: failed at {phase} {size}, dropped for the rest of the run: {error}")
            break
        log(f"{name:18} {phase} {size:>5}: {measured['ms']:.3f} ms")
        rows.append({"provider": name, "phase": phase, "size": size, "time_ms": measured["ms"],
                     "lossy": bool(getattr(method, "lossy", False))})
        barrier(ctx)
    model.reducer = no_reduction
    return rows


def _slowest(ms: float, ctx: RunContext) -> float:
    value = torch.tensor([ms], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(value.item())


def _replay_ms(replay: Callable[[], None], per_sample: int, ctx: RunContext, cfg: SpeedConfig) -> float:
    """The slowest rank's median over `iters` samples of `per_sample` back-to-back replays (ms per
    replay), each sample after a barrier and between CUDA events, after `warmup` untimed replays."""
    for _ in range(cfg.warmup):
        replay()
    times = []
    for _ in range(cfg.iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        barrier(ctx)
        start.record()
        for _ in range(per_sample):
            replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / per_sample)
    return _slowest(statistics.median(times), ctx)


def _time_prefill(model: TensorParallelDecoder, tokens: int, ctx: RunContext, cfg: SpeedConfig,
                  after_capture: Callable[[], None] | None) -> float:
    generator = torch.Generator().manual_seed(cfg.seed + tokens)
    prompt = torch.randint(cfg.model.vocab, (1, tokens), generator=generator).to(ctx.device)
    graph = GraphedPrefill(model, prompt, after_capture)
    return _replay_ms(graph.replay, 1, ctx, cfg)


def _time_decode(model: TensorParallelDecoder, batch: int, ctx: RunContext, cfg: SpeedConfig,
                 after_capture: Callable[[], None] | None) -> float:
    cache = model.new_cache(batch, cfg.context + 1)  # the step decodes at position `context`
    step = GraphedDecodeStep(model, cache, after_capture)
    return _replay_ms(step.replay, cfg.decode_steps, ctx, cfg)
