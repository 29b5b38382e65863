"""The dynamic all-to-all on the CPU: the kernel's plan (csrc/collectives/exchange/dynamic_plan.hpp,
compiled for the host and bound as _C.dynamic_all_to_all_plan) against the oracle's
(quickreduce/oracle/all_to_all_dynamic.py); the data of the plan through the CPU twin against the
oracle, every codec; the Python layer (argument checks, the custom op and its fake, opcheck,
torch.compile(fullgraph=True) of a MoE layer) over simulated ranks.

No GPU here: the C++ communicator is replaced by `SimDyn`, which moves the rows the oracle's plan
moves across W simulated ranks (one Python thread each, meeting at a barrier), as the kernel does.
"""
from __future__ import annotations

import weakref
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import quickreduce as qr
from quickreduce import _C, moe
# the simulated node of the torch-integration tests (tests/cpu is on sys.path)
from test_torch_integration import _TORCH_DTYPES, Fabric, _view, communicators_on, on_every_rank
from quickreduce.comm import Communicator
from quickreduce import oracle
from quickreduce.oracle import all_to_all_dynamic as odyn
from quickreduce.oracle import exchange as oex

INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------- the plan: kernel code (host build) vs oracle
def _random_case(rng, W):
    in_rows = [int(rng.integers(0, 50)) for _ in range(W)]
    counts = []
    for r in range(W):
        row = list(rng.multinomial(in_rows[r], np.ones(W) / W)) if in_rows[r] else [0] * W
        kind = rng.integers(0, 8)
        if kind == 0:  # a negative count
            row[int(rng.integers(0, W))] = -int(rng.integers(1, 1 << 40))
        elif kind == 1:  # more rows than the input
            row[int(rng.integers(0, W))] += int(rng.integers(1, 5))
        elif kind == 2:  # int64 extremes
            row[int(rng.integers(0, W))] = int(rng.choice([INT64_MAX, -(1 << 63), 1 << 40, (1 << 32) + 1]))
        elif kind == 3:  # fewer rows than the input (allowed: the rest is not sent)
            row[int(rng.integers(0, W))] = max(0, row[0] - 1)
        counts.append([int(v) for v in row])
    capacity = [int(rng.integers(0, 3 * max(1, sum(in_rows) // W + 1))) for _ in range(W)]
    return counts, in_rows, capacity


@pytest.mark.parametrize("W", [2, 3, 4, 8])
def test_plan_matches_the_oracle(W):
    rng = np.random.default_rng(W)
    for _ in range(400):
        counts, in_rows, capacity = _random_case(rng, W)
        got = _C.dynamic_all_to_all_plan(counts, in_rows, capacity)
        want = odyn.plan(counts, in_rows, capacity)
        for key in ("rows", "moved", "cut", "announced"):
            assert [list(map(int, r)) if isinstance(r, list) else int(r) for r in got[key]] == want[key], (key, counts)
        assert [tuple(int(v) for v in p) for p in got["problems"]] == want["problems"], counts


@pytest.mark.parametrize("W", [2, 4, 8])
def test_plan_invariants(W):
    """No receiver gets more than its capacity, no sender sends more than it announced or its input
    has, a bad rank sends nothing, and counts that fit move unchanged."""
    rng = np.random.default_rng(100 + W)
    for _ in range(400):
        counts, in_rows, capacity = _random_case(rng, W)
        p = odyn.plan(counts, in_rows, capacity)
        for d in range(W):
            assert sum(p["moved"][s][d] for s in range(W)) <= capacity[d]
        for r in range(W):
            assert sum(p["moved"][r]) <= in_rows[r]
            bad = p["problems"][r][0] != odyn.NONE
            assert bad == (any(c < 0 for c in counts[r]) or sum(counts[r]) > in_rows[r])
            if bad:
                assert p["moved"][r] == [0] * W
            for d in range(W):
                assert p["send_at"][r][d] + p["moved"][r][d] <= in_rows[r]
        for d in range(W):
            fits = sum(p["rows"][s][d] for s in range(W)) <= capacity[d]
            assert fits == (p["cut"][d] == W)
            if fits:
                assert [p["moved"][s][d] for s in range(W)] == [p["rows"][s][d] for s in range(W)]


def test_plan_named_cases():
    W = 4
    ok = [[1, 2, 3, 4]] * W
    p = odyn.plan(ok, [10] * W, [40] * W)
    assert p["problems"] == [(0, -1, 0)] * W and p["cut"] == [W] * W
    assert p["recv_counts"][2] == [3, 3, 3, 3] and p["recv_at"][2] == [0, 3, 6, 9]
    # rank 1 has a negative count: it sends nothing, everyone else unchanged
    p = odyn.plan([[1, 2, 3, 4], [5, -1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], [10, 10, 4, 0], [40] * W)
    assert p["problems"][1] == (odyn.NEGATIVE, 1, -1) and p["moved"][1] == [0] * W
    # rank 2's counts add up to more than its rows
    p = odyn.plan([[0] * W, [0] * W, [3, 3, 0, 0], [0] * W], [0, 0, 5, 0], [40] * W)
    assert p["problems"][2] == (odyn.SUM_ABOVE_ROWS, -1, 6)
    # everyone sends rank 0 everything: capacity 7 keeps rank 0's 5, two of rank 1's, none of the rest
    p = odyn.plan([[5, 0, 0, 0]] * W, [5] * W, [7, 0, 0, 0])
    assert [p["moved"][s][0] for s in range(W)] == [5, 2, 0, 0] and p["cut"][0] == 1 and p["announced"][0] == 20
    got = _C.dynamic_all_to_all_plan([[5, 0, 0, 0]] * W, [5] * W, [7, 0, 0, 0])
    assert [got["moved"][s][0] for s in range(W)] == [5, 2, 0, 0] and got["cut"][0] == 1
    # a saturating sum
    assert odyn.check_send_counts([INT64_MAX, 5], 10)[0] == (odyn.SUM_ABOVE_ROWS, -1, INT64_MAX)
    got = _C.dynamic_all_to_all_plan([[INT64_MAX, 5], [0, 0]], [10, 0], [1, 1])
    assert tuple(got["problems"][0]) == (odyn.SUM_ABOVE_ROWS, -1, INT64_MAX)


# ---------------------------------------------------------------- the data: twin vs oracle, dynamic vs host-sized
def _bits(rng, n, dtype):
    return oracle.from_f32(rng.standard_normal(n).astype(np.float32), dtype)


def _same(got, want, dtype) -> bool:
    """Equal values (the spec's latitude: the sign of a zero, NaN payloads), same length."""
    g, w = oracle.to_f32(np.asarray(got), dtype), oracle.to_f32(np.asarray(want), dtype)
    return g.shape == w.shape and bool(np.all((g == w) | (np.isnan(g) & np.isnan(w))))


CODECS = ["fp16", "lossless", "fp8", "int8", "int6", "int4", "fp4", "int4h", "int6h"]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("W", [2, 3, 4])
def test_dynamic_data_twin_vs_oracle(dtype, W):
    """The rows the plan moves (truncation by capacity included), through the twin's all-to-all of
    their segments, equal the oracle's bit for bit; for counts that fit, the same as the host-sized
    all-to-all with those counts."""
    rng = np.random.default_rng(7 * W + len(dtype))
    for trial in range(4):
        row = int(rng.choice([1, 3, 8, 40]))
        in_rows = [int(rng.integers(0, 12)) for _ in range(W)]
        counts = [[int(v) for v in rng.multinomial(in_rows[r], np.ones(W) / W)] for r in range(W)]
        tight = trial % 2 == 1
        capacity = [max(0, sum(counts[s][d] for s in range(W)) - (2 if tight else 0)) for d in range(W)]
        xs = [_bits(rng, in_rows[r] * row, dtype) for r in range(W)]
        for codec in CODECS if trial == 0 else ["fp16", "fp8", "int4"]:
            want, p = odyn.all_to_all_dynamic(xs, dtype, codec, counts, row, capacity)
            splits = [[p["moved"][r][d] * row for d in range(W)] for r in range(W)]
            moved = odyn.moved_inputs(xs, p, row)
            got = _C.twin_all_to_all(moved, dtype, codec, splits)
            for d in range(W):
                assert _same(got[d], want[d], dtype), (codec, d)
            if not tight:  # counts that fit: the host-sized all-to-all of the same counts
                host = oex.all_to_all(xs, dtype, codec, [[c * row for c in r] for r in counts])
                for d in range(W):
                    assert np.array_equal(host[d], want[d]), (codec, d)  # the same function of the same segments


# ---------------------------------------------------------------- the Python layer over simulated ranks
class SimDyn:
    """Stands in for quickreduce._C.Communicator's all_to_all_dynamic: the oracle's plan, exact rows."""

    one_shot_max_bytes = 8 << 20

    def __init__(self, fabric, rank, world_size, max_size):
        self.fabric, self.rank, self.W, self.workspace_bytes = fabric, rank, world_size, max_size
        self.problems = []

    def all_to_all_dynamic(self, inp, out, send, recv, count_bytes, row, in_rows, capacity, dtype, codec, stream,
                           pdl=False):
        dt, ct = _TORCH_DTYPES[dtype], (torch.int32 if count_bytes == 4 else torch.int64)
        for ptr in (inp, out):
            assert ptr % 16 == 0
        counts = _view(send, self.W, ct).tolist()
        self.fabric.calls.append(("all_to_all_dynamic", self.rank, counts, row, in_rows, capacity, codec))
        x = _view(inp, in_rows * row, dt).clone()
        everyone = self.fabric.swap(self.rank, (x, counts, in_rows, capacity))
        p = odyn.plan([e[1] for e in everyone], [e[2] for e in everyone], [e[3] for e in everyone])
        o = _view(out, capacity * row, dt)
        at = 0
        for s in range(self.W):
            n, start = p["moved"][s][self.rank] * row, p["send_at"][s][self.rank] * row
            o[at:at + n] = everyone[s][0][start:start + n]
            at += n
        _view(recv, self.W, ct)[:] = torch.tensor(p["recv_counts"][self.rank], dtype=ct)
        self.problems.append(p["problems"][self.rank])

    def check(self):
        pass

    def close(self):
        pass


def _relaxed_check_tensor(self, t, what, dtypes=None):
    if self._c is None:
        raise qr.QuickReduceError("communicator is closed")
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if dtypes is not None and t.dtype not in dtypes:
        raise TypeError(f"{what} has dtype {t.dtype}")
    if not t.is_contiguous():
        raise ValueError(f"{what} is not contiguous")
    if t.numel() and t.data_ptr() % 16:
        raise ValueError(f"{what} is not 16-byte aligned")


@pytest.fixture
def node(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("QUICKREDUCE_TUNE_FILE", raising=False)
    for k in ("QUICKREDUCE_QUANTIZATION", "QUICKREDUCE_QUANTIZATION_ALL_TO_ALL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(Communicator, "_check_tensor", _relaxed_check_tensor)
    monkeypatch.setattr(moe, "_on_comm_device", lambda comm, t: True)
    made = []

    def make(world_size, solo=False, max_size=1 << 20):
        fabric = Fabric(world_size, solo)
        monkeypatch.setattr(_C, "Communicator", lambda rank, w, device, ms, timeout: SimDyn(fabric, rank, w, ms))
        comms = communicators_on(monkeypatch, fabric, world_size, solo, max_size)
        made.extend(weakref.ref(c) for c in comms)
        return comms

    yield make
    for ref in made:
        if ref() is not None:
            ref().close()


def _reference(xs, counts, capacity_rows, rank):
    """torch: rank `rank`'s rows from each source in rank order (counts that fit)."""
    parts = []
    for s, x in enumerate(xs):
        start = sum(counts[s][:rank])
        parts.append(x[start:start + counts[s][rank]])
    return torch.cat(parts)


@pytest.mark.parametrize("W", [2, 3, 4])
@pytest.mark.parametrize("count_dtype", [torch.int32, torch.int64])
def test_rows_in_rank_order(node, W, count_dtype):
    comms = node(W)
    rng = np.random.default_rng(W)
    for trial in range(5):
        rows = [int(rng.integers(0, 9)) for _ in range(W)]
        counts = [[int(v) for v in rng.multinomial(rows[r], np.ones(W) / W)] for r in range(W)]
        if trial == 1:  # all to one rank
            counts = [[rows[r]] + [0] * (W - 1) for r in range(W)]
        xs = [torch.randn(rows[r], 5, 3).to(torch.bfloat16) for r in range(W)]

        def body(c, r):
            out = torch.full((W * 9, 5, 3), 7.0, dtype=torch.bfloat16)
            recv = torch.full((W,), -5, dtype=count_dtype)
            got, got_recv = c.all_to_all_dynamic(xs[r], torch.tensor(counts[r], dtype=count_dtype), out, recv)
            assert got is out and got_recv is recv
            # capacity: the default (W * this rank's rows) holds all only when every rank has as many rows
            functional = c.all_to_all_dynamic(xs[r], torch.tensor(counts[r], dtype=count_dtype), capacity=W * 9)
            return out, recv, functional

        for r, (out, recv, (fout, frecv)) in enumerate(on_every_rank(comms, body)):
            want = _reference(xs, counts, None, r)
            n = want.shape[0]
            assert recv.tolist() == [counts[s][r] for s in range(W)] and recv.dtype == count_dtype
            assert torch.equal(out[:n].view(torch.int16), want.view(torch.int16))
            assert bool((out[n:] == 7.0).all())  # rows past the received ones are not written
            assert fout.shape == (W * 9, 5, 3) and frecv.dtype == count_dtype
            assert torch.equal(fout[:n].view(torch.int16), want.view(torch.int16)) and frecv.tolist() == recv.tolist()


def test_call_arguments_reach_the_kernel(node):
    (c,) = node(4, solo=True)
    x = torch.randn(6, 8, dtype=torch.float16)
    c.all_to_all_dynamic(x, torch.tensor([1, 2, 0, 3]), codec="int4", capacity=10)
    name, rank, counts, row, in_rows, capacity, codec = c.fabric.calls[-1]
    assert (counts, row, in_rows, capacity, codec) == ([1, 2, 0, 3], 8, 6, 10, _C.codec_id("int4"))
    out = torch.empty(9, 8, dtype=torch.float16)
    c.all_to_all_dynamic(x, torch.tensor([1, 2, 0, 3], dtype=torch.int32), out)
    assert c.fabric.calls[-1][5] == 9  # capacity: out's rows
    c.all_to_all_dynamic(x, torch.tensor([1, 2, 0, 3], dtype=torch.int32), out, capacity=4)
    assert c.fabric.calls[-1][5] == 4
    c.all_to_all_dynamic(x.view(-1), torch.tensor([12, 12, 0, 24]))  # 1-D: rows of one value
    assert c.fabric.calls[-1][3:6] == (1, 48, 4 * 48)


def test_argument_errors(node):
    (c,) = node(2, solo=True, max_size=4096)
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    counts = torch.tensor([4, 4])
    cases = [
        (TypeError, "host-sized", lambda: c.all_to_all_dynamic(x, [4, 4])),
        (TypeError, "int32 or torch.int64", lambda: c.all_to_all_dynamic(x, counts.float())),
        (ValueError, r"shape \(2,\)", lambda: c.all_to_all_dynamic(x, torch.tensor([4, 4, 0]))),
        (ValueError, "at least one dimension", lambda: moe.all_to_all_dynamic(c, torch.tensor(1.0), counts)),
        (TypeError, "dtype", lambda: c.all_to_all_dynamic(x, counts, torch.empty(16, 16))),
        (ValueError, "rows must hold", lambda: c.all_to_all_dynamic(x, counts, torch.empty(16, 8, dtype=torch.bfloat16))),
        (ValueError, "more rows than out has", lambda: c.all_to_all_dynamic(
            x, counts, torch.empty(4, 16, dtype=torch.bfloat16), capacity=5)),
        (ValueError, "capacity must be", lambda: c.all_to_all_dynamic(x, counts, capacity=-1)),
        (TypeError, "one type", lambda: c.all_to_all_dynamic(
            x, counts, torch.empty(16, 16, dtype=torch.bfloat16), torch.empty(2, dtype=torch.int32))),
        (ValueError, "overlaps x", lambda: c.all_to_all_dynamic(x, counts, x)),
        (ValueError, "output_split_sizes overlaps input_split_sizes", lambda: c.all_to_all_dynamic(
            x, counts, torch.empty(16, 16, dtype=torch.bfloat16), counts)),
        (ValueError, "max_size", lambda: c.all_to_all_dynamic(x, counts, capacity=1000)),
        (ValueError, "unknown codec", lambda: c.all_to_all_dynamic(x, counts, codec="int3")),
    ]
    for exc, words, fn in cases:
        with pytest.raises(exc, match=words):
            fn()


def test_counts_on_the_host_are_refused(monkeypatch):
    comm = SimpleNamespace(world_size=2, device=0)
    with pytest.raises(ValueError, match="stay on the GPU"):
        moe._check_counts(comm, torch.tensor([1, 2]), "input_split_sizes")


def test_split_size_error_is_exported():
    assert issubclass(qr.SplitSizeError, qr.QuickReduceError)
    assert qr.SplitSizeError is _C.SplitSizeError is moe.SplitSizeError


# ---------------------------------------------------------------- the custom op
def test_op_schema_is_functional():
    s = torch.ops.quickreduce.all_to_all_dynamic.default._schema
    assert str(s) == ("quickreduce::all_to_all_dynamic(Tensor x, Tensor input_split_sizes, SymInt handle, "
                      "SymInt capacity, str? codec=None) -> (Tensor, Tensor)")
    assert not s.is_mutable and all(a.alias_info is None for a in s.arguments)


@pytest.mark.parametrize("W", [2, 4, 8])
def test_fake_shapes(node, W):
    from torch._subclasses.fake_tensor import FakeTensorMode
    (c,) = node(W, solo=True)
    with FakeTensorMode():
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            for cdt in (torch.int32, torch.int64):
                x = torch.empty(5, 7, 3, dtype=dtype)
                out, recv = torch.ops.quickreduce.all_to_all_dynamic(x, torch.empty(W, dtype=cdt), c.handle, 11)
                assert out.shape == (11, 7, 3) and out.dtype == dtype and recv.shape == (W,) and recv.dtype == cdt
        with pytest.raises(ValueError, match="int32 or int64"):
            torch.ops.quickreduce.all_to_all_dynamic(torch.empty(4, 2), torch.empty(W), c.handle, 4)


def test_opcheck(node):
    (c,) = node(4, solo=True)
    x = torch.randn(8, 6, dtype=torch.bfloat16)
    for counts in (torch.tensor([2, 2, 2, 2]), torch.tensor([0, 8, 0, 0], dtype=torch.int32)):
        torch.library.opcheck(torch.ops.quickreduce.all_to_all_dynamic.default, (x, counts, c.handle, 32))
        torch.library.opcheck(torch.ops.quickreduce.all_to_all_dynamic.default, (x, counts, c.handle, 32, "fp8"))


def test_method_calls_the_op(node):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    (c,) = node(2, solo=True)
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    with Recorder() as rec:
        c.all_to_all_dynamic(x, torch.tensor([1, 3]))
    assert [o for o in rec.ops if o.startswith("quickreduce.")] == ["quickreduce.all_to_all_dynamic.default"]
    with Recorder() as rec:  # out= keeps the direct path
        c.all_to_all_dynamic(x, torch.tensor([1, 3]), torch.empty(8, 8, dtype=torch.bfloat16))
    assert not [o for o in rec.ops if o.startswith("quickreduce.")]


# ---------------------------------------------------------------- a MoE layer under torch.compile
def _moe_layer(comm, num_experts, topk):
    def layer(x, weights, ids):  # the routing (softmax, top-k) outside: compiled softmax may round differently
        order, send, _ = moe.dispatch_layout(ids, num_experts, comm.world_size)
        rows = x.index_select(0, torch.div(order, topk, rounding_mode="floor"))
        recv_x, recv = comm.all_to_all_dynamic(rows, send, capacity=comm.world_size * rows.shape[0])
        y = recv_x * 2  # a stand-in expert
        back, _ = comm.all_to_all_dynamic(y, recv, capacity=rows.shape[0])
        unsorted = torch.empty_like(back).index_copy_(0, order, back)
        return (unsorted.view(x.shape[0], topk, -1).float() * weights.unsqueeze(-1)).sum(1).to(x.dtype)
    return layer


def test_moe_layer_traces_without_a_graph_break(node):
    torch._dynamo.reset()
    (c,) = node(4, solo=True)
    layer = _moe_layer(c, 8, 2)
    x = torch.randn(6, 16, dtype=torch.bfloat16)
    weights, ids = torch.topk(torch.softmax(torch.randn(6, 8), -1), 2, dim=-1)
    explained = torch._dynamo.explain(layer)(x, weights, ids)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1
    assert explained.graphs[0].code.count("torch.ops.quickreduce.all_to_all_dynamic") == 2


@pytest.mark.parametrize("backend,solo", [("aot_eager", False), ("inductor", True)])
def test_compiled_moe_layer_equals_eager(node, backend, solo):
    """Two simulated ranks (aot_eager), or one standing for both (inductor: its compile is slow)."""
    torch._dynamo.reset()
    W, E, k = 2, 8, 2
    comms = node(W, solo=solo)
    gate = torch.randn(16, E)
    xs = [torch.randn(5, 16, dtype=torch.bfloat16) for _ in range(W)]

    if solo:
        xs = [xs[0]] * W
    routes = [torch.topk(torch.softmax(x.float() @ gate, -1), k, dim=-1) for x in xs]

    def body(c, r):
        layer = _moe_layer(c, E, k)
        compiled = torch.compile(layer, fullgraph=True, backend=backend)
        return layer(xs[r], *routes[r]), compiled(xs[r], *routes[r])

    for r, (eager, compiled) in enumerate(on_every_rank(comms, body)):
        assert torch.equal(eager.view(torch.int16), compiled.view(torch.int16))
        if solo:  # one thread standing for every rank receives its own rows W times: no formula
            continue
        # every pair comes back doubled: the layer is 2 * x * (sum of the top-k weights)
        want = (xs[r].float().unsqueeze(1) * 2 * routes[r][0].unsqueeze(-1)).sum(1).to(torch.bfloat16)
        assert torch.equal(eager.view(torch.int16), want.view(torch.int16))


def test_dispatch_combine_helpers(node):
    W, E, k, T = 4, 16, 3, 7
    comms = node(W)
    g = torch.Generator().manual_seed(3)
    ids = [torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)]) for _ in range(W)]
    xs = [torch.randn(T, 8, generator=g).to(torch.bfloat16) for _ in range(W)]

    def body(c, r):
        eids = torch.empty(W * T * k, 1)
        recv_x, recv, handle, got_ids = moe.dispatch(c, xs[r], ids[r], E, expert_ids_out=eids)
        n = int(recv.sum())
        # the rows this rank got belong to its experts
        assert bool(((got_ids[:n] // (E // W)) == r).all())
        back = moe.combine(c, recv_x * 3, handle)
        return back, n

    for r, (back, n) in enumerate(on_every_rank(comms, body)):
        assert back.shape == (T, k, 8)
        assert torch.equal(back.float(), (xs[r].float() * 3).unsqueeze(1).expand(T, k, 8).to(torch.bfloat16).float())
    assert sum(n for _, n in on_every_rank(comms, body)) == W * T * k


def test_dispatch_layout():
    ids = torch.tensor([[0, 5], [7, 1], [4, 3]])
    order, counts, dest = moe.dispatch_layout(ids, 8, 2)
    assert dest.tolist() == [0, 1, 1, 0, 1, 0]
    assert counts.tolist() == [3, 3] and counts.dtype == torch.int32
    assert order.tolist() == [0, 3, 5, 1, 2, 4]
    with pytest.raises(ValueError, match="evenly"):
        moe.dispatch_layout(ids, 6, 4)


def test_bench_layer_flow(node):
    """The bench's MoE layer (cli/moe_bench.py Layer.forward_dynamic: router, dispatch, stand-in expert,
    combine, weighted sum) on simulated ranks: every pair comes back doubled, so the output is
    2 * x * (sum of the top-k weights), the router's counts change with the step."""
    from quickreduce.cli import moe_bench
    W, T = 2, 6
    comms = node(W)

    def body(c, r):
        layer = moe_bench.Layer(r, W, "mixtral", T, "heavy", 3, device=torch.device("cpu"), shape=(16, 8, 2))
        layer.comm = c
        layer.allocate(W * T * 2)
        outs, sends = [], []
        for _ in range(3):
            step = int(layer.step)
            weights, ids = layer.route()
            layer.step.fill_(step)
            sends.append(moe.dispatch_layout(ids, 8, W)[1].tolist())
            outs.append((layer.forward_dynamic("bf16"), weights))
        return layer.x, outs, sends

    for x, outs, sends in on_every_rank(comms, body):
        for out, weights in outs:
            want = (x.float().unsqueeze(1) * 2 * weights.unsqueeze(-1)).sum(1).to(torch.bfloat16)
            assert torch.equal(out.view(torch.int16), want.view(torch.int16))
        assert sum(map(sum, sends)) == 3 * T * 2


def test_bench_moe_cli_parsing():
    from quickreduce.cli import moe_bench
    c = moe_bench.config_from(moe_bench.build_parser().parse_args(
        ["--tokens", "1,256", "--model", "mixtral", "--a2a-sizes", "8K,256M", "--methods", "qr_graph:fp8,nccl"]))
    assert c.tokens == [1, 256] and c.models == ["mixtral"] and c.a2a_sizes == [8192, 256 << 20]
    assert c.methods == ["qr_graph:fp8", "nccl"]
    for bad in (["--model", "llama"], ["--skew", "extreme"], ["--methods", "gloo"], ["--part", "all"]):
        with pytest.raises(ValueError):
            moe_bench.config_from(moe_bench.build_parser().parse_args(bad))


def _fake_cuda_timing(monkeypatch, elapsed_ms):
    """CUDA events that return `elapsed_ms` in turn, and a barrier, GPU sleep and event records that
    are logged; returns the log."""
    log = []
    elapsed = iter(elapsed_ms)

    class FakeEvent:
        def __init__(self, enable_timing=False):
            assert enable_timing

        def record(self):
            log.append("record")

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return next(elapsed)

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.distributed, "barrier", lambda *a, **k: log.append("barrier"))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append("sleep"), raising=False)
    return log


def test_bench_moe_times_median_of_event_samples(monkeypatch):
    """`bench moe`'s timer: warm-up calls untimed, then one call a sample between CUDA events after a
    barrier and a GPU sleep (the launch enqueued before the start), the median of the samples in
    microseconds (not the mean: one slow sample moves nothing)."""
    from quickreduce.cli import moe_bench
    log = _fake_cuda_timing(monkeypatch, [0.010, 0.011, 0.500, 0.012, 0.013])  # one outlier among five samples
    us = moe_bench._time(lambda: log.append("call"), samples=5, warmup=2)
    assert us == pytest.approx(12.0)  # the median of 10, 11, 500, 12, 13 us
    assert log[:2] == ["call", "call"]  # the warm-up, untimed
    assert log[2:] == ["barrier", "sleep", "record", "call", "record"] * 5


def test_bench_moe_a2a_timer_alternates_its_calls(monkeypatch):
    """The a2a part times the dynamic and the host-sized graphs in turns, sample by sample (so a slow
    stretch of the machine lands on both, not on one), each its own median."""
    from quickreduce.cli import moe_bench
    log = _fake_cuda_timing(monkeypatch, [0.020, 0.010, 0.021, 0.011, 0.900, 0.500, 0.022, 0.012])
    dyn_us, host_us = moe_bench._time_alternating([lambda: log.append("dyn"), lambda: log.append("host")],
                                                  samples=4, warmup=1)
    assert dyn_us == pytest.approx(21.5)  # the median of 20, 21, 900, 22 us
    assert host_us == pytest.approx(11.5)  # the median of 10, 11, 500, 12 us
    assert log[:2] == ["dyn", "host"]  # the warm-up, untimed
    one = ["barrier", "sleep", "record"]
    assert log[2:] == (one + ["dyn", "record"] + one + ["host", "record"]) * 4
