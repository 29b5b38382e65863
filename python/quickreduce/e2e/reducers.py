"""Reference reductions for the end-to-end runs, and a thread group that simulates ranks on the CPU.

Two shapes of reduction appear here:
- a *reducer* is what a rank's model calls: its own partial sum in, the sum over the ranks out
  (`GatheredSum` over a torch.distributed group; `ThreadGroup.reducer(rank)` over threads);
- a *reduction* takes every rank's partial at once (a list, one process simulating them all) and
  returns the one result every rank would hold (`exact_sum`, `rank_order_fp32_sum`, and the CPU
  twin of quickreduce's kernels in fidelity.py).

"Exact" means the float64 sum rounded once, correctly, to the model's dtype. float64 holds the sum
of up to 8 bf16/fp16 values exactly unless they span more than 2^40, which activations never do.
quickreduce's lossless paths promise `to_T(fp32 sum in rank order)` instead: with 2 ranks that is
the same thing (the fp32 sum of two 16-bit values is exact, and rounding an exact fp32 result to
8 or 11 bits is innocuous), with more ranks the fp32 additions can round and, rarely, land the
result on the other side of a 16-bit rounding boundary. `GatheredSum(track_rounding=True)` counts
those elements and keeps one as an example.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

Reduction = Callable[[list[torch.Tensor]], torch.Tensor]


def round_float64(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Correctly rounded (to nearest, ties to even) float64 -> `dtype` (bf16, fp16, fp32, float64).

    torch converts float64 to bf16 through fp32, rounding twice, which can be off by one ulp. So:
    round to fp32 *to odd* (truncate, then set the last bit if anything was cut off), then to the
    16-bit type with RNE; an intermediate format at least 2 bits wider than the target makes the
    second rounding exact (Boldo and Melquiond, 'Emulation of FMA and correctly rounded sums')."""
    if dtype == torch.float64:
        return x.clone()
    if x.dtype != torch.float64:
        raise TypeError(f"round_float64 takes a float64 tensor, got {x.dtype}")
    nearest = x.to(torch.float32)
    if dtype == torch.float32:
        return nearest
    back = nearest.to(torch.float64)
    inexact = back != x  # NaN too: its payload bit does no harm
    toward_zero = torch.where(inexact & (back.abs() > x.abs()),
                              torch.nextafter(nearest, torch.zeros_like(nearest)), nearest)
    odd = torch.where(inexact, toward_zero.view(torch.int32) | 1, toward_zero.view(torch.int32))
    return odd.view(torch.float32).to(dtype)


def float64_sum(partials: list[torch.Tensor]) -> torch.Tensor:
    """Sum of the partials in float64, in rank order (exact for 16-bit partials; see above)."""
    total = partials[0].to(torch.float64)
    for p in partials[1:]:
        total = total + p.to(torch.float64)
    return total


def exact_sum(partials: list[torch.Tensor]) -> torch.Tensor:
    """Sum of the partials in float64, rounded once to their dtype."""
    return round_float64(float64_sum(partials), partials[0].dtype)


def rank_order_fp32_sum(partials: list[torch.Tensor]) -> torch.Tensor:
    """quickreduce's lossless contract: fp32 adds in rank order, one rounding to the dtype."""
    if partials[0].dtype == torch.float64:
        return exact_sum(partials)
    total = partials[0].to(torch.float32)
    for p in partials[1:]:
        total = total + p.to(torch.float32)
    return total.to(partials[0].dtype)


@dataclass
class RoundingStats:
    """Where the fp32 rank-order sum and the exact sum round to different values."""

    calls: int = 0
    elements: int = 0
    differing: int = 0
    example: dict[str, Any] | None = None

    def add(self, partials: list[torch.Tensor], exact: torch.Tensor, fp32_order: torch.Tensor) -> None:
        self.calls += 1
        self.elements += exact.numel()
        # Compare values, not bits: -0.0 and +0.0 are the same sum.
        diff = (exact.reshape(-1) != fp32_order.reshape(-1)) & ~(exact.reshape(-1).isnan()
                                                                 & fp32_order.reshape(-1).isnan())
        count = int(diff.sum())
        self.differing += count
        if count and self.example is None:
            i = int(diff.nonzero()[0, 0])
            values = [float(p.reshape(-1)[i]) for p in partials]
            self.example = {"call": self.calls, "element": i, "partials": values,
                            "sum_float64": sum(float(v) for v in values),
                            "exact_rounded": float(exact.reshape(-1)[i]),
                            "fp32_rank_order_rounded": float(fp32_order.reshape(-1)[i])}

    def describe(self, dtype_name: str = "bf16") -> str:
        if not self.differing:
            return (f"0 of {self.elements:,} reduced elements round differently in fp32 rank order than "
                    f"in float64 ({self.calls} all-reduces)")
        e = self.example
        partials = " + ".join(f"{v:.9g}" for v in e["partials"])
        return (f"{self.differing:,} of {self.elements:,} reduced elements ({self.calls} all-reduces) round "
                f"differently in fp32 rank order than in float64; e.g. all-reduce {e['call']}, element "
                f"{e['element']}: {partials} = {e['sum_float64']:.9g} rounds to {e['exact_rounded']:.9g} "
                f"({dtype_name}) but the fp32 rank-order sum rounds to {e['fp32_rank_order_rounded']:.9g}")

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "elements": self.elements, "differing": self.differing, "example": self.example}


