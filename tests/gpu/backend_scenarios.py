"""GPU scenarios of the torch.distributed backend (quickreduce/distributed.py), run by test_backend_gpu.py.

Every rank's default group is ``init_process_group("cpu:gloo,cuda:quickreduce")`` (``run`` below: as
harness.run_scenarios, with that backend), so ``dist.*`` calls without a group, DTensor's
``init_device_mesh("cuda", ...)`` and the functional collectives all use it.

Shared GPU (QR_TEST_SHARED_GPU=1 and fewer GPUs than ranks): every rank on GPU 0 with
QUICKREDUCE_ALLOW_SHARED_GPU=1, which makes the backend's fallback gloo (NCCL refuses two ranks on one
GPU). The fallback checks then use what gloo does with CUDA tensors (all_reduce, broadcast; barrier and
object collectives go through gloo on the CPU); send/recv and bf16 fallbacks run with one GPU a rank
only (NCCL), and say so in an info line otherwise.

Every rank builds every rank's inputs from the same seeds, so each computes its references locally:
the exact collectives must equal the fp32 rank-order reference bit for bit (the default codec) and be
identical on every rank.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

import harness  # noqa: E402  (tests/gpu is on sys.path)
from collective_scenarios import rank_inputs, same_values  # noqa: E402
from scenarios import same_on_all_ranks  # noqa: E402
from torch_scenarios import rank_order_sum, same_bits  # noqa: E402

RO = dist.ReduceOp
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
COUNTS = [1, 7, 33, 1000, 4097, 65_537]  # values per rank's block
STEPS = int(os.environ.get("QR_TORCH_STEPS", "1000"))


# ---------------------------------------------------------------- helpers
def _routed(pg, collective: str, where: str = "quickreduce") -> int:
    return pg.routed[(collective, where)]


def _grew(pg, before: dict, collective: str, where: str = "quickreduce") -> str | None:
    n = pg.routed[(collective, where)] - before.get((collective, where), 0)
    return None if n > 0 else f"no {collective} went to {where}: {dict(pg.routed)}"


def _quickreduce_kernels(fn) -> list[str]:
    """Names of the quickreduce CUDA kernels (namespace qr::) that ran during fn()."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if "qr::" in e.name and "kernel" in e.name})


def _expect(res, name, exc, fn, words, cause=None):
    try:
        fn()
        res[name] = "no exception"
    except exc as e:
        if not all(w in str(e) for w in words):
            res[name] = f"message lacks {words}: {e}"
        elif cause is not None and not isinstance(e.__cause__, cause):
            res[name] = f"__cause__ is {type(e.__cause__).__name__}, want {cause.__name__}"
        else:
            res[name] = None
    except Exception as e:  # noqa: BLE001
        res[name] = f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- the scenarios
