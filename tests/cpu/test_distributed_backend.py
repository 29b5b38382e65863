"""The torch.distributed backend (quickreduce/distributed.py) on the CPU.

- ``route``, the pure function that sends each call to quickreduce or to the fallback, checked over
  every combination of the properties it looks at against the list of requirements below (the spec),
  plus the size boundaries with worked numbers, ``describe_*`` on real tensors, and the options.
- Registration, and a group in this process (rank 0 of two, its peer absent): options, hosts, the
  route cache, no communicator created during CUDA-graph capture.
- Two spawned ranks (FileStore, seconds): ``init_process_group("cpu:gloo,cuda:quickreduce")`` and
  ``new_group(backend="quickreduce")`` with the real backend (no GPU: every call goes to gloo), and a
  CPU variant of the backend (``SimProcessGroup``, registered as ``"qrsim"`` for CPU tensors) whose
  communicator is the real ``Communicator`` over ``StoreSimC``: the kernels' exact-codec arithmetic and
  size checks, each call's inputs exchanged through the store. Through it: ``dist.*`` collectives,
  the functional collectives (eager and under ``torch.compile(backend="aot_eager")``), a DTensor
  ``RowwiseParallel`` linear, the fallbacks, work objects and error mapping.

GPU behaviour (streams, kernels, NCCL) is in tests/gpu/test_backend_gpu.py.
"""
from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import itertools
import json
import os
import pickle
import socket
import tempfile
import traceback
from datetime import timedelta
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import quickreduce.distributed as qd
from quickreduce import _C, tuning
from quickreduce.comm import Communicator

RO = dist.ReduceOp
FLOATS = (torch.float16, torch.bfloat16, torch.float32)
EXACT = {c: "fp16" for c in qd.COLLECTIVES}


# ================================================================ route: a pure function
def limits(W=4, max_size=1 << 20, codecs=None, single_host=True):
    return qd.Limits(world_size=W, max_size=max_size, codecs=dict(codecs or EXACT), single_host=single_host)


