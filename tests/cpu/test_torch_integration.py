"""quickreduce inside torch, on the CPU: the custom ops' schemas and fake implementations
(torch.library.opcheck), ReduceOp and async_op argument errors, torch.compile(fullgraph=True)
tracing the Communicator's methods with no graph break, and the ReduceOp arithmetic (SUM, AVG,
MAX, MIN) of the real Communicator code.

No GPU here: the C++ communicator (quickreduce._C.Communicator) is replaced by `SimC`, which does
what the kernels do with exact codecs (passthrough: fp32 rank-order sums rounded once, segments
copied bit for bit) across W simulated ranks, one Python thread each, meeting at a barrier
(`Fabric`). Everything above it is the product's code: Communicator's constructor and methods,
quickreduce.collectives, quickreduce.ops (ops, fakes, MAX/MIN composites). A "solo" fabric lets one
thread stand for every rank (every rank holds the same input), for opcheck and torch.compile.
The CUDA-only parts (the device checks of Communicator._check_tensor, the current stream) are
relaxed by fixtures; async_op's streams and events are GPU-only (tests/gpu/torch_scenarios.py).
"""
from __future__ import annotations

import ctypes
import gc
import threading
import weakref
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import quickreduce as qr
from quickreduce import _C, comm as comm_mod, ops, tuning
from quickreduce.comm import Communicator

RO = dist.ReduceOp
_TORCH_DTYPES = {_C.DTYPE_FLOAT16: torch.float16, _C.DTYPE_BFLOAT16: torch.bfloat16, _C.DTYPE_FLOAT32: torch.float32}
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


# ---------------------------------------------------------------- a simulated node
def _view(ptr: int, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """The tensor at a raw (CPU) address, sharing its memory (empty for no values)."""
    if numel == 0:
        return torch.empty(0, dtype=dtype)
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(ptr), dtype=dtype)


class Fabric:
    """W simulated ranks: each posts what it sends and reads everyone's posts. solo: one caller
    stands for every rank, all holding its input."""

    def __init__(self, world_size: int, solo: bool = False):
        self.world_size, self.solo = world_size, solo
        self.posts = [None] * world_size
        self.barrier = threading.Barrier(world_size, timeout=60)
        self.calls: list = []

    def swap(self, rank: int, post) -> list:
        if self.solo:
            return [post] * self.world_size
        self.posts[rank] = post
        self.barrier.wait()
        everyone = list(self.posts)
        self.barrier.wait()  # nobody posts the next call before everyone has read this one
        return everyone


class SimC:
    """Stands in for quickreduce._C.Communicator: the exact-codec arithmetic of the kernels."""

    one_shot_max_bytes = 8 << 20

    def __init__(self, fabric: Fabric, rank: int, world_size: int, max_size: int):
        assert world_size == fabric.world_size
        self.fabric, self.rank, self.workspace_bytes = fabric, rank, max_size

    def all_reduce(self, inp, out, numel, dtype, codec, algo, stream, threads=0, blocks=0, pdl=False, groups=0):
        self.fabric.calls.append(("all_reduce", self.rank, numel))
        dt = _TORCH_DTYPES[dtype]
        everyone = self.fabric.swap(self.rank, _view(inp, numel, dt).clone())
        acc = torch.zeros(numel, dtype=torch.float32)
        for x in everyone:  # rank order, fp32, rounded once
            acc += x.float()
        _view(out, numel, dt).copy_(acc.to(dt))

    def all_reduce_packets_fit(self, numel, dtype, packet_max_bytes=None):
        return False  # the simulated node runs the all-reduce as two exchange calls (the same bits)

    def exchange(self, kind, inp, out, dtype, codec, send_counts, recv_counts, stream, pdl=False, threads=0,
                 even_splits=False, packet_max_bytes=None):
        self.fabric.calls.append((kind, self.rank, list(send_counts)))
        dt, r = _TORCH_DTYPES[dtype], self.rank
        send, recv = list(send_counts), list(recv_counts)
        gather = kind == _C.EXCHANGE_ALL_GATHER  # one segment, the whole input, sent to every rank
        everyone = self.fabric.swap(r, (_view(inp, send[r] if gather else sum(send), dt).clone(), send))

        def segment(s):  # what rank s sends to this rank
            x, counts = everyone[s]
            start = 0 if gather else sum(counts[:r])
            return x[start:start + counts[r]]

        segs = [segment(s) for s in range(len(everyone))]
        assert [len(g) for g in segs] == recv, (recv, [len(g) for g in segs])
        if kind == _C.EXCHANGE_REDUCE_SCATTER:
            acc = torch.zeros(recv[0], dtype=torch.float32)
            for g in segs:
                acc += g.float()
            result = acc.to(dt)
        else:  # all-gather and all-to-all: the segments in rank order
            result = torch.cat(segs)
        _view(out, result.numel(), dt).copy_(result)

    def check(self):
        pass

    def close(self):
        pass