def collectives_exact(rank, world_size):
    """dist.all_reduce (SUM, AVG, MAX, MIN), reduce_scatter_tensor, all_gather_into_tensor and all_to_all_single
    (even and uneven) on the default group, fp16/bf16/fp32, odd sizes: SUM equals the fp32 rank-order sum bit
    for bit (the default codec is exact), AVG that sum divided by W, MAX/MIN torch's amax/amin; identical bits
    on every rank; every call went through quickreduce (counters, and a profile shows qr:: kernels); the first
    call created the communicator (lazily, on this rank's GPU)."""
    import quickreduce.distributed as qd
    res = {}
    W = world_size
    pg = dist.group.WORLD
    res["default group is the backend"] = None if isinstance(pg, qd.ProcessGroupQuickreduce) else repr(pg)
    res["no communicator before the first call"] = None if pg.communicator is None else "created early"
    res["info/fallback"] = f"fallback backend for CUDA calls: {pg.fallback}"
    before = dict(pg.routed)
    for dname, dtype in DTYPES.items():
        for i, n in enumerate(COUNTS):
            xs = rank_inputs(120_000 + 31 * i + len(dname), W * n, dtype, W)
            tag = f"{dname}/n={W * n}"
            total = rank_order_sum(xs)
            for op, want, check in ((RO.SUM, total, same_bits), (RO.AVG, total / W, same_bits),
                                    (RO.MAX, torch.stack(xs).amax(0), same_values),
                                    (RO.MIN, torch.stack(xs).amin(0), same_values)):
                t = xs[rank].clone()
                dist.all_reduce(t, op=op)
                res[f"all_reduce {op} {tag}"] = check(t, want)
                if op in (RO.SUM, RO.AVG):
                    res[f"all_reduce {op} identical {tag}"] = None if same_on_all_ranks(t) else "ranks differ"
            block = [x[rank * n:(rank + 1) * n] for x in xs]
            out = torch.empty(n, dtype=dtype, device="cuda")
            dist.reduce_scatter_tensor(out, xs[rank])
            res[f"reduce_scatter {tag}"] = same_bits(out, rank_order_sum(block))
            dist.reduce_scatter_tensor(out, xs[rank], op=RO.AVG)
            res[f"reduce_scatter AVG {tag}"] = same_bits(out, rank_order_sum(block) / W)
            out = torch.empty(W * W * n, dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(out, xs[rank])
            res[f"all_gather {tag}"] = same_bits(out, torch.cat(xs))
            out = torch.empty(W * n, dtype=dtype, device="cuda")
            dist.all_to_all_single(out, xs[rank])
            res[f"all_to_all {tag}"] = same_bits(out, torch.cat(block))
    # uneven all-to-all: rank s sends d + 1 rows of 5 to rank d
    xs = [t.view(-1, 5) for t in rank_inputs(121_000, 5 * W * (W + 1) // 2, torch.bfloat16, W)]
    out = torch.empty(W * (rank + 1), 5, dtype=torch.bfloat16, device="cuda")
    dist.all_to_all_single(out, xs[rank], output_split_sizes=[rank + 1] * W, input_split_sizes=list(range(1, W + 1)))
    start = rank * (rank + 1) // 2
    res["uneven all_to_all"] = same_bits(out, torch.cat([x[start:start + rank + 1] for x in xs]))
    # a misaligned view all-reduced in place (staged through an aligned copy), the rest of its storage untouched
    xs = rank_inputs(122_000, 4097, torch.bfloat16, W)
    base = xs[rank].clone()
    dist.all_reduce(base[1:])
    want = torch.cat([xs[rank][:1], rank_order_sum([x[1:] for x in xs])])
    res["misaligned view in place"] = same_bits(base, want)
    # in-place all-gather (the input is this rank's block of the output)
    n = 1001
    xs = rank_inputs(123_000, n, torch.bfloat16, W)
    out = torch.empty(W * n, dtype=torch.bfloat16, device="cuda")
    out[rank * n:(rank + 1) * n] = xs[rank]
    dist.all_gather_into_tensor(out, out[rank * n:(rank + 1) * n])
    res["in-place all_gather"] = same_bits(out, torch.cat(xs))
    for c in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
        res[f"{c} went through quickreduce"] = _grew(pg, before, c)
    res["nothing fell back"] = None if not pg.fallback_reasons else dict(pg.fallback_reasons)
    res["communicator on this GPU"] = None if (pg.communicator is not None and pg.communicator.device ==
                                               torch.cuda.current_device()) else repr(pg)
    x = torch.randn(1 << 16, device="cuda", dtype=torch.bfloat16)
    kernels = _quickreduce_kernels(lambda: dist.all_reduce(x))
    res["the profile shows quickreduce kernels"] = None if kernels else "no qr:: kernel in the profile"
    res["info/kernels"] = ", ".join(k[:80] for k in kernels)
    torch.cuda.synchronize()
    pg.communicator.check()
    return res


def works_streams_graphs(rank, world_size):
    """async_op=True work objects waited on another stream; get_future(); a CUDA graph capturing dist.all_reduce
    (the communicator exists, so capture is allowed) replayed QR_TORCH_STEPS times with new inputs."""
    import quickreduce.distributed as qd
    res = {}
    W = world_size
    pg = dist.group.WORLD
    xs = rank_inputs(124_000, 1 << 16, torch.bfloat16, W)
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    t = xs[rank].clone()
    work = dist.all_reduce(t, async_op=True)
    res["async work is the backend's"] = None if isinstance(work, qd.Work) else type(work).__name__
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        work.wait()  # the side stream now waits for the all-reduce
        got = (t.float() * 1).to(torch.bfloat16)
        busy = a @ a
    torch.cuda.current_stream().wait_stream(side)
    res["waited on another stream"] = same_bits(got, rank_order_sum(xs))
    fut = dist.all_reduce(xs[rank].clone(), async_op=True).get_future()
    res["future"] = same_bits(fut.wait()[0], rank_order_sum(xs))
    torch.cuda.synchronize()
    res["is_completed"] = None if work.is_completed() else "False after synchronize"
    del busy
    # CUDA graph of a backend call
    bank = [rank_inputs(125_000 + b, 8192, torch.bfloat16, W) for b in range(4)]
    x = torch.empty(8192, dtype=torch.bfloat16, device="cuda")
    y = torch.empty(W * 8192, dtype=torch.bfloat16, device="cuda")
    want_ar, want_ag = torch.empty_like(x), torch.empty_like(y)
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")

    def body():
        r = x.clone()
        dist.all_reduce(r)
        dist.all_gather_into_tensor(y, r)
        wrong.add_((r.view(torch.int16) != want_ar.view(torch.int16)).sum())
        wrong.add_((y.view(torch.int16) != want_ag.view(torch.int16)).sum())

    def load(b):
        x.copy_(bank[b][rank])
        want_ar.copy_(rank_order_sum(bank[b]))
        want_ag.copy_(torch.cat([want_ar] * W))

    load(0)
    g = harness.capture_graph(body)
    wrong.zero_()
    before = _routed(pg, "all_reduce")
    for step in range(STEPS):
        load(step % len(bank))
        g.replay()
    torch.cuda.synchronize()
    pg.communicator.check()
    res["graph replays correct"] = None if int(wrong) == 0 else f"{int(wrong)} wrong elements"
    res["replays ran no Python (the captured kernels ran)"] = None if _routed(pg, "all_reduce") == before else \
        "the backend was called during replays"
    return res


def fallbacks(rank, world_size):
    """Calls quickreduce does not take, on a group with max_size 1 MiB: int32, a tensor over max_size,
    non-contiguous, PRODUCT, broadcast, barrier go to the fallback (NCCL, or gloo on a shared GPU) and give
    the right results; with NCCL also bf16 over max_size and send/recv."""
    import quickreduce.distributed as qd
    res = {}
    W = world_size
    pg = dist.new_group(list(range(W)), backend="quickreduce", pg_options=qd.Options(max_size=1 << 20))
    res["info/fallback"] = f"{pg.fallback}"
    before = dict(pg.routed)
    ti = torch.arange(10, dtype=torch.int32, device="cuda") * (rank + 1)
    dist.all_reduce(ti, group=pg)
    res["int32"] = same_bits(ti, torch.arange(10, dtype=torch.int32, device="cuda") * (W * (W + 1) // 2))
    big = torch.full((300_000,), float(rank + 1), device="cuda")  # 1.2 MB of fp32
    dist.all_reduce(big, group=pg)
    res["fp32 over max_size"] = None if bool(big.eq(W * (W + 1) / 2).all()) else str(big[:4])
    nc = (torch.arange(12.0, device="cuda").reshape(3, 4) * (rank + 1)).t()
    try:  # gloo reduces the storage; NCCL refuses non-contiguous tensors, as it does without quickreduce
        dist.all_reduce(nc, group=pg)
        res["non-contiguous"] = same_bits(nc, (torch.arange(12.0, device="cuda").reshape(3, 4) * (W * (W + 1) / 2)).t())
    except (ValueError, RuntimeError) as e:
        res["non-contiguous"] = None if "contiguous" in str(e) else f"{type(e).__name__}: {e}"
    p = torch.full((4,), float(rank + 2), device="cuda")
    dist.all_reduce(p, op=RO.PRODUCT, group=pg)
    res["PRODUCT"] = None if bool(p.eq(float(torch.arange(2, W + 2).prod())).all()) else str(p)
    b = torch.arange(5.0, device="cuda") + rank
    dist.broadcast(b, src=W - 1, group=pg)
    res["broadcast"] = None if b.tolist() == [float(W - 1 + i) for i in range(5)] else str(b)
    dist.barrier(group=pg)
    if pg.fallback == "nccl":
        bb = torch.ones(600_000, dtype=torch.bfloat16, device="cuda")  # 1.2 MB of bf16
        dist.all_reduce(bb, group=pg)
        res["bf16 over max_size (NCCL)"] = None if bool(bb.eq(W).all()) else str(bb[:4])
        if rank < 2:
            msg = torch.full((3,), 7.0, device="cuda") if rank == 0 else torch.zeros(3, device="cuda")
            (dist.send if rank == 0 else dist.recv)(msg, 1 - rank, group=pg)
            res["send/recv (NCCL)"] = None if msg.tolist() == [7.0] * 3 else str(msg)
    else:
        res["info/skipped"] = "bf16 over max_size and send/recv: gloo (shared GPU) has no CUDA send/recv"
    res["counted as fallback"] = None if pg.routed[("all_reduce", "fallback")] - before.get(("all_reduce", "fallback"), 0) >= 4 \
        else dict(pg.routed)
    res["quickreduce took none"] = None if _routed(pg, "all_reduce") == before.get(("all_reduce", "quickreduce"), 0) \
        else dict(pg.routed)
    res["info/reasons"] = str(dict(pg.fallback_reasons))
    # and what fits still goes to quickreduce on this group
    xs = rank_inputs(126_000, 4096, torch.bfloat16, W)
    t = xs[rank].clone()
    dist.all_reduce(t, group=pg)
    res["a fitting call on the same group"] = same_bits(t, rank_order_sum(xs))
    res["... through quickreduce"] = _grew(pg, before, "all_reduce")
    torch.cuda.synchronize()
    pg.communicator.check()
    return res


def functional(rank, world_size):
    """The functional collectives (DTensor's and torch.compile's path: _c10d_functional ops, the group found by
    name) route to quickreduce: eager, and in a torch.compile(fullgraph=True) function (inductor) whose output
    equals eager bit for bit; mode="reduce-overhead" for 200 steps stays correct."""
    import torch.distributed._functional_collectives as funcol
    res = {}
    W = world_size
    pg = dist.group.WORLD
    before = dict(pg.routed)
    n = 4096
    xs = rank_inputs(127_000, W * n, torch.bfloat16, W)
    x = xs[rank]
    block = [t[rank * n:(rank + 1) * n] for t in xs]
    res["all_reduce"] = same_bits(funcol.all_reduce(x, "sum", pg).wait(), rank_order_sum(xs))
    res["all_reduce avg"] = same_bits(funcol.all_reduce(x, "avg", pg).wait(), rank_order_sum(xs) / W)
    res["all_gather_tensor"] = same_bits(funcol.all_gather_tensor(x, 0, pg).wait(), torch.cat(xs))
    res["reduce_scatter_tensor"] = same_bits(funcol.reduce_scatter_tensor(x, "sum", 0, pg).wait(), rank_order_sum(block))
    res["all_to_all_single"] = same_bits(funcol.all_to_all_single(x, None, None, pg).wait(), torch.cat(block))
    for c in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
        res[f"{c} routed"] = _grew(pg, before, c)

    g = torch.Generator(device="cuda").manual_seed(128_000 + rank)
    w = (torch.randn(1024, 1024, generator=g, device="cuda") / 32).to(torch.bfloat16)

    def block_fn(h):
        y = funcol.all_reduce(h @ w, "sum", pg)
        return funcol.all_gather_tensor(torch.relu(y[: 64 // W * (rank + 1)][-(64 // W):]), 0, pg)

    inputs = [torch.randn(64, 1024, generator=g, device="cuda").to(torch.bfloat16) for _ in range(4)]
    eager = [block_fn(i).wait().clone() for i in inputs]
    torch._dynamo.reset()
    compiled = torch.compile(block_fn, fullgraph=True)
    mid = dict(pg.routed)
    for i, (inp, want) in enumerate(zip(inputs, eager)):
        res[f"compiled == eager {i}"] = same_bits(compiled(inp), want)
    res["compiled all_reduce routed"] = _grew(pg, mid, "all_reduce")
    res["compiled all_gather routed"] = _grew(pg, mid, "all_gather")
    torch._dynamo.reset()
    graphed = torch.compile(block_fn, fullgraph=True, mode="reduce-overhead")
    wrong = 0
    for step in range(200):
        torch.compiler.cudagraph_mark_step_begin()
        got = graphed(inputs[step % 4])
        wrong += int(not torch.equal(got.view(torch.int16), eager[step % 4].view(torch.int16)))
    torch.cuda.synchronize()
    pg.communicator.check()
    res["reduce-overhead 200 steps"] = None if wrong == 0 else f"{wrong} steps wrong"
    return res


def dtensor_mlp(rank, world_size):
    """A Megatron MLP through torch.distributed.tensor.parallel (ColwiseParallel then RowwiseParallel, bf16, no
    bias) on init_device_mesh("cuda", (W,)), i.e. on the quickreduce default group: the output equals the fp32
    rank-order sum of the ranks' partial products bit for bit, on every rank; the row-parallel all-reduce
    ran through quickreduce (counter, and qr:: kernels in a profile)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    res = {}
    W = world_size
    pg = dist.group.WORLD
    mesh = init_device_mesh("cuda", (W,))
    hidden, ffn = 512, 1024 * W

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(hidden, ffn, bias=False)
            self.down = torch.nn.Linear(ffn, hidden, bias=False)

        def forward(self, x):
            return self.down(torch.relu(self.up(x)))

    torch.manual_seed(0)  # the same full weights on every rank
    model = MLP().to(device="cuda", dtype=torch.bfloat16)
    up, down = model.up.weight.detach().clone(), model.down.weight.detach().clone()
    parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    g = torch.Generator(device="cuda").manual_seed(129_000)  # the same input on every rank
    x = torch.randn(32, hidden, generator=g, device="cuda").to(torch.bfloat16)
    before = dict(pg.routed)
    with torch.no_grad():
        y = model(x)
        kernels = _quickreduce_kernels(lambda: model(x))
    shard = ffn // W
    # each rank's shards as DTensor holds them (contiguous copies), multiplied as its local ops do
    partials = [torch.relu(x @ up[r * shard:(r + 1) * shard].contiguous().t())
                @ down[:, r * shard:(r + 1) * shard].contiguous().t() for r in range(W)]
    res["output == rank-order sum of partials"] = same_bits(y, rank_order_sum(partials))
    res["identical on every rank"] = None if same_on_all_ranks(y) else "ranks differ"
    res["its all-reduce went through quickreduce"] = _grew(pg, before, "all_reduce")
    res["qr:: kernels in the profile"] = None if kernels else "no quickreduce kernel ran"
    return res


def errors(rank, world_size):
    """Ranks that disagree on an all-to-all's sizes, on a group of its own (timeout 2 s): the error surfaces as
    torch.distributed.DistBackendError with the quickreduce exception as __cause__, on at least one rank, and
    no rank hangs."""
    import quickreduce as qr
    import quickreduce.distributed as qd
    res = {}
    W = world_size
    pg = dist.new_group(list(range(W)), backend="quickreduce", pg_options=qd.Options(timeout_s=2.0))
    qd.communicator(pg)  # created explicitly (collective)
    x = torch.ones(W, 8, device="cuda", dtype=torch.bfloat16)
    recv = [1] * W
    if rank == 0:
        recv[1] = 2  # rank 0 expects 2 rows from rank 1, which sends 1
    out = torch.empty(sum(recv), 8, device="cuda", dtype=torch.bfloat16)
    raised = None
    try:
        dist.all_to_all_single(out, x, recv, [1] * W, group=pg)
        torch.cuda.synchronize()
        for _ in range(2):  # the next call raises what a kernel recorded (a rank that saw nothing times out)
            dist.all_reduce(torch.ones(64, device="cuda"), group=pg)
            torch.cuda.synchronize()
    except dist.DistBackendError as e:
        raised = e
    except Exception as e:  # noqa: BLE001
        res["unexpected exception"] = f"{type(e).__name__}: {e}"
    if raised is not None:
        res["cause is a QuickReduceError"] = None if isinstance(raised.__cause__, qr.QuickReduceError) else \
            f"{type(raised.__cause__).__name__}"
        res["info/error"] = str(raised)[:300]
    res["some rank raised DistBackendError"] = None if any(e for e in _gathered(raised is not None)) else \
        "no rank raised"
    return res


def _gathered(value) -> list:
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, value)
    return everyone