def fitting(collective, W, dtype=torch.bfloat16, op="sum", n=4096, **kw) -> qd.Request:
    """A request with consistent sizes: n values (all-to-all: 8 rows of n/8 a rank)."""
    if collective == "all_reduce":
        base = dict(in_numel=n, out_numel=n, op=op)
    elif collective == "reduce_scatter":
        base = dict(in_numel=W * n, out_numel=n, op=op)
    elif collective == "all_gather":
        base = dict(in_numel=n, out_numel=W * n)
    else:
        base = dict(in_numel=W * n, out_numel=W * n, in_rows=8 * W, out_rows=8 * W, in_row_numel=n // 8,
                    out_row_numel=n // 8)
    base.update(kw)
    return qd.Request(collective, dtype=dtype, **base)


def _exact(codec):
    name = codec.lower()
    return name == "auto" or name.removeprefix("auto:") in ("fp16", "bf16", "fp32", "none", "lossless")


# The spec: quickreduce takes a call exactly when every requirement holds; otherwise the reason is the
# first failing requirement's label (checked in this order).
REQUIREMENTS = [
    ("world size", lambda q, l: 2 <= l.world_size <= 8),
    ("several hosts", lambda q, l: l.single_host),
    ("tensor count", lambda q, l: q.tensors == 1),
    ("device", lambda q, l: q.device_type == "cuda"),
    ("dtype", lambda q, l: q.dtype in FLOATS),
    ("non-contiguous", lambda q, l: q.contiguous),
    ("ReduceOp", lambda q, l: q.collective not in ("all_reduce", "reduce_scatter") or q.op in ("sum", "avg", "max", "min")),
    ("MAX/MIN with a lossy codec", lambda q, l: q.op not in ("max", "min") or _exact(l.codecs[q.collective])),
    ("over max_size", lambda q, l: qd.message_bytes(q, l.world_size) <= l.max_size),
]


def _grid():
    reducing = ["sum", "avg", "max", "min", "product", "premul_sum"]
    calls = [(c, op) for c in ("all_reduce", "reduce_scatter") for op in reducing] + \
            [("all_gather", None), ("all_to_all", None)]
    codecs = ["fp16", "lossless", "auto", "auto:bf16", "int4", "fp8", "auto:int4"]
    dtypes = [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.float64]
    for (collective, op), codec, dtype, tensors, device, contiguous, W, single_host, big in itertools.product(
            calls, codecs, dtypes, (1, 2), ("cuda", "cpu"), (True, False), (1, 2, 3, 8, 9), (True, False),
            (False, True)):
        W_ok = max(W, 1)
        req = fitting(collective, W_ok, dtype, op=op, n=4096, tensors=tensors, device_type=device,
                      contiguous=contiguous)
        lim = limits(W, max_size=(1 << 10) if big else (1 << 20), codecs={**EXACT, collective: codec},
                     single_host=single_host)
        yield req, lim


def test_route_is_the_requirements_exhaustively():
    count = 0
    for req, lim in _grid():
        failing = [label for label, holds in REQUIREMENTS if not holds(req, lim)]
        got = qd.route(req, lim)
        assert got.quickreduce == (not failing), (req, lim, got, failing)
        if failing:
            assert got.reason.startswith(failing[0]) and got.detail, (req, lim, got, failing)
        else:
            assert got == qd.QUICKREDUCE
        count += 1
    assert count > 50_000


@pytest.mark.parametrize("W", [2, 3, 4, 8])
def test_route_sizes_must_be_consistent(W):
    lim = limits(W)
    assert qd.route(fitting("reduce_scatter", W, in_numel=W * 10 + 1, out_numel=10), lim).reason == "sizes"
    assert qd.route(fitting("all_gather", W, in_numel=10, out_numel=W * 10 - 1), lim).reason == "sizes"
    assert qd.route(fitting("all_reduce", W, in_numel=10, out_numel=11), lim).reason == "sizes"
    a2a = dict(in_rows=4 * W, out_rows=4 * W, in_row_numel=3, out_row_numel=3, in_numel=12 * W, out_numel=12 * W)
    assert qd.route(fitting("all_to_all", W, **a2a), lim).quickreduce
    for bad in (dict(in_row_numel=4),                                  # rows of different sizes
                dict(in_rows=4 * W + 1, out_rows=4 * W + 1),            # even splits need dim 0 % W == 0
                dict(out_rows=4 * W - W),                               # even splits, different row counts
                dict(input_split_sizes=(1,) * (W + 1)),                  # one size per rank
                dict(input_split_sizes=(4 * W + 1,) + (-1,) + (0,) * (W - 2)),  # negative
                dict(output_split_sizes=(1,) * W)):                     # sizes that do not add up to dim 0
        assert qd.route(fitting("all_to_all", W, **{**a2a, **bad}), lim).reason == "sizes", bad
    uneven = dict(input_split_sizes=tuple(range(W)), output_split_sizes=(W - 1,) * W,
                  in_rows=W * (W - 1) // 2, out_rows=W * (W - 1), in_numel=3 * W * (W - 1) // 2,
                  out_numel=3 * W * (W - 1))
    assert qd.route(fitting("all_to_all", W, **{**a2a, **uneven}), lim).quickreduce
    one_side = dict(input_split_sizes=(), output_split_sizes=(4 * W,) + (0,) * (W - 1))
    assert qd.route(fitting("all_to_all", W, **{**a2a, **one_side}), lim).quickreduce


def test_route_other_refusals():
    lim = limits(4)
    assert qd.route(fitting("all_reduce", 4, on_comm_device=False), lim).reason == "other GPU"
    assert qd.route(fitting("all_gather", 4, dtype=None), lim).reason == "dtype"
    assert qd.route(qd.Request("broadcast"), lim).reason == "collective"
    assert qd.route(fitting("all_reduce", 4, n=0), lim).quickreduce  # empty: quickreduce returns at once
    assert qd.route(fitting("all_to_all", 4, in_rows=0, out_rows=0, in_numel=0, out_numel=0), lim).quickreduce


@pytest.mark.parametrize("collective", qd.COLLECTIVES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_route_size_boundary(collective, dtype):
    """A message of exactly max_size goes to quickreduce, 16 bytes less of max_size sends it to the fallback."""
    W = 4
    req = fitting(collective, W, dtype, n=1024)
    nbytes = qd.message_bytes(req, W)
    elt = torch.empty((), dtype=dtype).element_size()
    assert nbytes == (1024 if collective == "all_reduce" else W * 1024) * elt  # no padding at these sizes
    assert qd.route(req, limits(W, max_size=nbytes)).quickreduce
    assert qd.route(req, limits(W, max_size=nbytes - 16)).reason == "over max_size"


def test_message_bytes_counts_the_padding():
    """The paths that pad: fp32 all-reduce (W chunks of 32 * ceil(n / 32W) values) and MAX/MIN all-reduce
    (W chunks of ceil(n / W) rounded up to 8): their scratch must fit max_size too."""
    # fp32, n=100, W=8: chunks of 32 values, 256 values = 1024 bytes although the tensor is 400 bytes
    assert _C.fp32_all_reduce_chunk(100, 8) == 32
    fp32 = fitting("all_reduce", 8, torch.float32, n=100)
    assert qd.message_bytes(fp32, 8) == 1024
    assert qd.route(fp32, limits(8, max_size=1024)).quickreduce
    assert qd.route(fp32, limits(8, max_size=1008)).reason == "over max_size"
    # bf16 MAX, n=9, W=4: chunks of 8 values, 32 values = 64 bytes for an 18-byte tensor
    mx = fitting("all_reduce", 4, torch.bfloat16, op="max", n=9)
    assert qd.message_bytes(mx, 4) == 64
    assert qd.route(mx, limits(4, max_size=64)).quickreduce
    assert qd.route(mx, limits(4, max_size=48)).reason == "over max_size"
    assert qd.message_bytes(fitting("all_reduce", 4, torch.bfloat16, op="sum", n=9), 4) == 18
    # all-to-all: the larger side
    a2a = fitting("all_to_all", 2, torch.float16, input_split_sizes=(1, 1), output_split_sizes=(5, 5),
                  in_rows=2, out_rows=10, in_row_numel=3, out_row_numel=3, in_numel=6, out_numel=30)
    assert qd.message_bytes(a2a, 2) == 60


# ================================================================ describe_* on real tensors
def test_describe_all_reduce():
    t = torch.zeros(6, 4, dtype=torch.bfloat16)
    req = qd.describe_all_reduce([t], RO.SUM)
    assert (req.collective, req.op, req.in_numel, req.out_numel, req.dtype, req.device_type, req.contiguous,
            req.tensors) == ("all_reduce", "sum", 24, 24, torch.bfloat16, "cpu", True, 1)
    assert qd.describe_all_reduce([t.t()], RO.SUM).contiguous is False
    assert qd.describe_all_reduce([t, t], RO.SUM).tensors == 2
    labels = {RO.AVG: "avg", RO.MAX: "max", RO.MIN: "min", RO.PRODUCT: "product", RO.BAND: "band"}
    for op, label in labels.items():
        assert qd.describe_all_reduce([t], op).op == label
    opts = dist.AllreduceOptions()
    assert qd.describe_all_reduce([t], opts.reduceOp).op == "sum"  # the default
    opts.reduceOp = RO.MAX
    assert qd.describe_all_reduce([t], opts.reduceOp).op == "max"  # a ReduceOp object, as torch passes it
    assert qd.describe_all_reduce([t], dist._make_nccl_premul_sum(2.0)).op == "premul_sum"
    assert qd.describe_all_reduce([t], RO.SUM, comm_device=torch.device("cuda", 1)).on_comm_device is False
    assert qd.describe_all_reduce([t], RO.SUM, comm_device=torch.device("cpu")).on_comm_device is True


def test_describe_the_others():
    x, out = torch.zeros(4, 3), torch.zeros(8, 3)
    assert qd.describe_all_gather(out, x).in_numel == 12 and qd.describe_all_gather(out, x).out_numel == 24
    assert qd.describe_all_gather(out.half(), x).dtype is None
    rs = qd.describe_reduce_scatter(x, out, RO.AVG)
    assert (rs.in_numel, rs.out_numel, rs.op) == (24, 12, "avg")
    a2a = qd.describe_all_to_all(out, torch.zeros(6, 3), [4, 4], [2, 4])
    assert (a2a.in_rows, a2a.out_rows, a2a.in_row_numel, a2a.out_row_numel) == (6, 8, 3, 3)
    assert (a2a.input_split_sizes, a2a.output_split_sizes) == ((2, 4), (4, 4))
    assert qd.describe_all_to_all(out, x, [], []).input_split_sizes == ()
    assert qd.describe_all_to_all(torch.zeros(0, 5), torch.zeros(0, 5), [], []).in_row_numel == 5
    assert qd.describe_all_to_all(torch.zeros(()), torch.zeros(()), [], []).contiguous is False
    assert qd.describe_all_to_all(out.t(), x, [], []).contiguous is False


# ================================================================ staging (rank-independent routes)
class RecordingComm:
    """Records whether each call got 16-byte aligned, non-overlapping tensors; doubles the data."""

    def __init__(self):
        self.calls = []

    def all_reduce(self, x, out, op):
        self.calls.append(("all_reduce", x.data_ptr() % 16, out is x))
        out.mul_(2)

    def all_gather(self, x, out):
        self.calls.append(("all_gather", x.data_ptr() % 16, out.data_ptr() % 16, qd._overlap(x, out)))
        out.copy_(torch.cat([x, x]))


def test_misaligned_and_overlapping_tensors_are_staged():
    comm = RecordingComm()
    base = torch.arange(10, dtype=torch.float16)
    view = base[1:9]  # 2 bytes past an aligned start
    assert view.data_ptr() % 16 == 2
    qd._all_reduce_in_place(comm, view, "sum")
    assert comm.calls[-1] == ("all_reduce", 0, True)
    assert base.tolist() == [0] + [2.0 * i for i in range(1, 9)] + [9]  # written back in place, nothing else
    out = torch.zeros(16, dtype=torch.float16)
    inside = out[8:]  # an in-place all-gather: the input is this rank's block of the output
    inside.copy_(torch.arange(8))
    qd._all_gather_into(comm, out, inside)
    assert comm.calls[-1] == ("all_gather", 0, 0, False)
    assert out.tolist() == list(range(8)) * 2
    ragged = torch.zeros(17, dtype=torch.float16)[1:]
    qd._all_gather_into(comm, ragged, torch.ones(8, dtype=torch.float16))
    assert comm.calls[-1][2] == 0 and ragged.tolist() == [1.0] * 16


def test_every_collective_is_a_python_method():
    """No call reaches torch's C++ ProcessGroup implementation through the Python-subclass trampoline,
    which holds the GIL while gloo may wait for it (a deadlock, distributed.py): every collective the
    gloo backend has is a method of ProcessGroupQuickreduce itself, and every one it forwards goes to
    the backend's own binding."""
    collectives = {name for name in dir(dist.ProcessGroup) if hasattr(dist.ProcessGroupGloo, name)
                   and "-> c10d::Work" in (getattr(dist.ProcessGroup, name).__doc__ or "")}
    assert {"allgather", "barrier", "broadcast", "send", "recv", "alltoall", "gather", "scatter"} <= collectives
    missing = sorted(name for name in collectives if name not in vars(qd.ProcessGroupQuickreduce))
    assert not missing, f"collectives left to torch's GIL-holding trampoline: {missing}"

    calls = []

    class Backend:  # records which method each forwarded call reached, and with what
        def __getattr__(self, name):
            return lambda *args, **kwargs: calls.append((name, args, kwargs)) or name

    PG = qd.ProcessGroupQuickreduce  # its methods on a stand-in self (a real group needs peers)
    pg = SimpleNamespace(_backends={"cpu": Backend(), "cuda": Backend()}, fallback="gloo")
    pg._backend_of = lambda kind, collective: PG._backend_of(pg, kind, collective)
    pg._backend_for = lambda tensors, collective: PG._backend_for(pg, tensors, collective)
    t = torch.zeros(2)
    assert PG.broadcast(pg, [t], dist.BroadcastOptions()) == "broadcast"
    assert PG.broadcast(pg, torch.tensor(1.0), 0) == "broadcast"  # the single-tensor form, 0-dim
    assert PG.allgather(pg, [[t, t]], [t]) == "allgather"
    assert PG.scatter(pg, [t], [], dist.ScatterOptions()) == "scatter"
    assert PG.send(pg, [t], 1, tag=3) == "send" and calls[-1][2] == {"tag": 3}  # as torch's checkpointing calls it
    assert PG.recv_anysource(pg, [t], 0) == "recv_anysource"
    assert PG.barrier(pg, opts=dist.BarrierOptions()) == "barrier" and PG.barrier(pg) == "barrier"
    assert PG.barrier(pg, timedelta(seconds=7)) == "barrier" and calls[-1][1][0].timeout == timedelta(seconds=7)
    assert PG._end_coalescing(pg, torch.device("cpu")) == "_end_coalescing"
    for call in (lambda: PG.broadcast(pg, [torch.zeros(2, device="meta")], dist.BroadcastOptions()),
                 lambda: PG._start_coalescing(pg, torch.device("meta"))):
        with pytest.raises(ValueError, match="no backend for meta tensors"):
            call()


# ================================================================ options
def test_fallback_choice(monkeypatch):
    monkeypatch.delenv("QUICKREDUCE_BACKEND_FALLBACK", raising=False)
    monkeypatch.delenv("QUICKREDUCE_ALLOW_SHARED_GPU", raising=False)
    monkeypatch.setattr(qd, "_nccl_usable", lambda: True)
    assert qd.resolve_fallback(None) == "nccl"
    assert qd.resolve_fallback("gloo") == "gloo"
    monkeypatch.setenv("QUICKREDUCE_ALLOW_SHARED_GPU", "1")  # ranks share a GPU: NCCL refuses that
    assert qd.resolve_fallback(None) == "gloo" and qd.resolve_fallback("AUTO") == "gloo"
    assert qd.resolve_fallback("nccl") == "nccl"  # asked for: NCCL's own error will say why
    monkeypatch.setenv("QUICKREDUCE_BACKEND_FALLBACK", "gloo")
    monkeypatch.delenv("QUICKREDUCE_ALLOW_SHARED_GPU")
    assert qd.resolve_fallback(None) == "gloo"
    monkeypatch.setenv("QUICKREDUCE_BACKEND_FALLBACK", "mpi")
    with pytest.raises(ValueError, match="QUICKREDUCE_BACKEND_FALLBACK"):
        qd.resolve_fallback(None)
    with pytest.raises(ValueError, match="Options.fallback"):
        qd.resolve_fallback("ucc")
    monkeypatch.setattr(qd, "_nccl_usable", lambda: False)
    monkeypatch.delenv("QUICKREDUCE_BACKEND_FALLBACK")
    assert qd.resolve_fallback(None) == "gloo"
    with pytest.raises(RuntimeError, match="fallback='gloo'"):
        qd.resolve_fallback("nccl")


def test_codecs_and_max_size(monkeypatch):
    for c in qd.COLLECTIVES:
        monkeypatch.delenv("QUICKREDUCE_QUANTIZATION_" + c.upper(), raising=False)
    monkeypatch.delenv("QUICKREDUCE_QUANTIZATION", raising=False)
    assert qd.resolve_codecs(None) == EXACT  # exact by default
    monkeypatch.setenv("QUICKREDUCE_QUANTIZATION", "INT8")
    monkeypatch.setenv("QUICKREDUCE_QUANTIZATION_ALL_TO_ALL", "FP8")
    got = qd.resolve_codecs({"all_gather": "lossless"})
    assert got == {"all_reduce": "int8", "reduce_scatter": "int8", "all_gather": "lossless", "all_to_all": "fp8"}
    assert qd.resolve_codecs({"all_reduce": "auto:int4"})["all_reduce"] == "auto:int4"
    with pytest.raises(ValueError, match="keys are"):
        qd.resolve_codecs({"allreduce": "int8"})
    with pytest.raises(ValueError, match="unknown codec"):
        qd.resolve_codecs({"all_reduce": "int3"})
    with pytest.raises(ValueError, match="unknown codec"):
        qd.resolve_codecs({"all_reduce": "auto:int3"})
    with pytest.raises(TypeError, match="string"):
        qd.resolve_codecs({"all_reduce": 4})
    assert qd.resolve_max_size(1000) == 1008
    with pytest.raises(ValueError, match="positive"):
        qd.resolve_max_size(0)


def test_registered():
    assert "QUICKREDUCE" in dist.Backend._plugins
    assert dist.Backend._plugins["QUICKREDUCE"].extended_api
    assert dist.Backend.backend_capability["quickreduce"] == ["cuda"]
    assert dist.Backend("quickreduce") == "quickreduce"
    with pytest.raises(ValueError, match="already registered"):
        qd.register()


# ================================================================ one group in this process
class LoneGroup(qd.ProcessGroupQuickreduce):
    """Rank 0 of a 2-rank group whose peer never shows up: no fallback backends (gloo would wait for the peer),
    a communicator that records calls. For what needs no second rank."""

    DEVICE_TYPE = "cpu"

    def _make_fallbacks(self, *args):
        return {}

    def _make_communicator(self, device):
        return SimpleNamespace(calls=[], check=lambda: None, close=lambda: None,
                               all_reduce=lambda x, out, op: None)


def lone_group(peer_host=None, options=None):
    store = dist.HashStore()
    store.set("quickreduce/hosts/1", pickle.dumps(peer_host or socket.gethostname()))
    return LoneGroup(store, 0, 2, options=options)


def test_group_options_and_hosts():
    pg = lone_group(options=qd.Options(max_size=4000, codecs={"all_to_all": "fp8"}, fallback="gloo"))
    assert pg.limits.max_size == 4000 and pg.limits.codecs["all_to_all"] == "fp8" and pg.limits.single_host
    assert pg.name() == "quickreduce" and pg.fallback == "gloo" and "not yet" in repr(pg)
    other = lone_group(peer_host="another-host")
    assert not other.limits.single_host
    t = torch.ones(8)
    assert qd.route(qd.describe_all_reduce([t], RO.SUM), dataclasses.replace(other.limits, device_type="cpu")) \
        .reason == "several hosts"
    with pytest.raises(TypeError, match="pg_options must be"):
        lone_group(options={"max_size": 4})
    with pytest.raises(ValueError, match="keys are"):
        lone_group(options=qd.Options(codecs={"allreduce": "fp8"}))


def test_routes_are_remembered(monkeypatch):
    pg = lone_group()
    seen = []
    real = qd.route
    monkeypatch.setattr(qd, "route", lambda req, lim: seen.append(req) or real(req, lim))
    t = torch.ones(8)
    for _ in range(5):
        pg.allreduce([t], dist.AllreduceOptions()).wait()
    pg.allreduce([torch.ones(9)], dist.AllreduceOptions()).wait()
    assert len(seen) == 2 and pg.routed[("all_reduce", "quickreduce")] == 6


def test_no_communicator_is_created_during_graph_capture(monkeypatch):
    pg = lone_group()
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(dist.DistBackendError, match="capture"):
        pg._communicator_for(torch.device("cuda", 0))
    assert pg.communicator is None
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert pg._communicator_for(torch.device("cpu")) is pg.communicator is not None
    pg.close_communicator()
    assert pg.communicator is None


# ================================================================ two spawned ranks
class StoreSimC:
    """Stands in for quickreduce._C.Communicator across processes: what the kernels compute with exact codecs
    (all-reduce and reduce-scatter: fp32 sums in rank order rounded once; segments copied bit for bit) and
    the C++ size checks; each call's input crosses through the store."""

    one_shot_max_bytes = 8 << 20

    def __init__(self, store, rank, world_size, max_size):
        self.store, self.rank, self.world_size, self.max_bytes = store, rank, world_size, max_size
        self.workspace_bytes = max_size
        self.seq, self.calls, self.peers, self.recorded = 0, [], None, None

    def ipc_handle(self):
        return f"sim-handle-{self.rank}".encode()

    def open_peers(self, handles):
        self.peers = list(handles)

    def check(self):
        if self.recorded is not None:
            raise self.recorded

    def close(self):
        pass

    def _everyone(self, post):
        self.seq += 1
        return qd._store_all_gather(self.store, self.rank, self.world_size, f"call{self.seq}", post)

    def all_reduce(self, inp, out, numel, dtype, codec, algo, stream, threads=0, blocks=0, pdl=False, groups=0):
        self.check()
        if numel * 2 > self.max_bytes:
            raise ValueError(f"message of {numel * 2} bytes exceeds max_size {self.max_bytes}")
        self.calls.append(("all_reduce", numel))
        dt = _DTYPES[dtype]
        acc = torch.zeros(numel, dtype=torch.float32)
        for x in self._everyone(_view(inp, numel, dt).clone()):
            acc += x.float()
        _view(out, numel, dt).copy_(acc.to(dt))

    def all_reduce_packets_fit(self, numel, dtype, packet_max_bytes=None):
        return False  # the simulated node runs the all-reduce as two exchange calls (the same bits)

    def exchange(self, kind, inp, out, dtype, codec, send_counts, recv_counts, stream, pdl=False, threads=0,
                 even_splits=False, packet_max_bytes=None):
        self.check()
        dt, r, elt = _DTYPES[dtype], self.rank, torch.empty((), dtype=_DTYPES[dtype]).element_size()
        send, recv = list(send_counts), list(recv_counts)
        gather, scatter = kind == _C.EXCHANGE_ALL_GATHER, kind == _C.EXCHANGE_REDUCE_SCATTER
        in_values, out_values = (send[0] if gather else sum(send)), (recv[0] if scatter else sum(recv))
        if max(in_values, out_values) * elt > self.max_bytes:
            raise ValueError(f"message of {max(in_values, out_values) * elt} bytes exceeds max_size {self.max_bytes}")
        self.calls.append((kind, in_values))
        everyone = self._everyone((_view(inp, in_values, dt).clone(), send))
        segs = []
        for x, counts in everyone:
            start = 0 if gather else sum(counts[:r])
            segs.append(x[start:start + counts[r]])
        if [len(s) for s in segs] != recv:
            raise _C.CallMismatchError(f"rank {r} expected {recv} values, peers send {[len(s) for s in segs]}")
        if scatter:
            acc = torch.zeros(recv[0], dtype=torch.float32)
            for s in segs:
                acc += s.float()
            result = acc.to(dt)
        else:
            result = torch.cat(segs)
        _view(out, result.numel(), dt).copy_(result)


_DTYPES = {_C.DTYPE_FLOAT16: torch.float16, _C.DTYPE_BFLOAT16: torch.bfloat16, _C.DTYPE_FLOAT32: torch.float32}


def _view(ptr, numel, dtype):
    import ctypes
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if nbytes == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(ptr), dtype=dtype)


from test_torch_integration import _relaxed_check_tensor  # noqa: E402  (tests/cpu is on sys.path)


FAIL_CREATE_ON_RANK = None  # set by a scenario: that rank's communicator construction fails


class SimProcessGroup(qd.ProcessGroupQuickreduce):
    """The backend with CPU tensors in the role of CUDA ones and StoreSimC under the real Communicator."""

    DEVICE_TYPE = "cpu"

    def _make_communicator(self, device):
        def make_c(rank, world_size, device, max_size, timeout):
            if FAIL_CREATE_ON_RANK == rank:
                raise _C.CudaError("simulated: out of memory allocating the workspace")
            return StoreSimC(dist.PrefixStore("sim", self._store), rank, world_size, max_size)

        with contextlib.ExitStack() as stack:
            stack.enter_context(mock.patch.object(_C, "Communicator", make_c))
            stack.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: True))
            stack.enter_context(mock.patch.object(torch.cuda, "current_device", lambda: 0))
            stack.enter_context(mock.patch.object(torch.cuda, "get_device_properties",
                                                  lambda d: SimpleNamespace(uuid=f"sim-gpu-{self.rank()}")))
            comm = super()._make_communicator(device)
        comm._table = tuning.load_table("NVIDIA H200", self.size(), driver="test")
        return comm

    def _run(self, *args):
        with mock.patch.object(torch.cuda, "current_stream", lambda device=None: SimpleNamespace(cuda_stream=0)), \
                mock.patch.object(Communicator, "_check_tensor", _relaxed_check_tensor):
            return super()._run(*args)