def _relaxed_check_tensor(self, t, what, dtypes=comm_mod._DTYPE_IDS):
    """Communicator._check_tensor without the CUDA device checks."""
    if self._c is None:
        raise qr.QuickReduceError("communicator is closed")
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise TypeError(f"{what} has dtype {t.dtype}")
    if not t.is_contiguous():
        raise ValueError(f"{what} is not contiguous")
    if t.numel() and t.data_ptr() % 16:
        raise ValueError(f"{what} is not 16-byte aligned")


def communicators_on(monkeypatch, fabric, world_size, solo=False, max_size=1 << 20, **kwargs) -> list:
    """One Communicator per simulated rank (one with solo) over `fabric`, built by the real constructor
    (with _C.Communicator already patched to the simulation) and the H200 table."""
    comms = []
    for r in range(1 if solo else world_size):
        with monkeypatch.context() as m:  # only while constructing: torch itself asks is_available()
            m.setattr(torch.cuda, "is_available", lambda: True)
            m.setattr(torch.cuda, "current_device", lambda: 0)
            c = Communicator(rank=r, world_size=world_size, max_size=max_size, **kwargs)
        c._table = tuning.load_table("NVIDIA H200", world_size, driver="test")
        c.fabric = fabric
        comms.append(c)
    return comms


