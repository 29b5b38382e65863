"""quickreduce as a ``torch.distributed`` backend: ``import quickreduce.distributed`` registers ``"quickreduce"``.

    import torch.distributed as dist
    import quickreduce.distributed                       # registers the backend (for CUDA tensors)

    dist.init_process_group("cpu:gloo,cuda:quickreduce")  # or: dist.new_group(ranks, backend="quickreduce")
    dist.all_reduce(x)                                    # quickreduce when it takes the call, else the fallback

``dist.all_reduce``, ``dist.reduce_scatter_tensor``, ``dist.all_gather_into_tensor`` and
``dist.all_to_all_single`` on a group of this backend, and the functional collectives DTensor,
``torch.distributed.tensor.parallel`` and ``torch.compile`` use (``torch.distributed._functional_collectives``,
the ``_c10d_functional`` ops, which find the group by name and call the same methods), run through a
quickreduce ``Communicator`` whenever ``route()`` says quickreduce takes the call. Every other call goes
to the fallback backends the group owns, built from the same store: NCCL for CUDA tensors (gloo where
the ranks share a GPU: ``Options.fallback``) and gloo for CPU tensors. The calls quickreduce never
takes (broadcast, barrier, send/recv, gather/scatter/reduce, the list forms, ``allreduce_coalesced``)
go straight to the fallback backend of their tensors' device, by its own bindings (not through torch's
C++ ProcessGroup, whose trampoline for a Python subclass holds the GIL where gloo may wait for it).

What quickreduce takes (``route`` in quickreduce.routing, re-exported here; a pure function of the call's description and the group's limits):
one contiguous CUDA tensor (per side) of float16, bfloat16 or float32 on the communicator's GPU, in a
group of 2-8 ranks on one host; ReduceOp SUM and AVG with every codec, MAX and MIN with an exact codec;
a message (the larger of input and output, with the padding some paths add) of at most ``max_size``;
consistent sizes (all-gather output = W x input, ...). Everything else is the fallback's: integer and
other dtypes, PRODUCT/PREMUL_SUM/bitwise ops, non-contiguous tensors, larger messages, lists of several
tensors. The coalesced forms (``*_coalesced``, which the functional all-gather and reduce-scatter use) are
one call per tensor pair, each routed on its own. A route depends only on what is the same on every
rank of an SPMD program (op, dtype, shapes, strides, the limits), never on pointers: a misaligned tensor,
an all-gather input that lies inside its output (in place, as FSDP does), and the like are staged
through an aligned copy instead of going elsewhere, so every rank makes the same choice.

Results: with the default codec (``QUICKREDUCE_QUANTIZATION`` unset: the exact passthrough; the
all-reduce then runs the fastest exact method, the lossless packing included) an all-reduce or
reduce-scatter is the fp32 sum in rank order rounded once, and all ranks hold identical bits: as exact
as NCCL, differing from NCCL's bits only by NCCL's own summation order and rounding. A lossy codec
comes from ``QUICKREDUCE_QUANTIZATION`` / ``QUICKREDUCE_QUANTIZATION_<COLLECTIVE>`` (read when the group
is created) or ``Options(codecs=...)`` (``pg_options=`` of ``init_process_group``/``new_group``).

Semantics, as torch's backends:
- In place: all_reduce writes into its tensor, the others into their output tensor.
- The work runs on the caller's current CUDA stream (NCCL uses its own). ``Work.wait()`` orders the
  current stream after the stream of the call when they differ (the host never blocks); with
  ``async_op=True`` the result is correct wherever it is waited for, but the collective does not overlap
  later work queued on the same stream (``Communicator`` methods with ``async_op=True`` do).
- The communicator is created by the first call quickreduce takes, on that tensor's GPU (so
  ``torch.cuda.set_device`` may come after ``init_process_group``): its handles cross through the
  group's store, so every rank makes that call, as every collective. Not during CUDA-graph capture:
  make one eager call first, or call ``communicator(group)`` on every rank (``torch.compile``'s
  ``mode="reduce-overhead"`` warms up eagerly, which creates it).
- Errors: a quickreduce failure (``PeerTimeoutError``, ``CallMismatchError``, ``CudaError``, any
  ``QuickReduceError``) is raised as ``torch.distributed.DistBackendError`` (a RuntimeError), argument
  errors as ValueError/TypeError, each with the quickreduce exception as ``__cause__``. Kernels report
  asynchronously: a later call or ``Work.wait()`` raises.
- Counters: ``group.routed[(collective, "quickreduce" | "fallback")]`` counts calls,
  ``group.fallback_reasons[reason]`` why calls went to the fallback.

Torch 2.11 to 2.14: a Python backend is a ``ProcessGroup`` subclass (pybind trampoline), which
``_new_process_group_helper`` takes as the whole group (so a ``"cpu:gloo,"`` prefix builds a gloo backend
torch then drops; this group owns its own). Torch 2.13 renamed ``_allgather_base``,
``_reduce_scatter_base``, ``alltoall_base`` and the coalesced forms (``all_gather_single``, ...); both
spellings are defined. Torch 2.14 added ``gather_single`` (``gather_into_tensor``) and ``reconfigure``
(fault tolerance: a new set of peers, which a quickreduce workspace cannot follow; refused). A
collective a later torch adds gets a forwarder to the fallback backend's binding of the same name
(``_forward_new_collectives``), so no call ever reaches torch's trampoline. torch offers no import-free way to register a backend (its ``torch.backends``
entry points load at every ``import torch`` and turn a failure into a failed import), so the import is
needed.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pickle
import socket
from collections import Counter
from datetime import timedelta
from typing import Optional, Sequence

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

from . import codecs, config
from .comm import Communicator, QuickReduceError
from .backend_work import Work, _WorkList  # noqa: F401 (Work: what the backend's calls return)
from .routing import (COLLECTIVES, DTYPES, MAX_SEGMENT_VALUES, QUICKREDUCE, Limits, Request, Route,  # noqa: F401
                      describe_all_gather, describe_all_reduce, describe_all_to_all, describe_reduce_scatter,
                      message_bytes, reduce_op_label, route)

if not dist.is_available():
    raise ImportError("quickreduce.distributed needs a torch built with torch.distributed")

logger = logging.getLogger(__name__)

BACKEND_NAME = "quickreduce"
FALLBACKS = ("auto", "nccl", "gloo")


# ---------------------------------------------------------------- options
@dataclasses.dataclass
class Options:
    """The options of a quickreduce process group: ``pg_options=`` of ``init_process_group``/``new_group``.

    Attributes:
        fallback: backend for the CUDA calls quickreduce does not take: ``"nccl"``, ``"gloo"`` or ``"auto"``
            (default, else ``QUICKREDUCE_BACKEND_FALLBACK``): NCCL, but gloo where
            ``QUICKREDUCE_ALLOW_SHARED_GPU=1`` (ranks sharing a GPU, which NCCL refuses) or where this torch
            has no NCCL or no CUDA. CPU tensors always go to gloo.
        max_size: the largest message (bytes) quickreduce takes; larger ones go to the fallback. The
            workspace is sized for it (README). Default ``QUICKREDUCE_MAX_SIZE_MB``.
        codecs: per-collective codecs, e.g. ``{"all_reduce": "int8"}`` (keys ``all_reduce``, ``reduce_scatter``,
            ``all_gather``, ``all_to_all``); default ``QUICKREDUCE_QUANTIZATION_<COLLECTIVE>``, else
            ``QUICKREDUCE_QUANTIZATION``, else exact.
        timeout_s: how long a quickreduce kernel waits for a peer (default ``QUICKREDUCE_TIMEOUT_S``).
        nccl_options: a ``ProcessGroupNCCL.Options`` for the NCCL fallback (its timeout becomes the group's).

    ``pg_options`` may also be a ``ProcessGroupNCCL.Options`` (code written for NCCL): it becomes ``nccl_options``.
    """
    fallback: Optional[str] = None
    max_size: Optional[int] = None
    codecs: Optional[dict] = None
    timeout_s: Optional[float] = None
    nccl_options: object = None


def _nccl_usable() -> bool:
    return dist.is_nccl_available() and torch.cuda.is_available()


def resolve_fallback(name: Optional[str]) -> str:
    """``"nccl"`` or ``"gloo"`` from an ``Options.fallback`` (None: ``QUICKREDUCE_BACKEND_FALLBACK``, else auto)."""
    where = "Options.fallback" if name is not None else "QUICKREDUCE_BACKEND_FALLBACK"
    raw = name if name is not None else os.environ.get("QUICKREDUCE_BACKEND_FALLBACK", "")
    if not isinstance(raw, str):
        raise TypeError(f"{where} must be a string, got {type(raw).__name__}")
    raw = raw.strip().lower() or "auto"
    if raw not in FALLBACKS:
        raise ValueError(f"{where}={raw!r}: expected one of {FALLBACKS}")
    if raw == "auto":
        return "gloo" if config.allow_shared_gpu() or not _nccl_usable() else "nccl"
    if raw == "nccl" and not _nccl_usable():
        raise RuntimeError("quickreduce backend: fallback 'nccl' needs a torch with NCCL and a CUDA GPU; "
                           "use fallback='gloo'")
    return raw


def resolve_codecs(given: Optional[dict]) -> dict:
    """Every collective's codec: ``given`` (Options.codecs), else the environment (quickreduce.config)."""
    given = dict(given or {})
    for name, codec in given.items():
        if name not in COLLECTIVES:
            raise ValueError(f"Options.codecs has key {name!r}; keys are {COLLECTIVES}")
        if not isinstance(codec, str):
            raise TypeError(f"Options.codecs[{name!r}] must be a string, got {type(codec).__name__}")
        codecs.parse_codec_request(codec)  # fail now, not at the first call: it raises for unknown names
    return {c: given.get(c) or config.default_codec(c) for c in COLLECTIVES}


def resolve_max_size(max_size: Optional[int]) -> int:
    """Bytes, rounded up to 16 as the Communicator does."""
    size = int(max_size) if max_size is not None else config.max_size_bytes()
    if size <= 0:
        raise ValueError(f"Options.max_size must be positive, got {max_size}")
    return (size + 15) // 16 * 16


# ---------------------------------------------------------------- running a call on the communicator
def _aligned(t: torch.Tensor) -> bool:
    return t.numel() == 0 or t.data_ptr() % 16 == 0


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def _source(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``x`` itself, or an aligned copy where it is misaligned or lies in ``out`` (in-place all-gather)."""
    return x if _aligned(x) and not _overlap(x, out) else x.clone(memory_format=torch.contiguous_format)


def _target(out: torch.Tensor) -> torch.Tensor:
    return out if _aligned(out) else torch.empty_like(out, memory_format=torch.contiguous_format)


def _all_reduce_in_place(comm, t: torch.Tensor, op: str) -> None:
    buf = t if _aligned(t) else t.clone(memory_format=torch.contiguous_format)
    comm.all_reduce(buf, out=buf, op=op)
    if buf is not t:
        t.copy_(buf)


def _reduce_scatter_into(comm, out: torch.Tensor, x: torch.Tensor, op: str) -> None:
    dst = _target(out)
    comm.reduce_scatter(_source(x, out), out=dst, op=op)
    if dst is not out:
        out.copy_(dst)


def _all_gather_into(comm, out: torch.Tensor, x: torch.Tensor) -> None:
    dst = _target(out)
    comm.all_gather(_source(x, out), out=dst)
    if dst is not out:
        out.copy_(dst)


def _all_to_all_into(comm, out: torch.Tensor, x: torch.Tensor, output_split_sizes, input_split_sizes) -> None:
    dst = _target(out)
    comm.all_to_all(_source(x, out), out=dst, output_split_sizes=list(output_split_sizes) or None,
                    input_split_sizes=list(input_split_sizes) or None)
    if dst is not out:
        out.copy_(dst)


def _mapped(exc: BaseException, what: str) -> BaseException:
    """The exception a torch backend user expects for a quickreduce one (which becomes its ``__cause__``)."""
    if isinstance(exc, QuickReduceError):
        return dist.DistBackendError(f"quickreduce backend: {what}: {type(exc).__name__}: {exc}")
    if isinstance(exc, ValueError):
        return ValueError(f"quickreduce backend: {what}: {exc}")
    if isinstance(exc, TypeError):
        return TypeError(f"quickreduce backend: {what}: {exc}")
    return exc


# ---------------------------------------------------------------- the process group
def _store_all_gather(store, rank: int, world_size: int, key: str, value) -> list:
    """Every rank's ``value`` in rank order, through the store (blocks up to the store's timeout)."""
    store.set(f"{key}/{rank}", pickle.dumps(value))
    return [pickle.loads(store.get(f"{key}/{r}")) for r in range(world_size)]


class ProcessGroupQuickreduce(dist.ProcessGroup):
    """The ``"quickreduce"`` backend's process group (module docstring). Built by torch through
    ``init_process_group``/``new_group``; ``ProcessGroupQuickreduce(store, rank, world_size)`` also works.

    Attributes:
        limits: the ``Limits`` its routing uses (world size, max_size, codecs, one host).
        fallback: ``"nccl"`` or ``"gloo"``, the backend of the CUDA calls quickreduce does not take.
        routed: ``Counter`` of calls by ``(collective, "quickreduce" | "fallback")``.
        fallback_reasons: ``Counter`` of ``Route.reason`` over the calls the fallback took.
    """

    DEVICE_TYPE = "cuda"  # whose tensors quickreduce takes (tests subclass it with "cpu")

    def __init__(self, store, rank: int, world_size: int, timeout: timedelta = timedelta(minutes=10),
                 options: Optional[Options] = None, *, group_name: str = "", global_ranks: Optional[list] = None):
        super().__init__(rank, world_size)  # (the (store, rank, size) form makes no Python subclass in 2.13)
        if options is None:
            options = Options()
        elif _c10d_nccl_options_type() is not None and isinstance(options, _c10d_nccl_options_type()):
            options = Options(nccl_options=options)
        elif not isinstance(options, Options):
            raise TypeError(f"quickreduce backend: pg_options must be quickreduce.distributed.Options "
                            f"(or ProcessGroupNCCL.Options), got {type(options).__name__}")
        self.qr_options = options
        self.fallback = resolve_fallback(options.fallback)
        self._store = dist.PrefixStore("quickreduce", store)
        hosts = _store_all_gather(self._store, rank, world_size, "hosts", socket.gethostname())
        self.limits = Limits(world_size=world_size, max_size=resolve_max_size(options.max_size),
                             codecs=resolve_codecs(options.codecs), single_host=len(set(hosts)) == 1,
                             device_type=self.DEVICE_TYPE)
        self._timeout_s = options.timeout_s
        self._comm: Optional[Communicator] = None
        self._comm_device: Optional[torch.device] = None
        self.routed: Counter = Counter()
        self.fallback_reasons: Counter = Counter()
        self._routes: dict = {}
        self._backends = self._make_fallbacks(store, rank, world_size, timeout, options, group_name,
                                              list(global_ranks or []))

    # ---- fallbacks
    def _make_fallbacks(self, store, rank, world_size, timeout, options, group_name, global_ranks) -> dict:
        BT = dist.ProcessGroup.BackendType
        gloo = _c10d.ProcessGroupGloo(dist.PrefixStore("gloo", store), rank, world_size, timeout)
        gloo._set_sequence_number_for_group()
        backends = {"cpu": (BT.GLOO, gloo), "cuda": (BT.GLOO, gloo)}
        if self.fallback == "nccl":
            nccl_options = options.nccl_options
            if nccl_options is None:
                nccl_options = _c10d.ProcessGroupNCCL.Options()
                nccl_options.is_high_priority_stream = False
            nccl_options._timeout = timeout
            nccl_options.global_ranks_in_group = global_ranks
            nccl_options.group_name = group_name
            nccl = _c10d.ProcessGroupNCCL(dist.PrefixStore("nccl", store), rank, world_size, nccl_options)
            nccl._set_sequence_number_for_group()
            backends["cuda"] = (BT.NCCL, nccl)
        for device, (kind, backend) in backends.items():
            self._register_backend(torch.device(device), kind, backend)
        self._set_default_backend(backends["cuda"][0])
        return {device: backend for device, (_, backend) in backends.items()}

    def _fallback_call(self, collective: str, method: str, device_type: str, why: Route, *args):
        self.routed[(collective, "fallback")] += 1
        self.fallback_reasons[why.reason] += 1
        if self.fallback_reasons[why.reason] == 1:
            logger.info("quickreduce backend: %s of %s goes to the fallback: %s", collective, device_type, why.detail)
        return getattr(self._backend_of(device_type, collective), method)(*args)

    # ---- the communicator
    @property
    def communicator(self) -> Optional[Communicator]:
        """The quickreduce Communicator once a call created it (``quickreduce.distributed.communicator()``
        creates it); None before."""
        return self._comm

    def _communicator_for(self, device: torch.device) -> Communicator:
        if self._comm is None:
            if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                raise dist.DistBackendError(
                    "quickreduce backend: the first call quickreduce takes creates its communicator, which "
                    "cannot happen during CUDA-graph capture; make one eager call first, or call "
                    "quickreduce.distributed.communicator(group) on every rank before capturing")
            self._comm = self._make_communicator(device)
            self._comm_device = device
        return self._comm

    def _make_communicator(self, device: torch.device) -> Communicator:
        """Allocate this rank's workspace on ``device`` and map the peers', exchanging the handles through
        the store. Each step reports success or failure to every rank, so no rank waits for a failed one."""
        generation = (self._store.add("communicators", 1) - 1) // self.size()  # each rank adds once per communicator
        key = f"communicator{generation}"
        made: list = []

        def create() -> dict:
            with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():
                made.append(Communicator(rank=self.rank(), world_size=self.size(), max_size=self.limits.max_size,
                                         timeout_s=self._timeout_s, codecs=dict(self.limits.codecs)))
            return made[0].peer_info()

        try:
            everyone = self._step(key + "/peers", create)
            self._step(key + "/connected", lambda: made[0].connect(everyone))
        except BaseException:
            if made:
                made[0].close()
            raise
        return made[0]

    def _step(self, key: str, fn) -> list:
        """``fn()`` on every rank, results gathered through the store; raises this rank's own exception, or
        a DistBackendError naming the first rank whose ``fn`` failed."""
        try:
            mine, error = {"ok": fn()}, None
        except Exception as e:  # noqa: BLE001  (raised below, once the peers know)
            mine, error = {"error": f"{type(e).__name__}: {e}"}, e
        everyone = _store_all_gather(self._store, self.rank(), self.size(), key, mine)
        if error is not None:
            raise error
        for r, info in enumerate(everyone):
            if "error" in info:
                raise dist.DistBackendError(f"quickreduce backend: rank {r} could not create its communicator: "
                                            f"{info['error']}")
        return [info["ok"] for info in everyone]

    def _check_communicator(self) -> None:
        if self._comm is not None:
            try:
                self._comm.check()
            except QuickReduceError as e:
                raise _mapped(e, f"an earlier call on rank {self.rank()}") from e

    def _route(self, req: Request) -> Route:
        """``route(req, self.limits)``, remembered (a model makes the same few calls over and over)."""
        where = self._routes.get(req)
        if where is None:
            if len(self._routes) >= 4096:
                self._routes.clear()
            where = self._routes[req] = route(req, self.limits)
        return where

    def _run(self, collective: str, device: torch.device, body, result: list) -> Work:
        grad = torch.is_grad_enabled()
        try:
            comm = self._communicator_for(device)
            if grad:
                torch.set_grad_enabled(False)  # the collectives are not differentiable; AVG divides in place
            body(comm)
        except (QuickReduceError, ValueError, TypeError) as e:
            raise _mapped(e, f"{collective} on rank {self.rank()}") from e
        finally:
            if grad:
                torch.set_grad_enabled(True)
        self.routed[(collective, "quickreduce")] += 1
        return Work(self, result, torch.cuda.current_stream(device) if device.type == "cuda" else None)

    # ---- the collectives quickreduce may take (both spellings of torch 2.11 and 2.13)
    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        req = describe_all_reduce(tensors, opts.reduceOp, self._comm_device)
        where = self._route(req)
        if not where.quickreduce:
            return self._fallback_call("all_reduce", "allreduce", req.device_type, where, tensors, opts)
        t = tensors[0]
        return self._run("all_reduce", t.device, lambda comm: _all_reduce_in_place(comm, t, req.op), [t])

    def _reduce_scatter_base(self, output, input, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        req = describe_reduce_scatter(output, input, opts.reduceOp, self._comm_device)
        where = self._route(req)
        if not where.quickreduce:
            return self._fallback_call("reduce_scatter", "_reduce_scatter_base", req.device_type, where,
                                       output, input, opts)
        return self._run("reduce_scatter", output.device,
                         lambda comm: _reduce_scatter_into(comm, output, input, req.op), [output])

    def _allgather_base(self, output, input, opts=None):
        opts = opts if opts is not None else _c10d.AllgatherOptions()
        req = describe_all_gather(output, input, self._comm_device)
        where = self._route(req)
        if not where.quickreduce:
            return self._fallback_call("all_gather", "_allgather_base", req.device_type, where, output, input, opts)
        return self._run("all_gather", output.device, lambda comm: _all_gather_into(comm, output, input), [output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        req = describe_all_to_all(output, input, output_split_sizes, input_split_sizes, self._comm_device)
        where = self._route(req)
        if not where.quickreduce:
            return self._fallback_call("all_to_all", "alltoall_base", req.device_type, where, output, input,
                                       output_split_sizes, input_split_sizes, opts)
        return self._run("all_to_all", output.device,
                         lambda comm: _all_to_all_into(comm, output, input, req.output_split_sizes,
                                                       req.input_split_sizes), [output])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        _same_length(outputs, inputs, "all_gather")
        opts = opts if opts is not None else _c10d.AllgatherOptions()
        return _WorkList([self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs)], list(outputs))

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        _same_length(outputs, inputs, "reduce_scatter")
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        return _WorkList([self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)], list(outputs))

    # torch 2.13's names (2.11 calls the ones above)
    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    # ---- the calls quickreduce never takes, each straight to the backend of its tensors' device.
    # Not left to torch's ProcessGroup: for a Python subclass its C++ trampoline (PyProcessGroup's
    # WORK_OVERRIDE) runs the base implementation while it holds the GIL, and a gloo worker thread
    # that frees a finished call's tensors takes the GIL while it holds the lock a new call waits for:
    # a deadlock (one rank stuck in the call itself; caught by gdb under load on the CPU). The
    # backends' own bindings release the GIL.
    def _backend_for(self, tensors, collective: str):
        """The fallback backend of the device of ``tensors`` (a tensor, or a list whose first is one)."""
        t = tensors if isinstance(tensors, torch.Tensor) else tensors[0]
        return self._backend_of(t.device.type, collective)

    def _backend_of(self, device_type: str, collective: str):
        backend = self._backends.get(device_type)
        if backend is None:
            raise ValueError(f"quickreduce backend: no backend for {device_type} tensors ({collective}); "
                             f"this group has {sorted(self._backends)}")
        return backend

    # Each takes what torch's ProcessGroup method takes, positional or keyword (the backends' bindings
    # use the same names), and picks the backend by its input tensor(s).
    def allgather(self, output_tensors, input_tensors, *args, **kwargs):
        return self._backend_for(input_tensors, "all_gather").allgather(output_tensors, input_tensors, *args, **kwargs)

    def allgather_coalesced(self, output_lists, input_list, *args, **kwargs):
        return self._backend_for(input_list, "all_gather").allgather_coalesced(output_lists, input_list, *args,
                                                                               **kwargs)

    def allreduce_coalesced(self, tensors, *args, **kwargs):
        return self._backend_for(tensors, "all_reduce").allreduce_coalesced(tensors, *args, **kwargs)

    def alltoall(self, output_tensors, input_tensors, *args, **kwargs):
        return self._backend_for(input_tensors, "all_to_all").alltoall(output_tensors, input_tensors, *args, **kwargs)

    def broadcast(self, tensors, *args, **kwargs):
        return self._backend_for(tensors, "broadcast").broadcast(tensors, *args, **kwargs)

    def reduce(self, tensors, *args, **kwargs):
        return self._backend_for(tensors, "reduce").reduce(tensors, *args, **kwargs)

    def gather(self, output_tensors, input_tensors, *args, **kwargs):
        return self._backend_for(input_tensors, "gather").gather(output_tensors, input_tensors, *args, **kwargs)

    def scatter(self, output_tensors, input_tensors, *args, **kwargs):
        return self._backend_for(output_tensors, "scatter").scatter(output_tensors, input_tensors, *args, **kwargs)

    def reduce_scatter(self, output_tensors, input_tensors, *args, **kwargs):
        return self._backend_for(output_tensors, "reduce_scatter").reduce_scatter(output_tensors, input_tensors,
                                                                                  *args, **kwargs)

    def send(self, tensors, *args, **kwargs):
        return self._backend_for(tensors, "send").send(tensors, *args, **kwargs)

    def recv(self, tensors, *args, **kwargs):
        return self._backend_for(tensors, "recv").recv(tensors, *args, **kwargs)

    def recv_anysource(self, tensors, *args, **kwargs):
        return self._backend_for(tensors, "recv").recv_anysource(tensors, *args, **kwargs)

    # torch 2.14's (older torch has neither, and never calls them)
    def gather_single(self, output, input, *args, **kwargs):
        return self._backend_for(input, "gather").gather_single(output, input, *args, **kwargs)

    def gather_into_tensor(self, output, input, *args, **kwargs):
        return self._backend_for(input, "gather").gather_into_tensor(output, input, *args, **kwargs)

    def reconfigure(self, *args, **kwargs):
        raise NotImplementedError("quickreduce backend: reconfigure (a new set of peers) is not supported: the "
                                  "quickreduce workspace is mapped between a fixed set of ranks; create a new group")

    def barrier(self, opts=None, timeout=None):
        """On the device ``opts.device`` names, else where torch's ProcessGroup puts it: CUDA when the
        fallback is NCCL, else CPU. ``barrier(timeout)`` (a timedelta) as torch's second form."""
        if isinstance(opts, timedelta):
            opts, timeout = None, opts
        opts = opts if opts is not None else dist.BarrierOptions()
        if timeout is not None:
            opts.timeout = timeout
        device = getattr(opts, "device", None)
        kind = device.type if device is not None else "cuda" if self.fallback == "nccl" else "cpu"
        return self._backend_of(kind if kind in self._backends else "cpu", "barrier").barrier(opts)

    def _start_coalescing(self, device):
        return self._backend_of(torch.device(device).type, "coalescing")._start_coalescing()

    def _end_coalescing(self, device):
        return self._backend_of(torch.device(device).type, "coalescing")._end_coalescing()

    def monitored_barrier(self, *args, **kwargs):
        return self._backends["cpu"].monitored_barrier(*args, **kwargs)  # gloo only, as torch's

    # ---- identity and lifetime
    def getBackendName(self) -> str:
        return BACKEND_NAME

    def close_communicator(self) -> None:
        """Free the quickreduce workspace (a later call quickreduce takes creates a new one)."""
        if self._comm is not None:
            comm, self._comm, self._comm_device = self._comm, None, None
            comm.close()

    def shutdown(self) -> None:
        self.close_communicator()
        super().shutdown()

    def abort(self) -> None:
        self.close_communicator()
        super().abort()

    def __repr__(self) -> str:
        return (f"ProcessGroupQuickreduce(rank={self.rank()}, world_size={self.size()}, fallback={self.fallback!r}, "
                f"max_size={self.limits.max_size}, communicator={'on ' + str(self._comm_device) if self._comm else 'not yet'})")


def _first_tensor(args) -> Optional[torch.Tensor]:
    """The first tensor in ``args``, looking into lists (a list of tensors, a list of lists)."""
    for arg in args:
        if isinstance(arg, torch.Tensor):
            return arg
        if isinstance(arg, (list, tuple)):
            found = _first_tensor(arg)
            if found is not None:
                return found
    return None


def _forwarder(name: str):
    """A method forwarding collective ``name`` to the binding of the same name of the fallback backend
    of its tensors' device (the default device's when it takes none, as ``barrier``)."""
    def forward(self, *args, **kwargs):
        t = _first_tensor(list(args) + list(kwargs.values()))
        kind = t.device.type if t is not None else "cuda" if self.fallback == "nccl" else "cpu"
        return getattr(self._backend_of(kind, name), name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = f"torch's ``{name}``, forwarded to the fallback backend (torch added it after this module)."
    return forward


def _torch_collectives() -> list[str]:
    """Names of torch's ProcessGroup methods that start a collective (they return a ``c10d::Work``)."""
    return [name for name in dir(dist.ProcessGroup) if not name.startswith("__")
            and "-> c10d::Work" in (getattr(getattr(dist.ProcessGroup, name), "__doc__", None) or "")]


def _forward_new_collectives(cls: type) -> list[str]:
    """Give ``cls`` a forwarder for every collective of this torch's ProcessGroup it does not define
    (one a torch newer than this module added); return their names."""
    ours = cls.__mro__[:cls.__mro__.index(dist.ProcessGroup)]  # the Python classes above torch's
    added = [name for name in _torch_collectives() if not any(name in vars(k) for k in ours)]
    for name in added:
        setattr(cls, name, _forwarder(name))
    return added


_ADDED_COLLECTIVES = _forward_new_collectives(ProcessGroupQuickreduce)


def _same_length(outputs, inputs, what: str) -> None:
    if len(outputs) != len(inputs):
        raise ValueError(f"quickreduce backend: coalesced {what} of {len(inputs)} inputs into {len(outputs)} outputs")


def _c10d_nccl_options_type():
    nccl = getattr(_c10d, "ProcessGroupNCCL", None)
    return getattr(nccl, "Options", None)


# ---------------------------------------------------------------- registration and helpers
def register(name: str = BACKEND_NAME, cls: type = ProcessGroupQuickreduce, devices: Sequence[str] = ("cuda",)) -> None:
    """Register ``cls`` as torch.distributed backend ``name`` for ``devices`` (done for "quickreduce" on import;
    the tests register a CPU variant under another name). Registering a name twice is an error."""
    if name.upper() in dist.Backend._plugins:
        raise ValueError(f"a torch.distributed backend named {name!r} is already registered")

    def create(common, options):
        return cls(common.store, common.group_rank, common.group_size, common.timeout, options,
                   group_name=str(common.group_id), global_ranks=list(common.global_ranks_in_group))

    dist.Backend.register_backend(name, create, extended_api=True, devices=list(devices))


def _group(group) -> ProcessGroupQuickreduce:
    pg = group if group is not None else dist.group.WORLD
    if not isinstance(pg, ProcessGroupQuickreduce):
        raise TypeError(f"{pg!r} is not a quickreduce process group (init_process_group/new_group with "
                        f"backend 'quickreduce')")
    return pg


def communicator(group=None) -> Communicator:
    """The quickreduce Communicator of a ``"quickreduce"`` group (default: WORLD), created now on the current
    CUDA device if no call has created it yet: collective, every rank of the group calls it. For CUDA-graph
    capture (create it before) and for explicit calls with other codecs on the same workspace."""
    return _group(group)._communicator_for(torch.device("cuda", torch.cuda.current_device()))


if BACKEND_NAME.upper() not in dist.Backend._plugins:
    register()
