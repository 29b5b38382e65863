"""One small adapter per collective implementation that `quickreduce bench` compares.

An adapter allocates what its method needs once (`setup`, collective), says which sizes it cannot
do (`skip_reason`), provides input buffers (`alloc_inputs`: symmetric memory for torch's ops) and
launches one call of its collective on the current stream (`run`), the same way eagerly and under
CUDA-graph capture. `after_capture` runs after each capture (vLLM registers graph buffers there);
`close` at the end. Peers from FlashInfer live in peers.py, the all-reduce + add + RMSNorm
epilogue's adapters in epilogue.py; `registry.make_method` knows them all.

Every adapter does one collective (`collective`, default all-reduce; `run(inp, out)` gets flat
buffers shaped as `collective_numels` says). Reduce-scatter, all-gather and all-to-all have NCCL
(through torch.distributed), torch symmetric memory where it has the op, and quickreduce per codec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from .report import ALL_REDUCE_SHAPED, EPILOGUE, EXCHANGE_METHOD_LOSSY, METHOD_LOSSY, QR_ROTATED_CODECS, QR_ROW_CODECS


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
    dtype_name: str  # "bf16" | "fp16" | "fp32"
    max_bytes: int  # largest benchmarked size
    qr_max_bytes: int  # max_size of the quickreduce Communicator
    peer_max_bytes: int  # workspace size of the FlashInfer peers (vLLM, TRT-LLM)
    symm_pool_elems: int  # elements of the symmetric-memory input pool
    shared: dict[str, Any] = field(default_factory=dict)
    shared_gpu: bool = False  # every rank on one GPU, over gloo (bench --shared-gpu)
    hidden: int = 4096  # row length of the epilogue's [tokens, hidden] tensors (bench --hidden)


def collective_numels(collective: str, size_bytes: int, element: int, world_size: int
                      ) -> tuple[int, int]:
    """(input values, output values) of one rank's call at nccl-tests' size (the whole buffer:
    all-reduce the tensor, reduce-scatter the input, all-gather the output, all-to-all the input;
    the epilogue as its all-reduce)."""
    values = size_bytes // element
    if collective in ALL_REDUCE_SHAPED or collective == "all_to_all":
        return values, values
    if collective == "reduce_scatter":
        return values, values // world_size
    if collective == "all_gather":
        return values // world_size, values
    raise ValueError(f"unknown collective {collective!r}")


def collective_skip_reason(collective: str, size_bytes: int, world_size: int, element: int = 2,
                           hidden: int | None = None) -> str | None:
    """Why no method can run `collective` at this size (None if they can): the segment collectives
    split the buffer into one block per rank, and every block must be whole 16-byte vectors; the
    epilogue's tensor is [tokens, hidden] of `element`-byte values, so the size must be whole rows."""
    if collective == EPILOGUE:
        if hidden is None:
            raise ValueError("the epilogue's skip reason needs its hidden size")
        if size_bytes % (hidden * element):
            return f"size is not whole rows of {hidden} values (--hidden)"
        return None
    if collective != "all_reduce" and size_bytes % (16 * world_size):
        return f"size is not {world_size} blocks of whole 16-byte vectors"
    return None