@pytest.fixture
def node(monkeypatch, tmp_path):
    """make(world_size, solo=False) -> [Communicator per rank] over one Fabric, built by the real
    constructor with SimC in place of the C++ communicator."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("QUICKREDUCE_TUNE_FILE", raising=False)
    for k in ("QUICKREDUCE_QUANTIZATION", "QUICKREDUCE_QUANTIZATION_ALL_REDUCE",
              "QUICKREDUCE_QUANTIZATION_REDUCE_SCATTER", "QUICKREDUCE_QUANTIZATION_ALL_GATHER",
              "QUICKREDUCE_QUANTIZATION_ALL_TO_ALL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(Communicator, "_check_tensor", _relaxed_check_tensor)
    made = []

    def make(world_size, solo=False, **kwargs):
        fabric = Fabric(world_size, solo)
        monkeypatch.setattr(_C, "Communicator",
                            lambda rank, w, device, max_size, timeout: SimC(fabric, rank, w, max_size))
        comms = communicators_on(monkeypatch, fabric, world_size, solo, **kwargs)
        made.extend(weakref.ref(c) for c in comms)
        return comms

    yield make
    for ref in made:
        if ref() is not None:
            ref().close()


def on_every_rank(comms, fn):
    """fn(comm, rank) on one thread per rank; the results in rank order (the first error re-raised)."""
    results, errors = [None] * len(comms), [None] * len(comms)

    def body(r):
        try:
            results[r] = fn(comms[r], r)
        except BaseException as e:  # noqa: BLE001  (re-raised below)
            errors[r] = e
            comms[r].fabric.barrier.abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for e in errors:
        if e is not None and not isinstance(e, threading.BrokenBarrierError):
            raise e
    for e in errors:
        if e is not None:
            raise e
    return results


def rank_inputs(seed, shape, dtype, world_size, specials=False):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(shape, generator=g).to(dtype) for _ in range(world_size)]
    if specials and xs[0].numel() >= 4:
        for r, x in enumerate(xs):  # signed zeros and infinities where ranks disagree
            flat = x.view(-1)
            flat[0] = (-1) ** r * 0.0
            flat[1] = float("inf") if r == 1 else -3.0
            flat[2] = float("-inf") if r == 0 else 2.0
    return xs


def rank_order_sum(xs):
    acc = torch.zeros_like(xs[0], dtype=torch.float32)
    for x in xs:
        acc += x.float()
    return acc.to(xs[0].dtype)


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values: bits, except that +0/-0 compare equal and NaN matches NaN (docs/codec-spec.md's latitude;
    which zero MAX(+0, -0) returns is torch.amax's business)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(torch.nan_to_num(a.float(), nan=7.0),
                                                                     torch.nan_to_num(b.float(), nan=7.0))


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    iv = torch.int32 if a.dtype == torch.float32 else torch.int16
    return torch.equal(a.contiguous().view(iv), b.contiguous().view(iv))


# ---------------------------------------------------------------- schemas and fakes
def test_op_schemas_are_functional():
    want = {
        "all_reduce": "quickreduce::all_reduce(Tensor x, SymInt handle, str? codec=None, str algo=\"auto\", "
                      "str op=\"sum\") -> Tensor",
        "reduce_scatter": "quickreduce::reduce_scatter(Tensor x, SymInt handle, str? codec=None, str op=\"sum\") -> Tensor",
        "all_gather": "quickreduce::all_gather(Tensor x, SymInt handle, str? codec=None) -> Tensor",
        "all_to_all": "quickreduce::all_to_all(Tensor x, SymInt handle, str? codec=None, "
                      "SymInt[]? output_split_sizes=None, SymInt[]? input_split_sizes=None) -> Tensor",
    }
    for name, schema in want.items():
        s = getattr(torch.ops.quickreduce, name).default._schema
        assert str(s) == schema
        assert not s.is_mutable and all(a.alias_info is None for a in s.arguments)
        assert len(s.returns) == 1 and s.returns[0].alias_info is None


@pytest.mark.parametrize("W", [2, 3, 4, 8])
def test_fake_shapes_and_dtypes(node, W):
    (c,) = node(W, solo=True)
    h = c.handle
    cases = [  # (op, shape, extra args, expected shape)
        ("all_reduce", (5, 7), (), (5, 7)),
        ("all_reduce", (), (), ()),
        ("reduce_scatter", (W * 3, 5), (), (3, 5)),
        ("reduce_scatter", (5, W), (), (5,)),  # dim 0 does not divide: flat
        ("all_gather", (3, 5), (), (W * 3, 5)),
        ("all_gather", (), (), (W,)),
        ("all_to_all", (W * 2, 3), (), (W * 2, 3)),
        ("all_to_all", (W, 3), (None, list(range(1, W + 1)), [1] * W), (W * (W + 1) // 2, 3)),
    ]
    with FakeTensorMode():
        for dtype in DTYPES:
            for name, shape, extra, want in cases:
                x = torch.empty(shape, dtype=dtype)
                y = getattr(torch.ops.quickreduce, name)(x, h, *extra)
                assert tuple(y.shape) == want and y.dtype == dtype, (name, shape, tuple(y.shape))
        with pytest.raises(ValueError, match="divides by the world size"):
            torch.ops.quickreduce.reduce_scatter(torch.empty(W + 1), h)
        with pytest.raises(ValueError, match="at least one dimension"):
            torch.ops.quickreduce.all_to_all(torch.empty(()), h)


@pytest.mark.parametrize("W", [2, 3])
def test_fakes_match_the_real_outputs(node, W):
    """The fake of every op gives the shape and dtype the real code path (collectives.py) returns."""
    comms = node(W)
    shapes = [(W * 4, 3), (W, 1), (W * 2,), (3, W), (W * 5, 2, 2)]
    for dtype in DTYPES:
        for shape in shapes:
            def real(c, r):
                x = torch.randn(shape).to(dtype)
                a2a = (x, c.handle) if shape[0] % W == 0 else None
                return [torch.ops.quickreduce.all_reduce(x, c.handle),
                        torch.ops.quickreduce.reduce_scatter(x, c.handle),
                        torch.ops.quickreduce.all_gather(x, c.handle),
                        torch.ops.quickreduce.all_to_all(*a2a) if a2a else None]
            got = on_every_rank(comms, real)[0]
            with FakeTensorMode():
                x = torch.empty(shape, dtype=dtype)
                fake = [torch.ops.quickreduce.all_reduce(x, comms[0].handle),
                        torch.ops.quickreduce.reduce_scatter(x, comms[0].handle),
                        torch.ops.quickreduce.all_gather(x, comms[0].handle),
                        torch.ops.quickreduce.all_to_all(x, comms[0].handle) if shape[0] % W == 0 else None]
            for g, f in zip(got, fake):
                if g is not None:
                    assert (tuple(g.shape), g.dtype, g.stride()) == (tuple(f.shape), f.dtype, f.stride()), shape


@pytest.mark.parametrize("dtype", DTYPES)
def test_opcheck(node, dtype):
    """torch.library.opcheck: schema, autograd registration, fake vs real, AOT dispatch (dynamic shapes)."""
    (c,) = node(4, solo=True)
    h = c.handle
    x = torch.randn(8, 6).to(dtype)
    cases = [
        (torch.ops.quickreduce.all_reduce.default, (x, h)),
        (torch.ops.quickreduce.all_reduce.default, (x, h, "fp16", "auto", "avg")),
        (torch.ops.quickreduce.all_reduce.default, (x, h, "lossless", "auto", "max")),
        (torch.ops.quickreduce.all_reduce.default, (x, h, None, "auto", "min")),
        (torch.ops.quickreduce.reduce_scatter.default, (x, h)),
        (torch.ops.quickreduce.reduce_scatter.default, (x, h, "fp16", "max")),
        (torch.ops.quickreduce.all_gather.default, (x, h)),
        (torch.ops.quickreduce.all_to_all.default, (x, h)),
        (torch.ops.quickreduce.all_to_all.default, (x, h, None, [2, 2, 2, 2], [2, 1, 3, 2])),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


# ---------------------------------------------------------------- ReduceOp arithmetic (real code, simulated ranks)
@pytest.mark.parametrize("W", [2, 3, 4])
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce_sum_avg_max_min(node, W, dtype):
    comms = node(W)
    for seed, n in enumerate([1, 7, 33, 1000, 4099]):  # most need the MAX/MIN padding at some W
        xs = rank_inputs(seed, (n,), dtype, W, specials=True)
        ops_ = [RO.SUM, RO.AVG, RO.MAX, RO.MIN, "max", "Min"]
        outs = on_every_rank(comms, lambda c, r: [c.all_reduce(xs[r], op=o) for o in ops_])
        total = rank_order_sum(xs)
        stacked = torch.stack(xs)
        want = [total, total / W, stacked.amax(0), stacked.amin(0), stacked.amax(0), stacked.amin(0)]
        for r in range(W):
            for i, (o, got, w) in enumerate(zip(ops_, outs[r], want)):
                assert (same_bits if i < 2 else same_values)(got, w), (n, o, r)
                assert same_bits(got, outs[0][i])  # identical bits on every rank


@pytest.mark.parametrize("W", [2, 4])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter_sum_avg_max_min(node, W, dtype):
    comms = node(W)
    for seed, k in enumerate([1, 5, 64]):
        xs = rank_inputs(100 + seed, (W * k, 3), dtype, W, specials=True)
        outs = on_every_rank(comms, lambda c, r: [c.reduce_scatter(xs[r], op=o)
                                                  for o in (RO.SUM, RO.AVG, RO.MAX, RO.MIN)])
        for r in range(W):
            block = [x[r * k:(r + 1) * k] for x in xs]
            total = rank_order_sum(block)
            want = [total, total / W, torch.stack(block).amax(0), torch.stack(block).amin(0)]
            for i, (got, w) in enumerate(zip(outs[r], want)):
                assert (same_bits if i < 2 else same_values)(got, w)


def test_avg_is_the_sum_divided_after_the_reduction(node):
    """AVG = the SUM output (whatever the codec) divided elementwise in the tensor's dtype."""
    comms = node(3)
    xs = rank_inputs(7, (999,), torch.bfloat16, 3)
    for codec in ("fp16", "int4", "fp8"):
        outs = on_every_rank(comms, lambda c, r: (c.all_reduce(xs[r], codec=codec),
                                                  c.all_reduce(xs[r], codec=codec, op=RO.AVG)))
        for s, a in outs:
            assert same_bits(a, s / 3)


