"""The Python communicator: eligibility checks, handle exchange, argument checks, dispatch.

Equivalent torch call (for passthrough codecs): ``torch.distributed.all_reduce(x, group=group)``,
but out of place by default, and bitwise identical on every rank.
"""
from __future__ import annotations

import dataclasses
import socket
from typing import Optional, Sequence

import torch

from . import _C, codecs, collectives, config, moe, ops

QuickReduceError = _C.QuickReduceError
PeerTimeoutError = _C.PeerTimeoutError
CallMismatchError = _C.CallMismatchError
SplitSizeError = _C.SplitSizeError
CudaError = _C.CudaError

_DTYPE_IDS = collectives.HALF_DTYPE_IDS
_ALGO_IDS = {"one_shot": _C.ALGO_ONE_SHOT, "two_shot": _C.ALGO_TWO_SHOT}
ALGOS = ("auto", "one_shot", "two_shot", "rs_ag", "nccl")
SUPPORTED_WORLD_SIZES = tuple(range(2, _C.MAX_WORLD_SIZE + 1))


def _where_it_packs(codec: str, dtype: torch.dtype, algo: str) -> str:
    """The lossless codec packs bf16 in the two-shot only; elsewhere the passthrough gives the same bits."""
    if codec == "lossless" and (dtype != torch.bfloat16 or algo in ("one_shot", "rs_ag")):
        return "fp16"
    return codec


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where an all-reduce goes (``Communicator.plan``, ``plan_all_reduce``).

    Attributes:
        takes: quickreduce's kernels run it. False where the tuning table has NCCL faster (``algo`` "nccl"),
            above ``max_size`` (``algo``/``codec`` then say what would run), or for a dtype quickreduce does not
            reduce (``algo`` and ``codec`` empty); ``reason`` says which.
        algo: ``"one_shot"``, ``"two_shot"``, ``"rs_ag"`` (16-bit, exact: reduce-scatter then all-gather),
            ``"nccl"``, or ``"reduce_scatter+all_gather"`` (float32).
        codec: what the kernels run: ``"fp16"`` (the exact passthrough in the tensor's own dtype),
            ``"lossless"`` (bf16 packed, the same bits), or a lossy codec (``"int4"``, ...); for float32 with an
            ``auto:<codec>`` bound, that bound (the collectives' table picks the codec per call).
        exact: the result is the exact sum (every exact codec gives the same bits).
        reason: why quickreduce does not take it ("" when it does).
    """
    takes: bool
    algo: str
    codec: str
    exact: bool
    reason: str = ""


_EXACT_RUNS = ("fp16", "lossless")
FP32_ALGO = "reduce_scatter+all_gather"


def _table_choice(table, nbytes: int, dtype: torch.dtype, bound: Optional[str], one_shot_max_bytes: int) -> tuple[str, str]:
    """The table's (algo, canonical codec) for a size; the one-shot only where it fits."""
    from . import tuning
    algo, codec = tuning.choose(table, nbytes, "bf16" if dtype == torch.bfloat16 else "fp16", bound)
    if algo == "one_shot" and nbytes > one_shot_max_bytes:
        algo = "two_shot"
    return algo, codecs.canonical(codec)


def plan_all_reduce(nbytes: int, dtype: torch.dtype, codec: str, *, table, world_size: int,
                    max_size: Optional[int] = None, one_shot_max_bytes: Optional[int] = None,
                    algo: str = "auto") -> Plan:
    """The plan of an all-reduce of ``nbytes`` bytes of ``dtype`` with ``codec`` (a name as ``all_reduce``
    takes: ``"fp16"``, ``"lossless"``, ``"int4"``, ``"auto"``, ``"auto:int4"``, ...) and ``algo``, on
    ``world_size`` ranks with the tuning ``table`` (``tuning.load_table``) and a workspace of ``max_size``
    bytes (None: no limit). Needs no GPU and no communicator, so an integration can size a workspace to
    what it will send: a pure function of its arguments.

    Exact codecs with ``algo="auto"`` run the table's fastest exact method for the size (they give the
    same bits); ``auto:<codec>`` runs the table's fastest method at most that lossy; any other codec runs
    the two-shot with that codec. Raises ValueError/TypeError for an unknown codec or algo, and for the
    one-shot asked for with a lossy codec or above its limit."""
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
    if not isinstance(codec, str):
        raise TypeError(f"codec must be a string, got {type(codec).__name__}")
    lowered = codec.lower()
    if dtype == torch.float32:
        return _plan_fp32(nbytes, lowered, world_size, max_size, algo)
    if dtype not in _DTYPE_IDS:
        return Plan(False, "", "", False, f"dtype {dtype} (quickreduce reduces float16, bfloat16 and float32)")
    one_shot_max = one_shot_max_bytes if one_shot_max_bytes is not None else _C.one_shot_max_bytes(world_size)
    is_auto, requested = codecs.parse_codec_request(lowered)
    if is_auto:
        bound = requested
        chosen_algo, chosen_codec = _table_choice(table, nbytes, dtype, bound, one_shot_max)
        algo = chosen_algo if algo == "auto" else algo
        name = _where_it_packs(chosen_codec, dtype, algo)
    else:
        name = _where_it_packs(codecs.canonical(lowered), dtype, algo)
        if algo == "auto" and name in _EXACT_RUNS:
            # Exact either way (the same bits): the table's fastest exact method for this size.
            algo, chosen = _table_choice(table, nbytes, dtype, None, one_shot_max)
            name = _where_it_packs(chosen, dtype, algo)
        elif algo == "auto":
            algo = "two_shot"
        if algo == "one_shot":
            if name != "fp16":
                raise ValueError(f"the one-shot algorithm is passthrough only; codec {codec!r} needs algo='two_shot'")
            if nbytes > one_shot_max:
                raise ValueError(f"one-shot takes at most {one_shot_max} bytes, got {nbytes}")
        if algo == "rs_ag" and name != "fp16":
            raise ValueError(f"the rs_ag algorithm is exact only; codec {codec!r} needs algo='two_shot'")
    exact = name in _EXACT_RUNS
    if algo == "rs_ag" and max_size is not None:
        padded = _two_calls_bytes(nbytes, dtype.itemsize, world_size)
        if padded > max_size:
            return Plan(False, algo, name, exact, f"{padded} bytes (padded) is over max_size ({max_size} bytes)")
    if algo == "nccl":
        return Plan(False, "nccl", "fp16", True, "the tuning table has NCCL fastest at this size")
    if max_size is not None and nbytes > max_size:
        return Plan(False, algo, name, exact, f"{nbytes} bytes is over max_size ({max_size} bytes)")
    return Plan(True, algo, name, exact)


def _two_calls_bytes(nbytes: int, element_size: int, world_size: int) -> int:
    """What a reduce-scatter + all-gather all-reduce (rs_ag, float32) moves: the tensor padded to W
    equal chunks (collectives.all_reduce_in_two_calls)."""
    n = nbytes // element_size
    return max(n, world_size * _C.fp32_all_reduce_chunk(n, world_size)) * element_size if n else 0


def _plan_fp32(nbytes: int, lowered: str, world_size: int, max_size: Optional[int], algo: str) -> Plan:
    """float32 runs as reduce-scatter + all-gather over W chunks (collectives.all_reduce_in_two_calls)."""
    if algo not in ("auto", "two_shot", "rs_ag", "nccl"):
        raise ValueError(f"float32 all-reduces run as reduce-scatter + all-gather (algo 'auto'); got algo={algo!r}")
    is_auto, requested = codecs.parse_codec_request(lowered)
    if is_auto:
        name = "fp16" if requested is None else codecs.AUTO_PREFIX + requested
    else:
        name = requested
    exact = name in _EXACT_RUNS or name == "auto:fp16"
    if algo == "nccl":
        return Plan(False, "nccl", "fp16", True, "algo='nccl'")
    padded = _two_calls_bytes(nbytes, 4, world_size)
    if max_size is not None and padded > max_size:
        return Plan(False, FP32_ALGO, name, exact, f"{padded} bytes (padded) is over max_size ({max_size} bytes)")
    return Plan(True, FP32_ALGO, name, exact)


class Communicator:
    """All-reduce, reduce-scatter, all-gather and all-to-all over the GPUs of one node through peer
    memory (CUDA IPC over NVLink).

    Args:
        group: a ``torch.distributed`` process group (default: WORLD); its backend only carries the
            one-time handle exchange (and the ``nccl`` fallback of ``codec="auto"``).
        max_size: largest message in bytes (default ``QUICKREDUCE_MAX_SIZE_MB``, 128 MiB). Each GPU
            allocates about ``3 * max_size`` of workspace, plus
            ``3 * world_size * min(max_size, quickreduce._C.one_shot_max_bytes(world_size))``
            (8 MiB on 2 GPUs, else 4 MiB) for the one-shot buffers and ``3 * world_size * min(max_size, 2 MiB)``
            for the collectives' small segments (``quickreduce._C.workspace_bytes(world_size, max_size)`` gives it exactly).
        rank, world_size: instead of a group, build a communicator whose handles are exchanged by the
            caller (``ipc_handle()`` / ``set_handles()``), for Ray and other launchers.
        codecs: per-collective default codecs, e.g. ``{"all_to_all": "fp8"}`` (keys: ``all_reduce``,
            ``reduce_scatter``, ``all_gather``, ``all_to_all``); else ``QUICKREDUCE_QUANTIZATION_<COLLECTIVE>``,
            else ``QUICKREDUCE_QUANTIZATION``.

    The device is ``torch.cuda.current_device()`` at construction.
    """

    def __init__(self, group=None, max_size: Optional[int] = None, *, rank: Optional[int] = None,
                 world_size: Optional[int] = None, timeout_s: Optional[float] = None,
                 codecs: Optional[dict] = None):
        if not torch.cuda.is_available():
            raise RuntimeError("quickreduce needs CUDA GPUs; torch.cuda.is_available() is False")
        self.group = None
        if rank is None and world_size is None:
            import torch.distributed as dist
            if not dist.is_initialized():
                raise RuntimeError("torch.distributed is not initialized: call init_process_group first, "
                                   "or pass rank= and world_size= and exchange handles yourself")
            self.group = group if group is not None else dist.group.WORLD
            rank, world_size = dist.get_rank(self.group), dist.get_world_size(self.group)
        elif rank is None or world_size is None:
            raise ValueError("pass both rank and world_size (or neither, to use a process group)")
        if world_size not in SUPPORTED_WORLD_SIZES:
            raise ValueError(f"world size {world_size} is not supported: quickreduce runs on "
                             f"{SUPPORTED_WORLD_SIZES[0]}..{SUPPORTED_WORLD_SIZES[-1]} GPUs of one node")
        self.rank, self.world_size = rank, world_size
        self.device = torch.cuda.current_device()
        self.max_size = int(max_size) if max_size is not None else config.max_size_bytes()
        if self.max_size <= 0:
            raise ValueError(f"max_size must be positive, got {max_size}")
        self.max_size = (self.max_size + 15) // 16 * 16
        self.default_codec = config.default_codec()
        self.codecs = {c: config.default_codec(c) for c in config.COLLECTIVES}
        for name, codec in (codecs or {}).items():
            if name not in config.COLLECTIVES:
                raise ValueError(f"codecs has key {name!r}; keys are {config.COLLECTIVES}")
            self.codecs[name] = codec
        self.pdl = config.pdl()  # programmatic dependent launch for our kernels
        self.fused_epilogue = config.fused_epilogue()  # all_reduce_add_rmsnorm in one kernel where it fits
        self.packet_segment_max_bytes = config.packet_segment_max_bytes()  # the collectives' small path
        self._two_shot_groups = 0  # development knob (lab/scripts/dev_timing.py): pipeline groups, 0 = the built-in rule
        # all_reduce_add_rmsnorm from this size on a two-shot: the residual added at the two-shot's
        # stores, the kernel after it only normalising (2x H200, hidden 4096: -2..-16% from 16 MB, +1..4%
        # at 1-4 MB). Same bits either way.
        self.two_shot_residual_min_bytes = 8 << 20
        self._table = None
        self._c = _C.Communicator(rank, world_size, self.device, self.max_size,
                                  timeout_s if timeout_s is not None else config.timeout_s())
        self._handle = ops.register(self)  # names this communicator in torch.ops.quickreduce.*
        if self.group is not None:
            self._exchange_through_group()

    # ---- handles ----
    def ipc_handle(self) -> bytes:
        """This rank's workspace handle (64 bytes), to give every peer."""
        return self._c.ipc_handle()

    def set_handles(self, handles: Sequence[bytes]) -> None:
        """Map every peer's workspace; ``handles[r]`` is rank r's ``ipc_handle()``."""
        self._c.open_peers(list(handles))

    def peer_info(self) -> dict:
        """What this rank tells its peers so they can map its workspace: host name, IPC handle, device,
        GPU uuid, and the settings every rank must share (picklable). Give every rank's to ``connect()``
        on every rank."""
        return {"host": socket.gethostname(), "handle": self._c.ipc_handle(), "device": self.device,
                "uuid": str(torch.cuda.get_device_properties(self.device).uuid), "max_size": self.max_size,
                "packet_segment_max_bytes": self.packet_segment_max_bytes}

    def connect(self, everyone: Sequence[dict]) -> None:
        """Check every rank's ``peer_info()`` (``everyone[r]`` is rank r's: one node, one GPU a rank unless
        ``QUICKREDUCE_ALLOW_SHARED_GPU=1``) and map the peers' workspaces. A communicator built from a group
        does this through ``all_gather_object``; quickreduce.distributed through its process group's store."""
        hosts = {e["host"] for e in everyone}
        if len(hosts) != 1:
            raise QuickReduceError(f"all ranks must be on one node (peer memory); found hosts {sorted(hosts)}")
        uuids = [e["uuid"] for e in everyone]
        if len(set(uuids)) != len(uuids) and not config.allow_shared_gpu():
            raise QuickReduceError("two ranks share one GPU; quickreduce needs one GPU per rank "
                                   "(QUICKREDUCE_ALLOW_SHARED_GPU=1 allows it for testing: slow)")
        # The workspace layout follows max_size, and the collectives' path choice the packet limit:
        # ranks that differ would write into each other's wrong offsets or wait on different paths.
        for key, knob in (("max_size", "max_size (QUICKREDUCE_MAX_SIZE_MB)"),
                          ("packet_segment_max_bytes", "QUICKREDUCE_PACKET_SEGMENT_MAX_KB")):
            values = [e.get(key) for e in everyone]
            if len(set(values)) != 1:
                raise QuickReduceError(f"ranks disagree on {knob}: {values} (in rank order); every rank must "
                                       f"use the same")
        self.set_handles([e["handle"] for e in everyone])

    def _exchange_through_group(self) -> None:
        import torch.distributed as dist
        everyone: list = [None] * self.world_size
        dist.all_gather_object(everyone, self.peer_info(), group=self.group)
        self.connect(everyone)
        dist.barrier(group=self.group)

    def codec_for(self, collective: str) -> str:
        """The default codec of one collective (the constructor's ``codecs``, else the environment)."""
        return self.codecs[collective]

    @property
    def handle(self) -> int:
        """The integer that names this communicator in ``torch.ops.quickreduce.*`` (quickreduce/ops.py)."""
        return self._handle

    # ---- the collectives ----
    def all_reduce(self, x: torch.Tensor, out: Optional[torch.Tensor] = None, codec: Optional[str] = None,
                   algo: str = "auto", *, op="sum", async_op: bool = False):
        """Sum ``x`` over all ranks; returns ``out`` (a new tensor when not given; ``out=x`` is in place).

        Args:
            x: contiguous CUDA tensor, ``torch.float16``, ``torch.bfloat16`` or ``torch.float32`` (run as
                reduce-scatter + all-gather, docs/codec-spec.md), on this communicator's device, 16-byte
                aligned, at most ``max_size`` bytes; any shape.
            out: optional tensor of the same shape/dtype/device (may be ``x``).
            codec: ``"fp16"``/``"bf16"`` (lossless), ``"lossless"`` (the same bits, bf16 packed to ~13 bits
                a value), ``"fp8"``, ``"int8"``, ``"int6"``, ``"int4"``, ``"fp4"``,
                ``"auto"`` (fastest lossless method for this size), or ``"auto:<codec>"`` (fastest method
                whose error is at most that codec's). Default: ``QUICKREDUCE_QUANTIZATION``.
            algo: ``"auto"``, ``"one_shot"`` (passthrough only), ``"two_shot"``, ``"rs_ag"`` (exact only: our
                reduce-scatter then all-gather, the two-shot's bits) or ``"nccl"`` (through the group).
                With ``"auto"``, an exact codec (``"fp16"``/``"bf16"``/``"lossless"``) runs the fastest exact
                method for the size (they give the same bits), and ``"lossless"`` on fp16 runs the passthrough.
            op: ``torch.distributed.ReduceOp.SUM`` (default), ``AVG`` (every codec: the sum, then divided
                elementwise by the world size in the tensor's dtype, ``out.div_(W)``: identical bits on every
                rank), ``MAX``/``MIN`` (exact codecs only, else ValueError; run as an exact all-to-all, a local
                amax/amin and an exact all-gather: a passthrough all-reduce's traffic plus scratch of about
                twice the message; algo ``"auto"`` or ``"nccl"``); or ``"sum"``/``"avg"``/``"max"``/``"min"``.
            async_op: ``True`` returns a ``quickreduce.ops.Work`` (``wait()``, ``is_completed()``): the call runs
                on a side stream ordered after the current stream, and ``wait()`` orders the current stream
                after it. ``False``: runs on the current stream and returns the output.

        Every rank must make the same call. Runs on the current CUDA stream; capturable in CUDA graphs.
        With ``out=None`` and ``async_op=False`` this is ``torch.ops.quickreduce.all_reduce`` (torch.compile
        traces it without a graph break). See quickreduce/ops.py for ReduceOp and async_op in full.
        """
        name, codec = ops.check_reduce(op, codec if codec is not None else self.codec_for("all_reduce"), "all_reduce")
        ops.check_call(x, async_op)
        if async_op:
            return ops.run_async(self, self._all_reduce, (x, out, codec, algo, name), (x, out))
        if out is None:
            return torch.ops.quickreduce.all_reduce(x, self._handle, codec, algo, name)
        return self._all_reduce(x, out, codec, algo, name)

    def _all_reduce(self, x: torch.Tensor, out: Optional[torch.Tensor], codec: str, algo: str,
                    op: str) -> torch.Tensor:
        """The all-reduce every form runs (the op, ``out=``, async): SUM, then AVG's division, or MAX/MIN."""
        if op in ("max", "min"):
            return ops.all_reduce_extreme(self, x, out, codec, algo, op)
        out = self._all_reduce_sum(x, out, codec, algo)
        if op == "avg":
            out.div_(self.world_size)  # elementwise on the reduced output, in its dtype: the same on every rank
        return out

    def _all_reduce_sum(self, x: torch.Tensor, out: Optional[torch.Tensor] = None, codec: Optional[str] = None,
                        algo: str = "auto", residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The sum; with ``residual`` (the epilogue's, x's shape and dtype; the plan must be the two-shot)
        ``out = to_T(to_T(sum) + residual)``, the add done at the two-shot's stores."""
        self._check_tensor(x, "x", collectives.DTYPE_IDS)
        if residual is not None and (x.dtype not in _DTYPE_IDS or residual.shape != x.shape
                                     or residual.dtype != x.dtype):
            raise ValueError("the residual add takes float16/bfloat16 x and a residual of x's shape and dtype")
        if out is None:
            out = torch.empty_like(x)
        elif out is not x:
            self._check_tensor(out, "out", collectives.DTYPE_IDS)
            if out.shape != x.shape or out.dtype != x.dtype:
                raise ValueError(f"out has shape {tuple(out.shape)} and dtype {out.dtype}; expected "
                                 f"{tuple(x.shape)} and {x.dtype}")
        nbytes = x.numel() * x.element_size()
        if nbytes > self.max_size:
            raise ValueError(f"message of {nbytes} bytes exceeds this communicator's max_size of {self.max_size} "
                             f"bytes (set max_size= or QUICKREDUCE_MAX_SIZE_MB)")
        if x.numel() == 0:
            return out
        codec = codec if codec is not None else self.codec_for("all_reduce")
        if x.dtype == torch.float32:
            if algo not in ("auto", "two_shot", "rs_ag", "nccl"):
                raise ValueError(f"float32 all-reduces run as reduce-scatter + all-gather (algo 'auto'); got algo={algo!r}")
            if algo == "nccl":
                return self._nccl(x, out)
            return collectives.all_reduce_in_two_calls(self, x, out, collectives.resolve_codec(self, "all_reduce", codec, x))
        algo, codec_name = self._plan(nbytes, x.dtype, codec, algo)
        if residual is not None and algo != "two_shot":
            raise ValueError(f"the residual add runs in the two-shot only (the plan is {algo})")
        if algo == "nccl":
            return self._nccl(x, out)
        if algo == "rs_ag":
            # Two exchange calls with flags in the data (no barrier): on 4x H100 faster than the
            # two-shot at 2-8 MB; the same bits (the owner's fp32 rank-order sum, copied to all).
            return collectives.all_reduce_in_two_calls(self, x, out, codec_name)
        extra = {"residual_ptr": residual.data_ptr()} if residual is not None else {}
        self._c.all_reduce(x.data_ptr(), out.data_ptr(), x.numel(), _DTYPE_IDS[x.dtype], codecs.codec_id(codec_name),
                           _ALGO_IDS[algo], torch.cuda.current_stream(self.device).cuda_stream, pdl=self.pdl,
                           groups=self._two_shot_groups, **extra)
        return out

    def reduce_scatter(self, x: torch.Tensor, out: Optional[torch.Tensor] = None,
                       codec: Optional[str] = None, *, op="sum", async_op: bool = False):
        """Sum ``x`` over all ranks and keep block ``rank`` of the sum: x ``[W*k, ...]`` -> ``[k, ...]``.

        Equivalent torch call: ``torch.distributed.reduce_scatter_tensor(out, x)``. dtypes float16,
        bfloat16, float32; codec as in ``all_reduce`` (one quantization of every other rank's values;
        this rank's own are added exactly). ``x.numel()`` must divide by the world size. ``op`` and
        ``async_op`` as in ``all_reduce`` (MAX/MIN: an exact all-to-all and a local amax/amin, the
        traffic of a passthrough reduce-scatter). With ``out=None`` and ``async_op=False`` this is
        ``torch.ops.quickreduce.reduce_scatter``.
        """
        name, codec = ops.check_reduce(op, codec if codec is not None else self.codec_for("reduce_scatter"),
                                       "reduce_scatter")
        ops.check_call(x, async_op)
        if async_op:
            return ops.run_async(self, self._reduce_scatter, (x, out, codec, name), (x, out))
        if out is None:
            return torch.ops.quickreduce.reduce_scatter(x, self._handle, codec, name)
        return self._reduce_scatter(x, out, codec, name)

    def _reduce_scatter(self, x: torch.Tensor, out: Optional[torch.Tensor], codec: str, op: str) -> torch.Tensor:
        if op in ("max", "min"):
            return ops.reduce_scatter_extreme(self, x, out, codec, op)
        out = collectives.reduce_scatter(self, x, out, codec)
        if op == "avg":
            out.div_(self.world_size)  # as all_reduce's AVG
        return out

    def all_gather(self, x: torch.Tensor, out: Optional[torch.Tensor] = None,
                   codec: Optional[str] = None, *, async_op: bool = False):
        """Concatenate every rank's ``x`` along dim 0: ``[k, ...]`` -> ``[W*k, ...]``.

        Equivalent torch call: ``torch.distributed.all_gather_into_tensor(out, x)``. With a lossy codec
        every block is what its sender's one payload decodes to, on every rank (the sender's own
        included): all ranks hold identical bits. ``async_op`` as in ``all_reduce``; with ``out=None``
        and ``async_op=False`` this is ``torch.ops.quickreduce.all_gather``.
        """
        ops.check_call(x, async_op)
        if async_op:
            return ops.run_async(self, collectives.all_gather, (self, x, out, codec), (x, out))
        if out is None:
            return torch.ops.quickreduce.all_gather(x, self._handle, codec)
        return collectives.all_gather(self, x, out, codec)

    def all_to_all(self, x: torch.Tensor, out: Optional[torch.Tensor] = None, codec: Optional[str] = None,
                   output_split_sizes: Optional[Sequence[int]] = None,
                   input_split_sizes: Optional[Sequence[int]] = None, *, async_op: bool = False):
        """Send rows ``input_split_sizes[d]`` of ``x`` (dim 0, in rank order) to rank d; receive
        ``output_split_sizes[s]`` rows from each rank s into ``out`` in rank order. None: even splits.

        Equivalent torch call: ``torch.distributed.all_to_all_single(out, x, output_split_sizes,
        input_split_sizes)``. The sizes cross the link with the data: a rank whose
        ``output_split_sizes[s]`` differs from what rank s sends gets ``CallMismatchError``.
        ``async_op`` as in ``all_reduce``; with ``out=None`` and ``async_op=False`` this is
        ``torch.ops.quickreduce.all_to_all``.
        """
        ops.check_call(x, async_op)
        if async_op:
            return ops.run_async(self, collectives.all_to_all,
                                 (self, x, out, codec, output_split_sizes, input_split_sizes), (x, out))
        if out is None:
            return torch.ops.quickreduce.all_to_all(
                x, self._handle, codec, None if output_split_sizes is None else [int(s) for s in output_split_sizes],
                None if input_split_sizes is None else [int(s) for s in input_split_sizes])
        return collectives.all_to_all(self, x, out, codec, output_split_sizes, input_split_sizes)

    def all_to_all_dynamic(self, x: torch.Tensor, input_split_sizes: torch.Tensor, out: Optional[torch.Tensor] = None,
                           output_split_sizes: Optional[torch.Tensor] = None, *, capacity: Optional[int] = None,
                           codec: Optional[str] = None):
        """``all_to_all`` with the split sizes on the GPU: send rows ``input_split_sizes[d]`` of ``x`` (dim 0,
        in rank order; an int32 or int64 CUDA tensor of ``world_size`` counts) to rank d; rank s's rows land
        in ``out`` in rank order and the kernel writes their counts into ``output_split_sizes`` (same dtype).
        Returns ``(out, output_split_sizes)``. The host never reads the counts: no synchronization, and a
        captured CUDA graph replays with the counts the device holds at each replay.

        ``out`` has ``capacity`` rows (default: ``out.shape[0]``, or ``world_size * x.shape[0]`` when ``out`` is
        not given); rows past ``sum(output_split_sizes)`` are not written (zeros in the ``out=None`` form, whose
        output is new). Counts that are negative, add up
        to more rows than ``x`` has, or send a rank more rows than its capacity are never followed past a
        buffer: the call ends on every rank and the next call (or ``check()``) raises ``SplitSizeError``
        naming the rank and the case (docs/moe.md). For counts that fit, the output equals
        ``all_to_all(x, output_split_sizes=..., input_split_sizes=...)`` bit for bit, every codec. With
        ``out=None`` and ``output_split_sizes=None`` this is ``torch.ops.quickreduce.all_to_all_dynamic``
        (torch.compile traces it).
        """
        if out is None and output_split_sizes is None and isinstance(x, torch.Tensor) and \
                isinstance(input_split_sizes, torch.Tensor):
            cap = self.world_size * (x.shape[0] if x.dim() else 1) if capacity is None else capacity
            return torch.ops.quickreduce.all_to_all_dynamic(x, input_split_sizes, self._handle, cap, codec)
        return moe.all_to_all_dynamic(self, x, input_split_sizes, out, output_split_sizes, capacity, codec)

    def all_reduce_add_rmsnorm(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                               eps: float = 1e-6, codec: Optional[str] = None, out: Optional[torch.Tensor] = None,
                               residual_out: Optional[torch.Tensor] = None, fp8: Optional[str] = None,
                               fp8_scale: Optional[torch.Tensor] = None):
        """A transformer layer's all-reduce and what follows it: ``s = all_reduce(x)``,
        ``residual_out = s + residual``, ``out = RMSNorm(residual_out) * weight`` (rows of ``x.shape[-1]``),
        with the add and the norm in one kernel chained to the all-reduce (TensorRT-LLM's
        RESIDUAL_RMS_NORM). Returns ``(out, residual_out)``; with ``fp8="per_token"`` also the normed rows as
        ``torch.float8_e4m3fn`` and their float32 scales ``[..., 1]`` (amax / 448), with ``fp8="per_tensor"``
        the codes under the given ``fp8_scale`` (a 1-element float32 tensor). Rounding is that of an unfused
        bf16/fp16 model (docs/codec-spec.md, "Add + RMSNorm epilogue"); identical bits on every rank.
        ``out=x`` and ``residual_out=residual`` are the in-place forms. ``codec`` as in ``all_reduce``."""
        if out is None and residual_out is None and fp8 is None:  # the torch op: compiled graphs trace it
            return torch.ops.quickreduce.all_reduce_add_rmsnorm(x, residual, weight, self._handle, eps, codec)
        if out is None and residual_out is None and fp8 == "per_token":
            return torch.ops.quickreduce.all_reduce_add_rmsnorm_fp8(x, residual, weight, self._handle, eps, codec)
        from .epilogues import all_reduce_add_rmsnorm
        return all_reduce_add_rmsnorm(self, x, residual, weight, eps, codec, out, residual_out, fp8, fp8_scale)

    def plan(self, nbytes: int, dtype: torch.dtype, codec: Optional[str] = None, algo: str = "auto") -> Plan:
        """Where an all-reduce of ``nbytes`` bytes of ``dtype`` goes, and what runs it (``plan_all_reduce``
        with this communicator's tuning table, world size and ``max_size``). ``codec`` as in ``all_reduce``
        (default: this communicator's). A pure function of the arguments and the communicator's settings,
        never of pointers, so every rank with the same table plans the same. ``plan(...).takes`` is False
        where the table has NCCL faster (``algo == "nccl"``: ``all_reduce`` then runs NCCL through the group,
        or the two-shot without one), above ``max_size``, and for dtypes other than float16, bfloat16, float32.
        Raises ValueError/TypeError for an unknown codec or algo, as ``all_reduce`` would."""
        return plan_all_reduce(nbytes, dtype, codec if codec is not None else self.codec_for("all_reduce"),
                               table=self.tune_table(), world_size=self.world_size, max_size=self.max_size,
                               one_shot_max_bytes=self._one_shot_max_bytes(), algo=algo)

    def takes(self, x: torch.Tensor, codec: Optional[str] = None) -> bool:
        """Whether quickreduce's kernels take ``all_reduce(x, codec=codec)``: ``x`` is a contiguous tensor on this
        communicator's GPU and ``plan(x.nbytes, x.dtype, codec).takes``. What it reads (device, dtype, shape,
        strides) is the same on every rank of an SPMD program; alignment is not read (a pointer property):
        ``all_reduce`` refuses a tensor whose data is not 16-byte aligned, so pass such a tensor as an aligned
        copy (``x.clone()``)."""
        if not isinstance(x, torch.Tensor) or not x.is_cuda or x.device.index != self.device or not x.is_contiguous():
            return False
        return self.plan(x.numel() * x.element_size(), x.dtype, codec).takes

    def _one_shot_max_bytes(self) -> int:
        return self._c.one_shot_max_bytes if self._c is not None else _C.one_shot_max_bytes(self.world_size)

    def _plan(self, nbytes: int, dtype: torch.dtype, codec: str, algo: str) -> tuple[str, str]:
        """(algo, codec) a launch runs: ``plan_all_reduce`` without the size limit (the caller checks it); a
        table choice of NCCL runs the two-shot where there is no group to run NCCL on."""
        p = plan_all_reduce(nbytes, dtype, codec, table=self.tune_table(), world_size=self.world_size,
                            one_shot_max_bytes=self._one_shot_max_bytes(), algo=algo)
        if p.algo == "nccl" and self.group is None:
            if algo == "nccl":
                raise ValueError("algo='nccl' needs a communicator built from a process group")
            return "two_shot", p.codec
        return p.algo, p.codec

    def tune_table(self):
        """The tuning table behind ``auto`` (loaded once: tuning.load_table)."""
        from . import tuning
        if self._table is None:
            self._table = tuning.load_table(torch.cuda.get_device_name(self.device), self.world_size)
        return self._table

    def _nccl(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist
        if out is not x:
            out.copy_(x)
        dist.all_reduce(out, group=self.group)
        return out

    def _check_tensor(self, t, what: str, dtypes=_DTYPE_IDS) -> None:
        if self._c is None:
            raise QuickReduceError("communicator is closed")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in dtypes:
            raise TypeError(f"{what} has dtype {t.dtype}; quickreduce takes {', '.join(map(str, dtypes))}")
        if not t.is_cuda:
            raise ValueError(f"{what} is on {t.device}; it must be a CUDA tensor on cuda:{self.device}")
        if t.device.index != self.device:
            raise ValueError(f"{what} is on {t.device} but this communicator is on cuda:{self.device}")
        if not t.is_contiguous():
            raise ValueError(f"{what} is not contiguous; call .contiguous() first")
        if t.numel() and t.data_ptr() % 16:
            raise ValueError(f"{what} is not 16-byte aligned (data_ptr % 16 == {t.data_ptr() % 16}, e.g. a view "
                             f"with a storage offset); pass an aligned tensor or a copy")

    # ---- lifetime ----
    def check(self) -> None:
        """Raise PeerTimeoutError or CallMismatchError if an earlier call timed out waiting for a peer or the
        ranks made different calls (kernels report asynchronously)."""
        if self._c is not None:
            self._c.check()

    @property
    def workspace_bytes(self) -> int:
        return self._c.workspace_bytes if self._c is not None else 0

    def close(self) -> None:
        """Free the workspace and peer mappings; later calls raise. Idempotent."""
        if self._c is not None:
            ops.unregister(getattr(self, "_handle", 0))
            self._c.close()
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