# ---- scenario helpers (run in the spawned ranks; each returns {check: None | failure message})
def rank_inputs(seed, shape, dtype, W):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).to(dtype) for _ in range(W)]


def rank_order_sum(xs):
    acc = torch.zeros_like(xs[0], dtype=torch.float32)
    for x in xs:
        acc += x.float()
    return acc.to(xs[0].dtype)


def same_bits(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"got {tuple(got.shape)} {got.dtype}, want {tuple(want.shape)} {want.dtype}"
    iv = {torch.float32: torch.int32, torch.int32: torch.int32}.get(got.dtype, torch.int16)
    if torch.equal(got.contiguous().view(iv), want.contiguous().view(iv)):
        return None
    return f"differs: got {got.reshape(-1)[:4].tolist()}... want {want.reshape(-1)[:4].tolist()}..."


def expect(res, name, exc_type, fn, *words, cause=None):
    try:
        fn()
        res[name] = "no exception"
    except exc_type as e:
        if not all(w in str(e) for w in words):
            res[name] = f"message lacks {words}: {e}"
        elif cause is not None and not isinstance(e.__cause__, cause):
            res[name] = f"cause is {type(e.__cause__).__name__}, want {cause.__name__}"
        else:
            res[name] = None
    except Exception as e:  # noqa: BLE001
        res[name] = f"{type(e).__name__}: {e}"


def counted(pg, collective, where, before):
    got = pg.routed[(collective, where)] - before.get((collective, where), 0)
    return None if got > 0 else f"no {collective} went to {where}: {dict(pg.routed)}"


def scenario_real_backend(rank, W):
    """init_process_group("cpu:gloo,cuda:quickreduce") made this process's default group: the quickreduce
    group, its CPU calls on gloo; new_group(backend="quickreduce") with pg_options; the other calls work."""
    res = {}
    pg = dist.group.WORLD
    res["default group is quickreduce"] = None if type(pg) is qd.ProcessGroupQuickreduce else repr(pg)
    res["name"] = None if pg.name() == "quickreduce" else pg.name()
    res["backend string"] = None if dist.get_backend() == "cpu:gloo,cuda:quickreduce" else dist.get_backend()
    res["no CUDA here: gloo fallback"] = None if pg.fallback == "gloo" else pg.fallback
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    res["CPU all_reduce on gloo"] = None if t.tolist() == [W * (W + 1) / 2] * 5 else str(t)
    res["counted as fallback"] = None if pg.fallback_reasons["device"] == 1 else dict(pg.fallback_reasons)
    out = torch.empty(W * 2)
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank)))
    res["CPU all_gather_into_tensor on gloo"] = None if out.tolist() == [float(r) for r in range(W) for _ in "ab"] \
        else str(out)
    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, torch.arange(2.0 * W) * (rank + 1))
    want = [(2 * rank + i) * W * (W + 1) / 2 for i in range(2)]
    res["CPU reduce_scatter_tensor on gloo"] = None if out.tolist() == want else f"{out} want {want}"
    out = torch.empty(W)
    dist.all_to_all_single(out, torch.full((W,), float(rank)))
    res["CPU all_to_all_single on gloo"] = None if out.tolist() == [float(r) for r in range(W)] else str(out)
    res["no communicator for CPU calls"] = None if pg.communicator is None else "created"
    objs = [None] * W
    dist.all_gather_object(objs, {"rank": rank})
    res["all_gather_object"] = None if objs == [{"rank": r} for r in range(W)] else str(objs)
    dist.barrier()
    g = dist.new_group(list(range(W)), backend="quickreduce", pg_options=qd.Options(max_size=1 << 16))
    res["new_group"] = None if isinstance(g, qd.ProcessGroupQuickreduce) and g.limits.max_size == 1 << 16 else repr(g)
    x = torch.arange(4.0) * (rank + 1)
    dist.broadcast(x, src=0, group=g)
    res["broadcast on the new group"] = None if x.tolist() == [0.0, 1.0, 2.0, 3.0] else str(x)
    expect(res, "pg_options of another type", TypeError,
           lambda: dist.new_group(list(range(W)), backend="quickreduce", pg_options={"max_size": 4}), "Options")
    return res