# --------------------------------------------------------------------------- over a process group

class GatheredSum:
    """A reducer over a torch.distributed group that gathers every rank's partial and reduces
    the list with `reduction` (exact_sum or rank_order_fp32_sum): a reference, not fast.
    `track_rounding` compares the two reductions on every call (RoundingStats in `.rounding`)."""

    def __init__(self, group: Any, reduction: Reduction = exact_sum, track_rounding: bool = False):
        import torch.distributed as dist

        self.dist = dist
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.reduction = reduction
        self.rounding = RoundingStats() if track_rounding else None
        # torch 2.13 renamed the flat all-gather (the old name warns); the signature is the same.
        self._all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def gather(self, partial: torch.Tensor) -> list[torch.Tensor]:
        flat = partial.reshape(-1).contiguous()
        # 32-bit words cross every backend (gloo has no 16-bit float types); pad odd counts.
        padded = flat if flat.numel() * flat.element_size() % 4 == 0 else torch.cat([flat, flat[:1]])
        words = padded.view(torch.int32)
        gathered = torch.empty(self.world_size * words.numel(), dtype=torch.int32, device=words.device)
        self._all_gather(gathered, words, group=self.group)
        rows = gathered.view(self.world_size, -1).view(flat.dtype)[:, :flat.numel()]
        return [row.view(partial.shape) for row in rows]

    def __call__(self, partial: torch.Tensor) -> torch.Tensor:
        partials = self.gather(partial)
        result = self.reduction(partials)
        if self.rounding is not None:
            exact = result if self.reduction is exact_sum else exact_sum(partials)
            self.rounding.add(partials, exact, rank_order_fp32_sum(partials))
        return result


# --------------------------------------------------------------------------- ranks as threads

class ThreadGroup:
    """W ranks as W threads of one process, for CPU tests of tensor-parallel code: every rank
    runs its own model, and `reducer(rank)` meets the others at a barrier to sum the partials
    (rank order, `reduction`). Torch ops release the GIL, so the threads really run side by side.

        group = ThreadGroup(4)
        logits = group.run(lambda rank: build_model(rank, group.reducer(rank)).prefill(tokens))
    """

    def __init__(self, world_size: int, reduction: Reduction = exact_sum, timeout_s: float = 120.0):
        if world_size < 1:
            raise ValueError(f"world_size must be at least 1, got {world_size}")
        self.world_size = world_size
        self.reduction = reduction
        self._slots: list[torch.Tensor | None] = [None] * world_size
        self._barrier = threading.Barrier(world_size, timeout=timeout_s)
        self.calls = 0

    def reducer(self, rank: int) -> Callable[[torch.Tensor], torch.Tensor]:
        def reduce(partial: torch.Tensor) -> torch.Tensor:
            self._slots[rank] = partial
            self._barrier.wait()  # every partial is in
            result = self.reduction(list(self._slots))
            self._barrier.wait()  # everyone has read the slots before anyone overwrites its own
            if rank == 0:
                self.calls += 1
            return result
        return reduce

    def run(self, fn: Callable[[int], Any]) -> list[Any]:
        """fn(rank) on every rank, each in its own thread; their results in rank order. The first
        exception breaks the barrier for the others and is raised here."""
        results: list[Any] = [None] * self.world_size
        errors: list[BaseException | None] = [None] * self.world_size

        def body(rank: int) -> None:
            try:
                results[rank] = fn(rank)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors[rank] = exc
                self._barrier.abort()  # the others stop waiting for this rank

        threads = [threading.Thread(target=body, args=(r,), name=f"rank{r}") for r in range(self.world_size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        first = next((e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)),
                     next((e for e in errors if e is not None), None))
        if first is not None:
            raise first
        return results


@dataclass
class ReductionError:
    """Relative L2 error of a reduction's results against the float64 sums (unrounded, as
    `quickreduce accuracy` measures), accumulated over calls."""

    error_sq: float = 0.0
    reference_sq: float = 0.0
    calls: int = 0
    per_call: list[float] = field(default_factory=list)

    def add(self, result: torch.Tensor, reference: torch.Tensor) -> None:
        diff = (result.to(torch.float64) - reference.to(torch.float64)).square().sum().item()
        ref = reference.to(torch.float64).square().sum().item()
        self.error_sq += diff
        self.reference_sq += ref
        self.calls += 1
        self.per_call.append((diff / ref) ** 0.5 if ref else 0.0)

    @property
    def relative(self) -> float:
        return (self.error_sq / self.reference_sq) ** 0.5 if self.reference_sq else 0.0
