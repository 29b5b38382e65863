"""One small adapter per all-reduce that `quickreduce bench` compares.

An adapter allocates what its method needs once (`setup`, collective), says which sizes it cannot
do (`skip_reason`), provides input buffers (`alloc_inputs`: symmetric memory for torch's ops) and
launches one all-reduce on the current stream (`run`), the same way eagerly and under CUDA-graph
capture. `after_capture` runs after each capture (vLLM registers graph buffers there); `close`
at the end. Peers from FlashInfer live in peers.py; `make_method` knows them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed as dist

from .report import METHOD_LOSSY, QR_CODECS, QR_ROW_CODECS


class SkipMethod(Exception):
    """This method cannot run here; the message says why."""


@dataclass
class RunContext:
    """What every adapter may use; `shared` holds resources several adapters reuse."""

    rank: int
    world_size: int
    device: torch.device
    group: Any
    dtype: torch.dtype
    dtype_name: str  # "bf16" | "fp16"
    max_bytes: int  # largest benchmarked size
    qr_max_bytes: int  # max_size of the quickreduce Communicator
    peer_max_bytes: int  # workspace size of the FlashInfer peers (vLLM, TRT-LLM)
    symm_pool_elems: int  # elements of the symmetric-memory input pool
    shared: dict[str, Any] = field(default_factory=dict)


class Method:
    name = ""
    lossy = False
    inplace = False  # the result overwrites the input (so inputs grow and need refreshing)

    def setup(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def skip_reason(self, nbytes: int) -> str | None:
        return None

    def alloc_inputs(self, rows: int, numel: int) -> torch.Tensor:
        return torch.empty((rows, numel), dtype=self.ctx.dtype, device=self.ctx.device)

    def run(self, inp: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def after_capture(self) -> None:
        pass

    def raise_async_errors(self) -> None:
        """Raise what kernels reported asynchronously (e.g. a peer that never arrived)."""

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- NCCL

class NcclMethod(Method):
    name = "nccl"
    inplace = True

    def run(self, inp, out):
        dist.all_reduce(inp, group=self.ctx.group)
        return inp


# --------------------------------------------------------------------------- torch symm_mem

class SymmMemMethod(Method):
    """torch.ops.symm_mem one-shot (out of place) or two-shot (in place) over one shared pool
    of symmetric memory; inputs are row views of it (the ops take the storage offset)."""

    def __init__(self, name: str, algo: str):
        self.name = name
        self.algo = algo
        self.inplace = algo == "two_shot"

    def setup(self, ctx):
        super().setup(ctx)
        ops = getattr(torch.ops, "symm_mem", None)
        wanted = ("one_shot_all_reduce_out", "one_shot_all_reduce") if self.algo == "one_shot" \
            else ("two_shot_all_reduce_",)
        found = [op for op in wanted if ops is not None and hasattr(ops, op)]
        if not found:
            raise SkipMethod(f"torch {torch.__version__} has no torch.ops.symm_mem.{wanted[0]}")
        self.op = getattr(ops, found[0])
        self.op_name = found[0]
        if ctx.dtype != torch.bfloat16:
            # The symm_mem all-reduce kernels dispatch on float32 and bfloat16 only.
            raise SkipMethod(f"torch symm_mem all-reduce has no {ctx.dtype_name} kernel")
        self.group_name = ctx.group.group_name
        self.pool = ctx.shared.get("symm_pool")
        if self.pool is None:
            self.pool = _symmetric_pool(ctx)
            ctx.shared["symm_pool"] = self.pool

    def alloc_inputs(self, rows, numel):
        if rows * numel > self.pool.numel():
            raise RuntimeError(f"symmetric pool too small: {rows} x {numel} > {self.pool.numel()}")
        return self.pool[: rows * numel].view(rows, numel)

    def run(self, inp, out):
        if self.op_name == "two_shot_all_reduce_":
            return self.op(inp, "sum", self.group_name)
        if self.op_name == "one_shot_all_reduce_out":
            return self.op(inp, "sum", self.group_name, out)
        return self.op(inp, "sum", self.group_name)  # older torch: allocates its output


def _symmetric_pool(ctx: RunContext) -> torch.Tensor:
    import torch.distributed._symmetric_memory as symm_mem

    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 11) and hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(ctx.group.group_name)  # older torch needs this first
    pool = symm_mem.empty(ctx.symm_pool_elems, dtype=ctx.dtype, device=ctx.device)
    symm_mem.rendezvous(pool, ctx.group.group_name)
    return pool


# --------------------------------------------------------------------------- quickreduce

class QuickReduceMethod(Method):
    """`Communicator.all_reduce(x, out=..., codec=..., algo=...)`; one Communicator is shared."""

    def __init__(self, name: str, algo: str, codec: str | None):
        self.name = name
        self.algo = algo
        self.codec_request = codec  # None: passthrough in the benchmark's dtype
        self.lossy = METHOD_LOSSY.get(name, codec not in (None, "auto"))

    def setup(self, ctx):
        super().setup(ctx)
        if "qr_error" in ctx.shared:
            raise SkipMethod(ctx.shared["qr_error"])
        try:
            import quickreduce as qr

            names = list(qr.codec_names())
        except Exception as exc:  # noqa: BLE001 - any import problem means "not available"
            ctx.shared["qr_error"] = f"quickreduce not usable: {type(exc).__name__}: {exc}"
            raise SkipMethod(ctx.shared["qr_error"]) from exc
        self.codec = self.codec_request or ctx.dtype_name
        if self.codec in QR_ROW_CODECS and self.codec not in names:
            raise SkipMethod(f"codec {self.codec} not built (codecs: {', '.join(names)})")
        self.comm = ctx.shared.get("qr_comm")
        if self.comm is None:
            try:
                self.comm = qr.Communicator(group=ctx.group, max_size=ctx.qr_max_bytes)
            except Exception as exc:
                ctx.shared["qr_error"] = f"Communicator failed: {type(exc).__name__}: {exc}"
                raise
            ctx.shared["qr_comm"] = self.comm

    def skip_reason(self, nbytes):
        # The Communicator refuses one-shot above its packet buffers; that is a limit, not a failure.
        limit = getattr(getattr(self.comm, "_c", None), "one_shot_max_bytes", None)
        if self.algo == "one_shot" and limit is not None and nbytes > limit:
            return f"one-shot takes at most {limit} bytes"
        return None

    def run(self, inp, out):
        return self.comm.all_reduce(inp, out=out, codec=self.codec, algo=self.algo)

    def raise_async_errors(self):
        check = getattr(self.comm, "check", None)  # PeerTimeoutError / CallMismatchError from a kernel
        if check is not None:
            check()


def close_shared(ctx: RunContext) -> None:
    """Release what adapters share (collective: every rank calls it at the same point)."""
    comm = ctx.shared.pop("qr_comm", None)
    if comm is not None:
        comm.close()
    ctx.shared.pop("symm_pool", None)


# --------------------------------------------------------------------------- registry

def _own_methods() -> dict[str, Callable[[], Method]]:
    methods: dict[str, Callable[[], Method]] = {
        "nccl": NcclMethod,
        "symm_mem_one_shot": lambda: SymmMemMethod("symm_mem_one_shot", "one_shot"),
        "symm_mem_two_shot": lambda: SymmMemMethod("symm_mem_two_shot", "two_shot"),
        "qr_one_shot": lambda: QuickReduceMethod("qr_one_shot", "one_shot", None),
        "qr_two_shot": lambda: QuickReduceMethod("qr_two_shot", "two_shot", None),
        "qr_lossless": lambda: QuickReduceMethod("qr_lossless", "two_shot", "lossless"),
        "qr_auto": lambda: QuickReduceMethod("qr_auto", "auto", "auto"),
        "qr_auto_int4": lambda: QuickReduceMethod("qr_auto_int4", "auto", "auto:int4"),
    }
    for codec in QR_CODECS:
        methods[f"qr_{codec}"] = lambda c=codec: QuickReduceMethod(f"qr_{c}", "two_shot", c)
    return methods


def make_method(name: str) -> Method:
    from .peers import PEER_METHODS

    factories = {**_own_methods(), **PEER_METHODS}
    if name not in factories:
        raise KeyError(f"unknown method {name!r}")
    return factories[name]()