def test_max_min_in_place_and_out(node):
    comms = node(3)
    xs = rank_inputs(11, (2, 50), torch.float16, 3)
    want = torch.stack(xs).amax(0)

    def body(c, r):
        x = xs[r].clone()
        out = torch.empty_like(x)
        a = c.all_reduce(x, out=out, op=RO.MAX)
        assert a is out
        b = c.all_reduce(x, out=x, op=RO.MAX)  # in place
        assert b is x
        return out, x

    for out, x in on_every_rank(comms, body):
        assert same_values(out, want) and same_values(x, want)


def test_max_min_use_only_the_exact_exchange(node):
    """MAX/MIN all-reduce = one all-to-all and one all-gather, passthrough; never the SUM kernel."""
    comms = node(2)
    xs = rank_inputs(3, (100,), torch.bfloat16, 2)
    on_every_rank(comms, lambda c, r: c.all_reduce(xs[r], op=RO.MAX))
    calls = comms[0].fabric.calls
    kinds = [k for k, rank, _ in calls if rank == 0]
    assert kinds == [_C.EXCHANGE_ALL_TO_ALL, _C.EXCHANGE_ALL_GATHER]
    assert [counts for k, rank, counts in calls if rank == 0] == [[56, 56], [56, 56]]  # K = 50 rounded up to 8


