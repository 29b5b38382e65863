"""GPU scenarios of quickreduce inside torch (see harness.py): ReduceOp AVG/MAX/MIN against references,
async_op work objects overlapped with compute, the custom ops under CUDA-graph capture, and
torch.compile(fullgraph=True) of tensor-parallel blocks (no graph break; mode="reduce-overhead" for
QR_TORCH_STEPS steps, 1000 by default).

Every rank builds every rank's inputs from the same seeds, so each computes its references locally.
"""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

import quickreduce as qr

from collective_scenarios import rank_inputs, same_values  # noqa: E402  (tests/gpu is on sys.path)
from scenarios import same_on_all_ranks  # noqa: E402

RO = dist.ReduceOp
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
SIZES = [1, 7, 33, 1000, 4097, 65_537, 300_001]
STEPS = int(os.environ.get("QR_TORCH_STEPS", "1000"))


def _int_view(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def same_bits(got: torch.Tensor, want: torch.Tensor) -> str | None:
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"got shape {tuple(got.shape)} {got.dtype}, want {tuple(want.shape)} {want.dtype}"
    if torch.equal(_int_view(got), _int_view(want)):
        return None
    bad = _int_view(got) != _int_view(want)
    i = int(torch.nonzero(bad.reshape(-1))[0])
    return (f"{int(bad.sum())} of {got.numel()} differ in bits, first at {i}: got {got.reshape(-1)[i].item()!r} "
            f"want {want.reshape(-1)[i].item()!r}; max |diff| {float((got.float() - want.float()).abs().max()):.3g}")


def rank_order_sum(xs: list[torch.Tensor]) -> torch.Tensor:
    acc = torch.zeros_like(xs[0], dtype=torch.float32)
    for x in xs:  # the kernels' order: rank 0 first, fp32, rounded once
        acc += x.float()
    return acc.to(xs[0].dtype)


def with_specials(xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Signed zeros, infinities and a NaN where the ranks disagree (n >= 5)."""
    for r, x in enumerate(xs):
        if x.numel() >= 5:
            x[0] = (-1) ** r * 0.0
            x[1] = float("inf") if r == len(xs) - 1 else -3.0
            x[2] = float("-inf") if r == 0 else 2.0
            x[3] = float("nan") if r == 1 else 1.0
    return xs


def _expect(res, name, exc, fn, words):
    try:
        fn()
        res[name] = "no exception"
    except exc as e:
        res[name] = None if all(w in str(e) for w in words) else f"message lacks {words}: {e}"
    except Exception as e:  # noqa: BLE001
        res[name] = f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- ReduceOp
def reduce_ops(rank, world_size):
    """SUM/AVG/MAX/MIN of all_reduce and reduce_scatter, fp16/bf16/fp32, odd sizes: exact SUM equals the
    rank-order reference bit for bit; AVG equals the same call's SUM divided by W (every codec);
    MAX/MIN equal torch.amax/amin over the ranks' inputs (values; the sign of a zero maximum and NaN
    payloads are free) and are bitwise identical on every rank."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=16 << 20)
    for dname, dtype in DTYPES.items():
        for i, n in enumerate(SIZES):
            finite = rank_inputs(70_000 + 97 * i + len(dname), W * n, dtype, W)  # SUM/AVG
            xs = with_specials([t.clone() for t in finite])  # MAX/MIN
            x, xf = xs[rank], finite[rank]
            stacked = torch.stack(xs)
            tag = f"{dname}/n={W * n}"
            s = comm.all_reduce(xf, codec="fp16")
            avg = comm.all_reduce(xf, codec="fp16", op=RO.AVG)
            mx = comm.all_reduce(x, op=RO.MAX)
            mn = comm.all_reduce(x, codec="lossless", op="min")
            mx_in_place = x.clone()
            comm.all_reduce(mx_in_place, out=mx_in_place, op=RO.MAX)
            rs_avg = comm.reduce_scatter(xf, op=RO.AVG)
            s_rs = comm.reduce_scatter(xf, codec="fp16")
            rs_mx = comm.reduce_scatter(x, op=RO.MAX)
            rs_mn = comm.reduce_scatter(x, codec="auto", op=RO.MIN)
            torch.cuda.synchronize()
            comm.check()
            res[f"all_reduce SUM exact {tag}"] = same_bits(s, rank_order_sum(finite))
            res[f"all_reduce AVG {tag}"] = same_bits(avg, s / W)
            res[f"all_reduce MAX {tag}"] = same_values(mx, stacked.amax(0))
            res[f"all_reduce MIN {tag}"] = same_values(mn, stacked.amin(0))
            res[f"all_reduce MAX in place {tag}"] = same_values(mx_in_place, stacked.amax(0))
            blocks = stacked[:, rank * n:(rank + 1) * n]
            res[f"reduce_scatter SUM exact {tag}"] = same_bits(s_rs, rank_order_sum([t[rank * n:(rank + 1) * n]
                                                                                     for t in finite]))
            res[f"reduce_scatter AVG {tag}"] = same_bits(rs_avg, s_rs / W)
            res[f"reduce_scatter MAX {tag}"] = same_values(rs_mx, blocks.amax(0))
            res[f"reduce_scatter MIN {tag}"] = same_values(rs_mn, blocks.amin(0))
            for what, t in (("AVG", avg), ("MAX", mx), ("MIN", mn)):  # (reduce-scatter blocks differ by rank)
                res[f"{what} identical {tag}"] = None if same_on_all_ranks(t) else "ranks differ"
        # AVG with lossy codecs and each all-reduce algorithm: SUM's bits divided by W.
        xs = rank_inputs(71_000 + len(dname), 40_000, dtype, W)
        for codec in ("int4", "fp8", "int8"):
            a = comm.all_reduce(xs[rank], codec=codec, op=RO.AVG)
            b = comm.all_reduce(xs[rank], codec=codec)
            res[f"AVG {dname}/{codec}"] = same_bits(a, b / W)
            res[f"AVG identical {dname}/{codec}"] = None if same_on_all_ranks(a) else "ranks differ"
        if dtype != torch.float32:
            for algo in ("one_shot", "two_shot"):
                a = comm.all_reduce(xs[rank], algo=algo, op=RO.AVG)
                res[f"AVG {dname}/{algo}"] = same_bits(a, rank_order_sum(xs) / W)
    x = torch.randn(W * 64, device="cuda", dtype=torch.bfloat16)
    _expect(res, "MAX with int4", ValueError, lambda: comm.all_reduce(x, codec="int4", op=RO.MAX), ["exact"])
    _expect(res, "MIN with fp8 reduce_scatter", ValueError, lambda: comm.reduce_scatter(x, codec="fp8", op=RO.MIN),
            ["exact"])
    _expect(res, "PRODUCT", ValueError, lambda: comm.all_reduce(x, op=RO.PRODUCT), ["SUM, AVG, MAX or MIN"])
    _expect(res, "MAX two_shot", ValueError, lambda: comm.all_reduce(x, algo="two_shot", op=RO.MAX), ["algo"])
    _expect(res, "async_op not bool", TypeError, lambda: comm.all_reduce(x, async_op=1), ["async_op"])
    dist.barrier()
    comm.close()
    return res


# ---------------------------------------------------------------- async_op
def async_overlap(rank, world_size):
    """async_op=True on a side stream, overlapped with matmuls on the caller's stream: the collective
    sees what the caller's stream wrote just before the call (a persistent input rewritten every
    iteration after a long matmul), wait() orders the caller's stream after it (the output is checked
    on the caller's stream right after wait()), inputs dropped right after the call stay valid, and
    is_completed() turns True."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=16 << 20)
    n = (1 << 20) + 3
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64  # ~0.2 ms a product on an H100
    x = torch.zeros(n, device="cuda", dtype=torch.bfloat16)
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")
    works, completed_early = 0, 0
    t0 = time.time()
    for it in range(40):
        xs = rank_inputs(80_000 + it, n, torch.bfloat16, W)
        want = rank_order_sum(xs)
        src = xs[rank].clone()
        torch.cuda.synchronize()
        busy = a @ a @ a  # the caller's stream is busy ...
        x.copy_(src)  # ... and writes the input after it: the side stream must wait for this
        kind = it % 4
        if kind == 0:
            work = comm.all_reduce(x, async_op=True)
        elif kind == 1:
            out = torch.empty_like(x)
            work = comm.all_reduce(x, out=out, async_op=True)
        elif kind == 2:
            tmp = x.clone()
            work = comm.all_reduce(tmp, async_op=True)
            del tmp  # the work keeps it alive and its memory is not reused before the collective ends
            torch.empty(n, device="cuda", dtype=torch.bfloat16).fill_(7.0)
        else:
            work = comm.all_reduce(x, op=RO.AVG, async_op=True)
            want = want / W
        for _ in range(3):
            busy = busy @ a  # overlapped compute on the caller's stream
        completed_early += int(work.is_completed())
        ok = work.wait()
        y = work.result()[0]
        wrong += (_int_view(y) != _int_view(want)).sum()  # on the caller's stream, after wait()
        works += int(ok is True)
    torch.cuda.synchronize()
    comm.check()
    res["all_reduce results"] = None if int(wrong) == 0 else f"{int(wrong)} wrong elements"
    res["wait() returns True"] = None if works == 40 else f"{40 - works} waits did not return True"
    res["is_completed after synchronize"] = None if work.is_completed() else "is_completed() is False"
    res["info/all_reduce"] = (f"40 async all-reduces in {time.time() - t0:.1f}s; {completed_early} had completed "
                              f"before wait() (0 means the caller's matmuls were still running)")

    # The other collectives, async, each checked after wait().
    k = 4096 + 8
    xs = rank_inputs(81_000, W * k, torch.float16, W)
    xr = torch.zeros(W * k, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    _ = a @ a
    xr.copy_(xs[rank])
    w_rs = comm.reduce_scatter(xr, async_op=True)
    w_rs_max = comm.reduce_scatter(xr, op=RO.MAX, async_op=True)
    w_ag = comm.all_gather(xr[:k], async_op=True)
    a2a_out = torch.empty_like(xr)
    w_a2a = comm.all_to_all(xr, out=a2a_out, async_op=True)
    w_max = comm.all_reduce(xr, op=RO.MAX, async_op=True)
    for w in (w_rs, w_rs_max, w_ag, w_a2a, w_max):
        w.wait()
    block = [t[rank * k:(rank + 1) * k] for t in xs]
    res["reduce_scatter"] = same_bits(w_rs.result()[0], rank_order_sum(block))
    res["reduce_scatter MAX"] = same_values(w_rs_max.result()[0], torch.stack(block).amax(0))
    res["all_gather"] = same_bits(w_ag.result()[0], torch.cat([t[:k] for t in xs]))
    res["all_to_all out="] = same_bits(a2a_out, torch.cat(block))
    res["all_to_all result is out"] = None if w_a2a.result()[0] is a2a_out else "result() is not out"
    res["all_reduce MAX"] = same_values(w_max.result()[0], torch.stack(xs).amax(0))
    res["is a torch Work"] = None if isinstance(w_rs, dist.Work) else f"{type(w_rs)}"
    torch.cuda.synchronize()
    comm.check()
    dist.barrier()
    comm.close()
    return res


# ---------------------------------------------------------------- the ops under CUDA-graph capture
def op_graph_capture(rank, world_size):
    """The methods with out=None (the custom ops, outputs from the graph's pool) captured in one CUDA
    graph and replayed QR_TORCH_STEPS times with new inputs; every output checked on the GPU."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=8 << 20)
    k = 8192
    bank = []
    for b in range(4):
        xs = rank_inputs(82_000 + b, W * k, torch.bfloat16, W)
        block = [t[rank * k:(rank + 1) * k] for t in xs]
        bank.append((xs[rank], rank_order_sum(xs), rank_order_sum(block),
                     torch.cat([t[:k] for t in xs]), torch.cat(block), torch.stack(xs).amax(0), rank_order_sum(xs) / W))
    x = torch.empty(W * k, device="cuda", dtype=torch.bfloat16)
    want = [torch.empty_like(t) for t in bank[0][1:]]
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")

    def body():
        outs = (comm.all_reduce(x), comm.reduce_scatter(x), comm.all_gather(x[:k]), comm.all_to_all(x),
                comm.all_reduce(x, op=RO.MAX), comm.all_reduce(x, op=RO.AVG))
        for o, w_ in zip(outs, want):
            wrong.add_((o.view(torch.int16) != w_.view(torch.int16)).sum())

    def load(b):
        x.copy_(bank[b][0])
        for w_, t in zip(want, bank[b][1:]):
            w_.copy_(t)

    load(0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    res["warm-up correct"] = None if int(wrong) == 0 else f"{int(wrong)} wrong elements"
    wrong.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    t0 = time.time()
    for it in range(STEPS):
        load(it % len(bank))
        g.replay()
    torch.cuda.synchronize()
    comm.check()
    res["replays correct"] = None if int(wrong) == 0 else f"{int(wrong)} wrong elements"
    res["info/replays"] = f"{STEPS} replays x 6 calls in {time.time() - t0:.1f}s"
    del g
    dist.barrier()
    comm.close()
    return res


# ---------------------------------------------------------------- torch.compile
def _counters():
    from torch._dynamo.utils import counters
    return counters


def _compile_checks(res, tag, fn, args, comm, bank, steps):
    """explain: one graph, no break, our op in it; fullgraph compile == eager; reduce-overhead over
    `steps` steps with inputs from `bank` ((args, reference outputs) pairs), every output checked."""
    torch._dynamo.reset()
    explained = torch._dynamo.explain(fn)(*args)
    res[f"{tag}: no graph break"] = None if explained.graph_break_count == 0 else \
        f"{explained.graph_break_count} breaks: {explained.break_reasons}"
    res[f"{tag}: one graph"] = None if explained.graph_count == 1 else f"{explained.graph_count} graphs"
    code = explained.graphs[0].code if explained.graphs else ""
    res[f"{tag}: quickreduce op in the graph"] = None if "torch.ops.quickreduce." in code else code[:500]

    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)
    for i, (b_args, b_want) in enumerate(bank[:2]):
        got = compiled(*b_args)
        got = got if isinstance(got, tuple) else (got,)
        for j, (g_, w_) in enumerate(zip(got, b_want)):
            res[f"{tag}: compiled == eager, input {i} output {j}"] = same_bits(g_, w_)

    torch._dynamo.reset()
    counters = _counters()
    skips0 = counters["inductor"]["cudagraph_skips"]
    graphed = torch.compile(fn, fullgraph=True, mode="reduce-overhead")
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")
    t0 = time.time()
    for step in range(steps):
        b_args, b_want = bank[step % len(bank)]
        torch.compiler.cudagraph_mark_step_begin()
        got = graphed(*b_args)
        got = got if isinstance(got, tuple) else (got,)
        for g_, w_ in zip(got, b_want):
            wrong += (_int_view(g_) != _int_view(w_)).sum()
    torch.cuda.synchronize()
    comm.check()
    skips = counters["inductor"]["cudagraph_skips"] - skips0
    res[f"{tag}: reduce-overhead {steps} steps correct"] = None if int(wrong) == 0 else f"{int(wrong)} wrong elements"
    res[f"{tag}: CUDA graphs used"] = None if skips == 0 else f"inductor skipped cudagraphs {skips} times"
    res[f"info/{tag}"] = f"{steps} reduce-overhead steps in {time.time() - t0:.1f}s"
    identical = got[0]
    res[f"{tag}: identical on every rank"] = None if same_on_all_ranks(identical.clone()) else "ranks differ"


def compiled_tp_block(rank, world_size):
    """A row-parallel linear (x @ w_shard, then comm.all_reduce) under torch.compile(fullgraph=True):
    zero graph breaks; the compiled output equals eager bit for bit; mode="reduce-overhead" (CUDA
    graphs) runs QR_TORCH_STEPS steps correctly."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=16 << 20)
    tokens, hidden = 64, 1024
    shard = hidden // W
    g = torch.Generator(device="cuda").manual_seed(90_000 + rank)
    w = (torch.randn(shard, hidden, generator=g, device="cuda") / 32).to(torch.bfloat16)

    def block(x, w):
        return comm.all_reduce(x @ w)

    bank = []
    for b in range(4):
        g = torch.Generator(device="cuda").manual_seed(91_000 + 31 * b + rank)
        x = torch.randn(tokens, shard, generator=g, device="cuda").to(torch.bfloat16)
        bank.append(((x, w), (block(x, w).clone(),)))
    torch.cuda.synchronize()
    # The eager reference itself: exact, so the sum of every rank's partial product, in rank order.
    partials = [None] * W
    dist.all_gather_object(partials, (bank[0][0][0] @ w).cpu())
    res["eager == rank-order sum of partials"] = same_bits(bank[0][1][0].cpu(), rank_order_sum(partials))
    _compile_checks(res, "tp block", block, bank[0][0], comm, bank, STEPS)
    dist.barrier()
    comm.close()
    return res


def compiled_family(rank, world_size):
    """Sequence-parallel style: reduce_scatter, all_gather, all_to_all and all_reduce with AVG/MAX in
    one compiled function: no graph break, compiled == eager, 200 reduce-overhead steps."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=16 << 20)
    tokens, hidden = 16 * W, 512
    g = torch.Generator(device="cuda").manual_seed(92_000 + rank)
    w = (torch.randn(hidden, hidden, generator=g, device="cuda") / 32).to(torch.bfloat16)
    splits = [d + 1 for d in range(W)]  # rows to rank d, the same on every rank (uneven)
    recv = [rank + 1] * W  # so every rank sends this rank rank + 1 rows

    def fn(x, w):
        h = x @ w
        s = comm.reduce_scatter(h)                 # [tokens / W, hidden]
        full = comm.all_gather(torch.relu(s))      # [tokens, hidden]
        # ops as strings: torch 2.11's dynamo cannot compare ReduceOp objects (eager takes either)
        avg = comm.all_reduce(full, op="avg")
        mx = comm.all_reduce(h, op="max")
        moved = comm.all_to_all(h[:sum(splits)].contiguous(), output_split_sizes=recv, input_split_sizes=splits)
        return avg, mx, moved

    bank = []
    for b in range(4):
        g = torch.Generator(device="cuda").manual_seed(93_000 + 31 * b + rank)
        x = torch.randn(tokens, hidden, generator=g, device="cuda").to(torch.bfloat16)
        bank.append(((x, w), tuple(t.clone() for t in fn(x, w))))
    torch.cuda.synchronize()
    _compile_checks(res, "family", fn, bank[0][0], comm, bank, min(STEPS, 200))
    dist.barrier()
    comm.close()
    return res


def op_overhead(rank, world_size):
    """Host time of one eager call: through the custom op (out=None) and the direct path (out=); info only."""
    res = {}
    comm = qr.Communicator(max_size=1 << 20)
    x = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    times = {}
    for name, call in (("op (out=None)", lambda: comm.all_reduce(x)),
                       ("direct (out=)", lambda: comm.all_reduce(x, out=out))):
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(200):
            call()
        times[name] = (time.perf_counter() - t0) / 200 * 1e6
        torch.cuda.synchronize()
        dist.barrier()
    comm.check()
    res["info/host time per call"] = ", ".join(f"{k}: {v:.1f} us" for k, v in times.items()) + \
        " (with shared GPUs the GPU, not the host, sets this)"
    res["ran"] = None
    comm.close()
    return res