class Method:
    name = ""
    lossy = False
    inplace = False  # the result overwrites the input (so inputs grow and need refreshing)
    collective = "all_reduce"
    shared_gpu_ok = False  # runs with every rank on one GPU over gloo (--shared-gpu)

    def setup(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def skip_reason(self, nbytes: int) -> str | None:
        return None

    def alloc_inputs(self, rows: int, numel: int) -> torch.Tensor:
        return torch.empty((rows, numel), dtype=self.ctx.dtype, device=self.ctx.device)

    def alloc_outputs(self, rows: int, numel: int) -> torch.Tensor:
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


class NcclCopyMethod(Method):
    """NCCL as quickreduce's `algo="auto"` runs it for an out-of-place call (`y = comm.all_reduce(x)`):
    the input copied into the output, then `dist.all_reduce` in place there (torch has no out-of-place
    all-reduce). `quickreduce tune` times NCCL this way: that copy is what choosing NCCL costs an
    out-of-place call (an in-place one, as the torch.distributed backend makes, skips it)."""

    name = "nccl_copy"

    def run(self, inp, out):
        out.copy_(inp)
        dist.all_reduce(out, group=self.ctx.group)
        return out


# torch 2.13 renamed the flat forms (the old names warn); the signatures are the same.
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class NcclReduceScatterMethod(Method):
    """`dist.reduce_scatter_tensor(out, inp)` (reduce_scatter_single in newer torch); it reduces in
    the tensors' dtype (fp32 with --dtype fp32)."""

    name = "nccl"
    collective = "reduce_scatter"

    def run(self, inp, out):
        _REDUCE_SCATTER(out, inp, group=self.ctx.group)
        return out


class NcclAllGatherMethod(Method):
    """`dist.all_gather_into_tensor(out, inp)` (all_gather_single in newer torch)."""

    name = "nccl"
    collective = "all_gather"

    def run(self, inp, out):
        _ALL_GATHER(out, inp, group=self.ctx.group)
        return out


class NcclAllToAllMethod(Method):
    """`dist.all_to_all_single(out, inp)`, even splits."""

    name = "nccl"
    collective = "all_to_all"

    def run(self, inp, out):
        dist.all_to_all_single(out, inp, group=self.ctx.group)
        return out


# --------------------------------------------------------------------------- NCCL symmetric memory

class NcclSymmetricMethod(Method):
    """NCCL's symmetric-memory kernels (NCCL 2.27+): the same `dist` call as the `nccl` row, on
    buffers from a `torch.cuda.MemPool` of the group's NCCL allocator registered as a window
    (`register_mem_pool(pool, symm=True)`). NCCL then runs its window path, which reaches peer memory
    directly (faster than its plain kernels below a few MB). NVLink multicast follows the caller's
    NCCL_NVLS_ENABLE. Inputs and outputs are row views of two registered buffers shared by the
    collectives of one run."""

    name = "nccl_symm"

    def __init__(self, plain: Method | None = None):
        self.plain = plain or NcclMethod()  # the `nccl` row's adapter: the same call, other buffers
        self.collective, self.inplace = self.plain.collective, self.plain.inplace

    def setup(self, ctx):
        super().setup(ctx)
        self.plain.setup(ctx)
        self.inputs, self.outputs = _nccl_symmetric_buffers(ctx)

    def alloc_inputs(self, rows, numel):
        return _rows_of(self.inputs, rows, numel)

    def alloc_outputs(self, rows, numel):
        return _rows_of(self.outputs, rows, numel)

    def run(self, inp, out):
        return self.plain.run(inp, out)


def _rows_of(buffer: torch.Tensor, rows: int, numel: int) -> torch.Tensor:
    """`rows` rows of `numel` values at the start of a preallocated (symmetric or registered) buffer."""
    if rows * numel > buffer.numel():
        raise RuntimeError(f"preallocated buffer too small: {rows} x {numel} > {buffer.numel()}")
    return buffer[: rows * numel].view(rows, numel)


def _nccl_symmetric_buffers(ctx: RunContext) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, outputs): two buffers of `symm_pool_elems` values in one NCCL-registered window pool
    (registration is collective: every rank makes the same allocations, then registers)."""
    buffers = ctx.shared.get("nccl_symm_buffers")
    if buffers is not None:
        return buffers
    if ctx.shared_gpu:
        raise SkipMethod("NCCL needs one GPU per rank")
    try:
        backend = ctx.group._get_backend(torch.device("cuda"))
        allocator = backend.mem_allocator
        register = backend.register_mem_pool
    except (AttributeError, RuntimeError) as exc:
        raise SkipMethod(f"torch {torch.__version__}'s NCCL backend has no memory-pool "
                         f"registration ({type(exc).__name__}: {exc})") from exc
    pool = torch.cuda.MemPool(allocator)
    with torch.cuda.use_mem_pool(pool):
        inputs = torch.empty(ctx.symm_pool_elems, dtype=ctx.dtype, device=ctx.device)
        outputs = torch.empty(ctx.symm_pool_elems, dtype=ctx.dtype, device=ctx.device)
    try:
        register(pool, symm=True)
    except TypeError as exc:  # torch without symmetric registration
        raise SkipMethod(f"torch {torch.__version__}: register_mem_pool has no symm ({exc})") from exc
    ctx.shared["nccl_symm_pool"] = (backend, pool)
    ctx.shared["nccl_symm_buffers"] = (inputs, outputs)
    return inputs, outputs


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
        if ctx.dtype not in (torch.bfloat16, torch.float32):
            # The symm_mem all-reduce kernels dispatch on float32 and bfloat16 only.
            raise SkipMethod(f"torch symm_mem all-reduce has no {ctx.dtype_name} kernel")
        self.group_name = ctx.group.group_name
        self.pool = _shared_symmetric_pool(ctx)

    def alloc_inputs(self, rows, numel):
        return _rows_of(self.pool, rows, numel)

    def run(self, inp, out):
        if self.op_name == "two_shot_all_reduce_":
            return self.op(inp, "sum", self.group_name)
        if self.op_name == "one_shot_all_reduce_out":
            return self.op(inp, "sum", self.group_name, out)
        return self.op(inp, "sum", self.group_name)  # older torch: allocates its output


def _symmetric_pool(ctx: RunContext) -> torch.Tensor:
    symm_mem = _symm_mem_module(ctx)
    pool = symm_mem.empty(ctx.symm_pool_elems, dtype=ctx.dtype, device=ctx.device)
    symm_mem.rendezvous(pool, ctx.group.group_name)
    return pool


def _shared_symmetric_pool(ctx: RunContext) -> torch.Tensor:
    pool = ctx.shared.get("symm_pool")
    if pool is None:
        pool = ctx.shared["symm_pool"] = _symmetric_pool(ctx)
    return pool


def _symm_mem_module(ctx: RunContext):
    import torch.distributed._symmetric_memory as symm_mem

    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 11) and hasattr(symm_mem, "enable_symm_mem_for_group"):
        if not ctx.shared.get("symm_enabled"):
            symm_mem.enable_symm_mem_for_group(ctx.group.group_name)  # older torch needs this first
            ctx.shared["symm_enabled"] = True
    return symm_mem


class SymmMemReduceScatterMethod(Method):
    """`torch.ops.symm_mem.reduce_scatter_out(inp, group, False, out)`: torch's two-shot all-reduce
    kernel stopped after its reduce-scatter half (peer loads over NVLink, no multicast). Inputs are
    row views of the shared symmetric pool, as for the all-reduce ops (the op takes the storage
    offset)."""

    name = "symm_mem"
    collective = "reduce_scatter"

    def setup(self, ctx):
        super().setup(ctx)
        ops = getattr(torch.ops, "symm_mem", None)
        if ops is None or not hasattr(ops, "reduce_scatter_out"):
            raise SkipMethod(f"torch {torch.__version__} has no torch.ops.symm_mem.reduce_scatter_out")
        if ctx.dtype not in (torch.bfloat16, torch.float32):
            raise SkipMethod(f"torch symm_mem reduce-scatter has no {ctx.dtype_name} kernel "
                             "(it dispatches on float32 and bfloat16 only)")
        self.op = ops.reduce_scatter_out
        self.group_name = ctx.group.group_name
        self.pool = _shared_symmetric_pool(ctx)

    def alloc_inputs(self, rows, numel):
        return _rows_of(self.pool, rows, numel)

    def run(self, inp, out):
        return self.op(inp, self.group_name, False, out)


class SymmMemAllGatherMethod(Method):
    """`torch.ops.symm_mem._low_contention_all_gather(inp, group)`: the only all-gather of torch
    symmetric memory that needs no NVLink multicast (`multimem_all_gather_out` does, and multicast
    stays off). It copies the input into the group's symmetric workspace, then pulls every peer's
    block with copy-engine copies on a side stream, between two barriers, into a tensor it
    allocates. The current stream waits for that side stream after each call (the op leaves the
    join to its caller), which is also what makes it capturable.

    Inputs are ordinary tensors: the op reads a symmetric input from the start of its allocation
    whatever the view, so rows of one pool would all read row 0. The workspace is sized once in
    setup (it cannot grow during capture)."""

    name = "symm_mem"
    collective = "all_gather"

    def setup(self, ctx):
        super().setup(ctx)
        ops = getattr(torch.ops, "symm_mem", None)
        symm_mem = _symm_mem_module(ctx)
        if ops is None or not hasattr(ops, "_low_contention_all_gather"):
            raise SkipMethod(f"torch {torch.__version__} has no "
                             "torch.ops.symm_mem._low_contention_all_gather (its "
                             "multimem_all_gather_out needs NVLink multicast, which stays off)")
        for name in ("get_symm_mem_workspace", "_get_backend_stream"):
            if not hasattr(symm_mem, name):
                raise SkipMethod(f"torch {torch.__version__} has no "
                                 f"torch.distributed._symmetric_memory.{name}")
        self.op = ops._low_contention_all_gather
        self.side_stream = symm_mem._get_backend_stream
        self.group_name = ctx.group.group_name
        # The largest input: an all-gather's size is its output, W inputs.
        symm_mem.get_symm_mem_workspace(self.group_name, ctx.max_bytes // ctx.world_size)

    def alloc_outputs(self, rows, numel):
        return torch.empty((rows, 0), dtype=self.ctx.dtype, device=self.ctx.device)  # unused

    def run(self, inp, out):
        result = self.op(inp, self.group_name)
        torch.cuda.current_stream().wait_stream(self.side_stream())
        return result


class SymmMemAllToAllMethod(Method):
    """torch symmetric memory's all-to-all ops (`all_to_all_vdev`, `nvshmem_all_to_all`) run on
    the NVSHMEM backend only, which must be chosen before the first symmetric allocation and then
    holds for the whole process (the all-reduce and reduce-scatter rows use the CUDA backend's
    pool): not benchmarked. The adapter exists so the run says so."""

    name = "symm_mem"
    collective = "all_to_all"

    def setup(self, ctx):
        super().setup(ctx)
        raise SkipMethod("torch symm_mem's all-to-all (all_to_all_vdev, nvshmem_all_to_all) needs "
                         "the NVSHMEM backend; the bench's symmetric memory uses the CUDA backend")


# --------------------------------------------------------------------------- quickreduce

class QuickReduceMethod(Method):
    """`Communicator.all_reduce(x, out=..., codec=..., algo=...)`; one Communicator is shared."""

    shared_gpu_ok = True  # QUICKREDUCE_ALLOW_SHARED_GPU=1 lets its ranks share a GPU

    @property
    def api(self) -> str:
        """The Communicator method this adapter calls (setup skips it on a build without one)."""
        return self.collective

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
        if self.codec in QR_ROW_CODECS + QR_ROTATED_CODECS and self.codec not in names:
            raise SkipMethod(f"codec {self.codec} not built (codecs: {', '.join(names)})")
        if self.collective == "all_reduce" and ctx.dtype == torch.float32 and self.algo == "one_shot":
            raise SkipMethod("float32 all-reduces run as reduce-scatter + all-gather: no one-shot")
        if not hasattr(qr.Communicator, self.api):
            raise SkipMethod(f"this quickreduce has no Communicator.{self.api}")
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


class QuickReduceExchangeMethod(QuickReduceMethod):
    """`Communicator.reduce_scatter / all_gather / all_to_all(x, out=..., codec=...)` (even splits);
    codec None is the passthrough in the benchmark's dtype (fp16, bf16 or fp32: exact)."""

    def __init__(self, name: str, collective: str, codec: str | None):
        super().__init__(name, "exchange", codec)
        self.collective = collective
        self.lossy = EXCHANGE_METHOD_LOSSY.get(name, codec not in (None, "lossless"))

    def skip_reason(self, nbytes):
        return None

    def run(self, inp, out):
        return getattr(self.comm, self.collective)(inp, out=out, codec=self.codec)


def close_shared(ctx: RunContext) -> None:
    """Release what adapters share (collective: every rank calls it at the same point)."""
    comm = ctx.shared.pop("qr_comm", None)
    if comm is not None:
        comm.close()
    ctx.shared.pop("symm_pool", None)
    ctx.shared.pop("nccl_symm_buffers", None)
    registered = ctx.shared.pop("nccl_symm_pool", None)
    if registered is not None:
        backend, pool = registered
        torch.cuda.synchronize()
        backend.deregister_mem_pool(pool)
    ctx.shared.pop("epilogue_operands", None)  # epilogue.operands' residual and weight