# ---------------------------------------------------------------- argument errors
@pytest.fixture
def solo(node):
    (c,) = node(2, solo=True)
    return c


def test_reduce_op_errors(solo):
    x = torch.randn(64, dtype=torch.bfloat16)
    for bad in (RO.PRODUCT, RO.BAND, "prod", "mean", 0, None):
        with pytest.raises(ValueError, match="SUM, AVG, MAX or MIN"):
            solo.all_reduce(x, op=bad)
        with pytest.raises(ValueError, match="SUM, AVG, MAX or MIN"):
            solo.reduce_scatter(x, op=bad)
    for codec in ("int4", "fp8", "int8", "int6", "fp4", "auto:int4", "auto:fp8"):
        for op in (RO.MAX, RO.MIN):
            with pytest.raises(ValueError, match="exact paths only"):
                solo.all_reduce(x, codec=codec, op=op)
            with pytest.raises(ValueError, match="exact paths only"):
                solo.reduce_scatter(x, codec=codec, op=op)
    with pytest.raises(ValueError, match="algo must be 'auto' or 'nccl'"):
        solo.all_reduce(x, algo="two_shot", op=RO.MAX)
    with pytest.raises(ValueError, match="needs a communicator built from a process group"):
        solo.all_reduce(x, algo="nccl", op=RO.MIN)
    assert solo.fabric.calls == []  # every error came before a launch
    for codec in ("fp16", "bf16", "lossless", "auto", "auto:lossless", "auto:bf16", "FP16"):
        solo.all_reduce(x, codec=codec, op=RO.MAX)  # the exact codecs are accepted
    with pytest.raises(ValueError, match="exact paths only"):
        torch.ops.quickreduce.all_reduce(x, solo.handle, "int4", "auto", "max")  # the op checks too
    with pytest.raises(ValueError, match="SUM, AVG, MAX or MIN"):
        torch.ops.quickreduce.reduce_scatter(x, solo.handle, None, "product")