def scenario_collectives(rank, W):
    """dist.all_reduce (SUM/AVG/MAX/MIN), reduce_scatter_tensor, all_gather_into_tensor and all_to_all_single
    (even, uneven) through quickreduce: the exact results, in place, counted, StoreSimC saw the calls."""
    res = {}
    pg = dist.new_group(list(range(W)), backend="qrsim")
    before = dict(pg.routed)
    for dtype in FLOATS:
        for n in (1, 33, 1000):
            xs = rank_inputs(n + len(str(dtype)), (W * n,), dtype, W)
            tag = f"{dtype}/n={W * n}"
            for op, want in ((RO.SUM, rank_order_sum(xs)), (RO.AVG, rank_order_sum(xs) / W),
                             (RO.MAX, torch.stack(xs).amax(0)), (RO.MIN, torch.stack(xs).amin(0))):
                t = xs[rank].clone()
                dist.all_reduce(t, op=op, group=pg)
                res[f"all_reduce {op} {tag}"] = same_bits(t, want)
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, xs[rank], group=pg)
            res[f"reduce_scatter {tag}"] = same_bits(out, rank_order_sum([x[rank * n:(rank + 1) * n] for x in xs]))
            out = torch.empty(W * W * n, dtype=dtype)
            dist.all_gather_into_tensor(out, xs[rank], group=pg)
            res[f"all_gather {tag}"] = same_bits(out, torch.cat(xs))
            out = torch.empty(W * n, dtype=dtype)
            dist.all_to_all_single(out, xs[rank], group=pg)
            res[f"all_to_all {tag}"] = same_bits(out, torch.cat([x[rank * n:(rank + 1) * n] for x in xs]))
    # uneven all-to-all: rank s sends d + 1 rows to rank d
    xs = rank_inputs(7, (sum(range(1, W + 1)), 3), torch.bfloat16, W)
    out = torch.empty((W * (rank + 1), 3), dtype=torch.bfloat16)
    dist.all_to_all_single(out, xs[rank], output_split_sizes=[rank + 1] * W,
                           input_split_sizes=list(range(1, W + 1)), group=pg)
    start = sum(range(1, rank + 1))
    res["uneven all_to_all"] = same_bits(out, torch.cat([x[start:start + rank + 1] for x in xs]))
    # a misaligned view, all-reduced in place: the rest of its storage is untouched
    base = torch.arange(17, dtype=torch.float16) * (rank + 1)
    view = base[1:]
    dist.all_reduce(view, group=pg)
    want = torch.arange(17, dtype=torch.float16) * (W * (W + 1) // 2)
    want[0] = 0
    res["misaligned view in place"] = same_bits(base, want)
    # an in-place all-gather (the input is this rank's block of the output, as FSDP does)
    n = 5
    out = torch.zeros(W * n)
    out[rank * n:(rank + 1) * n] = rank + 1
    dist.all_gather_into_tensor(out, out[rank * n:(rank + 1) * n], group=pg)
    res["in-place all_gather"] = same_bits(out, torch.arange(1, W + 1, dtype=torch.float32).repeat_interleave(n))
    for c in qd.COLLECTIVES:
        res[f"{c} counted"] = counted(pg, c, "quickreduce", before)
    res["no fallback"] = None if not pg.fallback_reasons else dict(pg.fallback_reasons)
    sim = pg.communicator._c
    took = sum(v for (c, where), v in pg.routed.items() if where == "quickreduce")
    res["the simulated kernels ran"] = None if took >= 9 * 7 and len(sim.calls) >= took else \
        f"{len(sim.calls)} kernel calls for {took} collectives"
    res["connected to every peer"] = None if sim.peers == [f"sim-handle-{r}".encode() for r in range(W)] else str(sim.peers)
    return res


def scenario_fallbacks(rank, W):
    """What quickreduce does not take goes to gloo, correctly: integer dtypes, messages over max_size (the
    fp32 all-reduce's padding included), non-contiguous tensors, PRODUCT, lists, and the calls the backend
    does not define (broadcast, barrier, send/recv, gather, all_reduce_coalesced)."""
    res = {}
    pg = dist.new_group(list(range(W)), backend="qrsim", pg_options=qd.Options(max_size=1000))  # 1008
    before = dict(pg.routed)
    ti = torch.arange(6, dtype=torch.int32) * (rank + 1)
    dist.all_reduce(ti, group=pg)
    res["int32"] = same_bits(ti, torch.arange(6, dtype=torch.int32) * (W * (W + 1) // 2))
    big = torch.ones(600, dtype=torch.float16)  # 1200 bytes > 1008
    dist.all_reduce(big, group=pg)
    res["over max_size"] = None if big.eq(W).all() else str(big[:4])
    padded = torch.ones(250)  # 1000 bytes, but the fp32 path pads it to W chunks of 32-value multiples
    assert W * _C.fp32_all_reduce_chunk(250, W) * 4 > 1008  # (StoreSimC would raise, as the C++ does)
    dist.all_reduce(padded, group=pg)
    res["fp32 padding over max_size"] = None if padded.eq(W).all() else str(padded[:4])
    nc = (torch.arange(12.0).reshape(3, 4) * (rank + 1)).t()
    dist.all_reduce(nc, group=pg)
    res["non-contiguous"] = same_bits(nc, (torch.arange(12.0).reshape(3, 4) * (W * (W + 1) / 2)).t())
    p = torch.full((3,), float(rank + 2))
    dist.all_reduce(p, op=RO.PRODUCT, group=pg)
    res["PRODUCT"] = None if p.eq(float(torch.arange(2, W + 2).prod())).all() else str(p)
    x = torch.arange(3.0) + rank
    dist.broadcast(x, src=1, group=pg)
    res["broadcast"] = None if x.tolist() == [1.0, 2.0, 3.0] else str(x)
    dist.barrier(group=pg)
    if rank == 0:
        dist.send(torch.tensor([42.0]), dst=1, group=pg)
    elif rank == 1:
        got = torch.zeros(1)
        dist.recv(got, src=0, group=pg)
        res["send/recv"] = None if got.item() == 42.0 else str(got)
    gathered = [torch.zeros(2) for _ in range(W)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank)), gathered, dst=0, group=pg)
    if rank == 0:
        res["gather"] = None if [g[0].item() for g in gathered] == list(range(W)) else str(gathered)
    ts = [torch.ones(2), torch.ones(3)]
    dist.all_reduce_coalesced(ts, group=pg)
    res["all_reduce_coalesced"] = None if all(t.eq(W).all() for t in ts) else str(ts)
    res["counted as fallback"] = None if pg.routed[("all_reduce", "fallback")] - before.get(("all_reduce", "fallback"), 0) >= 5 \
        else dict(pg.routed)
    want = {"dtype": 1, "over max_size": 2, "non-contiguous": 1, "ReduceOp product": 1}
    res["reasons"] = None if dict(pg.fallback_reasons) == want else dict(pg.fallback_reasons)
    res["quickreduce took none of them"] = None if pg.routed[("all_reduce", "quickreduce")] == 0 else dict(pg.routed)
    return res


def scenario_functional(rank, W):
    """The functional collectives (DTensor's path: _c10d_functional ops in C++, the group found by name)
    reach the backend, eager and under torch.compile(fullgraph=True, backend="aot_eager")."""
    import torch.distributed._functional_collectives as funcol
    res = {}
    pg = dist.new_group(list(range(W)), backend="qrsim")
    before = dict(pg.routed)
    n = 8
    xs = rank_inputs(11, (W * n,), torch.float32, W)
    x = xs[rank]
    res["funcol all_reduce"] = same_bits(funcol.all_reduce(x, "sum", pg).clone(), rank_order_sum(xs))
    res["funcol all_reduce avg"] = same_bits(funcol.all_reduce(x, "avg", pg).clone(), rank_order_sum(xs) / W)
    res["funcol all_gather_tensor"] = same_bits(funcol.all_gather_tensor(x, 0, pg).clone(), torch.cat(xs))
    block = [t[rank * n:(rank + 1) * n] for t in xs]
    res["funcol reduce_scatter_tensor"] = same_bits(funcol.reduce_scatter_tensor(x, "sum", 0, pg).clone(),
                                                    rank_order_sum(block))
    res["funcol all_to_all_single"] = same_bits(funcol.all_to_all_single(x, None, None, pg).clone(), torch.cat(block))
    for c in qd.COLLECTIVES:
        res[f"{c} counted"] = counted(pg, c, "quickreduce", before)

    def step(t):
        h = funcol.all_reduce(t * 2, "sum", pg)
        return funcol.all_gather_tensor(h + 1, 0, pg)

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    mid = dict(pg.routed)
    got = compiled(x)
    res["compiled result"] = same_bits(got, torch.cat([rank_order_sum([t * 2 for t in xs]) + 1] * W))
    res["compiled all_reduce routed"] = counted(pg, "all_reduce", "quickreduce", mid)
    res["compiled all_gather routed"] = counted(pg, "all_gather", "quickreduce", mid)
    return res


def scenario_dtensor(rank, W):
    """A RowwiseParallel linear (torch.distributed.tensor.parallel) on a mesh over a quickreduce group: its
    output's all-reduce runs through quickreduce and equals the sum of the ranks' partial products."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module
    res = {}
    pg = dist.new_group(list(range(W)), backend="qrsim")
    mesh = DeviceMesh.from_group(pg, "cpu")
    torch.manual_seed(0)  # the same full weight on every rank
    model = torch.nn.Sequential(torch.nn.Linear(8 * W, 16, bias=False))
    weight = model[0].weight.detach().clone()
    parallelize_module(model, mesh, {"0": RowwiseParallel()})
    xs = rank_inputs(3, (4, 8 * W), torch.float32, W)
    shard = slice(8 * rank, 8 * (rank + 1))
    before = dict(pg.routed)
    with torch.no_grad():
        y = model(xs[rank][:, shard].contiguous())
    partials = [xs[r][:, 8 * r:8 * (r + 1)] @ weight[:, 8 * r:8 * (r + 1)].t() for r in range(W)]
    res["output"] = same_bits(y, rank_order_sum(partials))
    res["its all-reduce ran through quickreduce"] = counted(pg, "all_reduce", "quickreduce", before)
    return res


def scenario_works_and_errors(rank, W):
    """async_op work objects; quickreduce errors raised as DistBackendError (or ValueError) with the quickreduce
    exception as __cause__, through dist.* and through the functional (C++) path; a rank whose communicator
    cannot be created makes every rank raise, none hangs."""
    global FAIL_CREATE_ON_RANK
    import torch.distributed._functional_collectives as funcol
    res = {}
    pg = dist.new_group(list(range(W)), backend="qrsim")
    t = torch.full((4,), float(rank))
    work = dist.all_reduce(t, group=pg, async_op=True)
    res["work type"] = None if isinstance(work, qd.Work) and isinstance(work, dist.Work) else type(work).__name__
    res["wait"] = None if work.wait() is True and work.is_completed() else "wait/is_completed"
    fut = work.get_future()
    res["future"] = same_bits(fut.wait()[0], torch.full((4,), float(sum(range(W)))))
    res["result"] = None if work.result()[0] is t else "result() is not the tensor"
    ag = funcol.all_gather_tensor(t, 0, pg).wait()  # through the coalesced form: a _WorkList
    res["coalesced work (functional all_gather)"] = same_bits(ag, torch.full((4 * W,), float(sum(range(W)))))

    comm = pg.communicator
    comm._c.recorded = _C.CallMismatchError("simulated: ranks made different calls")
    expect(res, "dist.all_reduce maps the error", dist.DistBackendError,
           lambda: dist.all_reduce(torch.ones(4), group=pg), "CallMismatchError", "simulated",
           cause=_C.CallMismatchError)
    comm._c.recorded = _C.PeerTimeoutError("simulated: rank 1 timed out")
    expect(res, "functional path maps the error", dist.DistBackendError,
           lambda: funcol.all_reduce(torch.ones(4), "sum", pg).wait(), "PeerTimeoutError")
    expect(res, "Work.wait raises a recorded error", dist.DistBackendError, lambda: work.wait(), "timed out",
           cause=_C.PeerTimeoutError)
    comm._c.recorded = None
    expect(res, "argument errors stay ValueError", ValueError,
           lambda: pg._run("all_to_all", torch.device("cpu"),
                           lambda c: c.all_to_all(torch.empty(4), out=torch.empty(3)), []),
           "quickreduce backend", "divisible", cause=ValueError)
    # ranks that disagree on an all-to-all's sizes (a user error): rank 0 expects 2 rows from rank 1, which sends 1
    x = torch.ones(W, 3)
    out = torch.empty(W + 1 if rank == 0 else W, 3)
    splits = [1] * W
    recv = [1, 2] + [1] * (W - 2) if rank == 0 else [1] * W
    if rank == 0:
        expect(res, "disagreeing split sizes", dist.DistBackendError,
               lambda: dist.all_to_all_single(out, x, recv, splits, group=pg), "expected", cause=_C.CallMismatchError)
    else:
        dist.all_to_all_single(out, x, recv, splits, group=pg)

    bad = dist.new_group(list(range(W)), backend="qrsim")
    FAIL_CREATE_ON_RANK = W - 1
    try:
        if rank == W - 1:
            expect(res, "creation failure: this rank", dist.DistBackendError,
                   lambda: dist.all_reduce(torch.ones(4), group=bad), "out of memory", cause=_C.CudaError)
        else:
            expect(res, "creation failure: the peers", dist.DistBackendError,
                   lambda: dist.all_reduce(torch.ones(4), group=bad), f"rank {W - 1} could not create")
    finally:
        FAIL_CREATE_ON_RANK = None
    res["no communicator left behind"] = None if bad.communicator is None else "created"
    return res


SCENARIOS = ["real_backend", "collectives", "fallbacks", "functional", "dtensor", "works_and_errors"]


def _worker(rank, W, init, out_dir):
    # A worker still running after 150 s (the fixture gives up at 180) prints every thread's stack and
    # exits: a hang seen once then says where it was.
    faulthandler.dump_traceback_later(150, exit=True)
    os.environ.pop("QUICKREDUCE_BACKEND_FALLBACK", None)
    for c in ("", *("_" + c.upper() for c in qd.COLLECTIVES)):
        os.environ.pop("QUICKREDUCE_QUANTIZATION" + c, None)
    qd.register("qrsim", SimProcessGroup, devices=["cpu"])
    dist.init_process_group("cpu:gloo,cuda:quickreduce", init_method=init, rank=rank, world_size=W,
                            timeout=timedelta(seconds=60))
    results = {}
    for name in SCENARIOS:
        try:
            for k, v in globals()["scenario_" + name](rank, W).items():
                results[f"{name}/{k}"] = v
        except Exception:  # noqa: BLE001
            results[f"{name}/<crashed>"] = traceback.format_exc()
        dist.barrier()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def spawned():
    W = 2
    out_dir = tempfile.mkdtemp(prefix="qr-backend-")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(r, W, f"file://{out_dir}/store", out_dir)) for r in range(W)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    for p in procs:
        if p.is_alive():
            p.kill()
    merged = {}
    for r in range(W):
        path = os.path.join(out_dir, f"rank{r}.json")
        assert os.path.exists(path), f"rank {r} wrote no results (exit code {procs[r].exitcode})"
        with open(path) as f:
            for k, v in json.load(f).items():
                merged.setdefault(k, {})[r] = v
    return merged


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_two_ranks(spawned, scenario):
    mine = {k: v for k, v in spawned.items() if k.startswith(scenario + "/")}
    assert mine, f"scenario {scenario} produced no checks"
    failures = {k: v for k, v in mine.items() if any(msg is not None for msg in v.values())}
    assert not failures, "\n".join(f"{k}: {v}" for k, v in failures.items())


def test_store_all_gather_round_trip():
    store = dist.HashStore()
    store.set("k/1", pickle.dumps({"b": 2}))
    assert qd._store_all_gather(store, 0, 2, "k", {"a": 1}) == [{"a": 1}, {"b": 2}]