def test_default_lossy_codec_refuses_max(node, monkeypatch):
    monkeypatch.setenv("QUICKREDUCE_QUANTIZATION", "INT4")
    (c,) = node(2, solo=True)
    x = torch.randn(64, dtype=torch.float16)
    with pytest.raises(ValueError, match="exact paths only.*'int4'"):
        c.all_reduce(x, op=RO.MAX)
    c.all_reduce(x, op=RO.AVG)  # AVG takes every codec


def test_async_op_errors(solo):
    x = torch.randn(64, dtype=torch.bfloat16)
    for bad in ("yes", 1, None):
        with pytest.raises(TypeError, match="async_op must be True or False"):
            solo.all_reduce(x, async_op=bad)
        with pytest.raises(TypeError, match="async_op must be True or False"):
            solo.reduce_scatter(x, async_op=bad)
        with pytest.raises(TypeError, match="async_op must be True or False"):
            solo.all_gather(x, async_op=bad)
        with pytest.raises(TypeError, match="async_op must be True or False"):
            solo.all_to_all(x, async_op=bad)
    for method in (solo.all_reduce, solo.reduce_scatter, solo.all_gather, solo.all_to_all):
        with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
            method([1.0, 2.0])
    with pytest.raises(TypeError):  # op and async_op are keyword-only: positions keep their old meaning
        solo.all_reduce(x, None, None, "auto", RO.SUM)
    assert solo.fabric.calls == []
    assert issubclass(ops.Work, dist.Work)


def test_handles_name_open_communicators_only(node):
    (c,) = node(2, solo=True)
    h = c.handle
    assert ops.lookup(h) is c
    x = torch.randn(16, dtype=torch.float16)
    c.close()
    with pytest.raises(qr.QuickReduceError, match=f"handle {h}"):
        torch.ops.quickreduce.all_reduce(x, h)
    with pytest.raises(qr.QuickReduceError):
        with FakeTensorMode():
            torch.ops.quickreduce.all_reduce(torch.empty(4), h)
    (d,) = node(2, solo=True)
    assert d.handle != h  # never reused
    hd = d.handle
    del d
    gc.collect()
    with pytest.raises(qr.QuickReduceError):
        ops.lookup(hd)  # held weakly: a dropped communicator is gone


# ---------------------------------------------------------------- one path: the methods are the ops
class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_methods_call_the_ops(solo):
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    with _Recorder() as rec:
        solo.all_reduce(x)
        solo.all_reduce(x, op=RO.AVG)
        solo.reduce_scatter(x)
        solo.all_gather(x)
        solo.all_to_all(x)
        solo.all_to_all(x, output_split_sizes=[1, 1], input_split_sizes=[1, 3])
    mine = [o for o in rec.ops if o.startswith("quickreduce.")]
    assert mine == ["quickreduce.all_reduce.default"] * 2 + ["quickreduce.reduce_scatter.default",
                                                             "quickreduce.all_gather.default"] + \
        ["quickreduce.all_to_all.default"] * 2
    with _Recorder() as rec:  # out= keeps the direct path (no new tensor to return)
        solo.all_reduce(x, out=torch.empty_like(x))
    assert not [o for o in rec.ops if o.startswith("quickreduce.")]


# ---------------------------------------------------------------- torch.compile
def _tp_block(comm):
    def block(x, w):
        return comm.all_reduce(x @ w)
    return block


def _family(comm):
    def fn(x, w):
        h = x @ w
        a = comm.all_reduce(h, op=RO.AVG)
        b = comm.all_reduce(h, codec="lossless", op="max")
        s = comm.reduce_scatter(h, op=RO.MIN)
        g = comm.all_gather(s)
        t = comm.all_to_all(h, output_split_sizes=[2, 2], input_split_sizes=[2, 6])
        return a + b, g, t
    return fn


@pytest.mark.parametrize("make", [_tp_block, _family])
def test_dynamo_traces_the_methods_without_a_graph_break(solo, make):
    torch._dynamo.reset()
    fn = make(solo)
    x, w = torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(16, 32, dtype=torch.bfloat16)
    explained = torch._dynamo.explain(fn)(x, w)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1
    code = explained.graphs[0].code
    assert "torch.ops.quickreduce.all_reduce" in code
    assert f", {solo.handle}, " in code  # the communicator is a constant of the graph


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_equals_eager(solo, backend):
    torch._dynamo.reset()
    for make in (_tp_block, _family):
        fn = make(solo)
        x, w = torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(16, 32, dtype=torch.bfloat16)
        compiled = torch.compile(fn, fullgraph=True, backend=backend)
        want, got = fn(x, w), compiled(x, w)
        want, got = (want,) if isinstance(want, torch.Tensor) else want, (got,) if isinstance(got, torch.Tensor) else got
        for a, b in zip(got, want):
            assert same_bits(a, b)
        x2 = torch.randn(8, 16, dtype=torch.bfloat16)  # a second call reuses the graph
        got2 = compiled(x2, w)
        want2 = fn(x2, w)
        got2 = (got2,) if isinstance(got2, torch.Tensor) else got2
        want2 = (want2,) if isinstance(want2, torch.Tensor) else want2
        assert all(same_bits(a, b) for a, b in zip(got2, want2))


def test_compiled_with_dynamic_shapes(solo):
    torch._dynamo.reset()
    fn = _tp_block(solo)
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager", dynamic=True)
    w = torch.randn(16, 32)
    for rows in (4, 8, 12):
        x = torch.randn(rows, 16)
        assert same_bits(compiled(x, w), fn(x, w))


def test_epilogue_ops_schemas_and_fakes(node):
    """torch.ops.quickreduce.all_reduce_add_rmsnorm(_fp8): functional schemas; fakes give the outputs'
    shapes and dtypes and refuse bad arguments as the real call does."""
    for name, returns in (("all_reduce_add_rmsnorm", 2), ("all_reduce_add_rmsnorm_fp8", 4)):
        s = getattr(torch.ops.quickreduce, name).default._schema
        assert not s.is_mutable and all(a.alias_info is None for a in s.arguments)
        assert len(s.returns) == returns and all(r.alias_info is None for r in s.returns)
    (c,) = node(2, solo=True)
    with FakeTensorMode():
        x = torch.empty(3, 5, 1024, dtype=torch.bfloat16)
        w = torch.empty(1024, dtype=torch.bfloat16)
        out, res = torch.ops.quickreduce.all_reduce_add_rmsnorm(x, x, w, c.handle, 1e-6, None)
        assert out.shape == res.shape == x.shape and out.dtype == torch.bfloat16
        out, res, codes, scales = torch.ops.quickreduce.all_reduce_add_rmsnorm_fp8(x, x, w, c.handle)
        assert codes.dtype == torch.float8_e4m3fn and codes.shape == x.shape
        assert scales.dtype == torch.float32 and scales.shape == (3, 5, 1)
        with pytest.raises(ValueError, match="weight must be"):
            torch.ops.quickreduce.all_reduce_add_rmsnorm(x, x, w[:8], c.handle)
