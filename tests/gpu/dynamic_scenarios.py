"""GPU scenarios of the dynamic all-to-all (Communicator.all_to_all_dynamic, docs/moe.md; see harness.py).

Every rank builds every rank's inputs and counts from the same seeds, so each computes its expected
output locally: a torch reference (rows in source-rank order) for the exact codecs, the host-sized
all_to_all of the same counts (bit for bit, every codec) and the CPU twin of the rows that move
(csrc/collectives/exchange/dynamic_plan.hpp; quickreduce/oracle/all_to_all_dynamic.py).
"""
from __future__ import annotations

import os
import time

import numpy as np
import torch
import torch.distributed as dist

import quickreduce as qr
from quickreduce import _C, moe
from quickreduce.oracle import all_to_all_dynamic as odyn

import harness  # noqa: E402  (tests/gpu is on sys.path)

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
BITS = {torch.float16: (torch.int16, np.uint16), torch.bfloat16: (torch.int16, np.uint16),
        torch.float32: (torch.int32, np.uint32)}
CODECS = ["fp16", "lossless", "fp8", "int8", "int6", "int4", "fp4", "int4h", "int6h"]
SENTINEL = -7.25  # what rows nobody writes keep


def raw(t: torch.Tensor) -> np.ndarray:
    it, nt = BITS[t.dtype]
    return t.contiguous().view(it).cpu().numpy().view(nt).reshape(-1)


def from_raw(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    it, _ = BITS[dtype]
    return torch.from_numpy(np.ascontiguousarray(a).view(np.int16 if it == torch.int16 else np.int32).copy()) \
        .cuda().view(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> str | None:
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} != {tuple(b.shape)}"
    it = BITS[a.dtype][0]
    if torch.equal(a.view(it), b.view(it)):
        return None
    bad = (a.view(it) != b.view(it)).reshape(-1)
    i = int(torch.nonzero(bad)[0])
    return f"{int(bad.sum())} of {a.numel()} differ, first at {i}: {a.reshape(-1)[i].item()!r} vs {b.reshape(-1)[i].item()!r}"


def count_matrices(rng, W: int, rows: int) -> list[list[list[int]]]:
    """Count matrices of every shape the issue names: uniform, skewed, zeros for some ranks, all to
    one rank, one rank sending everything, nothing at all, and fewer rows than the input holds."""
    out = []
    for _ in range(3):
        out.append([list(map(int, rng.multinomial(rows, np.ones(W) / W))) for _ in range(W)])
    p = np.array([0.7] + [0.3 / (W - 1)] * (W - 1))
    out.append([list(map(int, rng.multinomial(rows, np.roll(p, r)))) for r in range(W)])  # skewed
    out.append([list(map(int, rng.multinomial(rows, p))) for _ in range(W)])  # heavy on rank 0
    out.append([[rows if d == W - 1 else 0 for d in range(W)] for _ in range(W)])  # all to one
    zeros = [list(map(int, rng.multinomial(rows, np.ones(W) / W))) for _ in range(W)]
    zeros[0] = [0] * W  # rank 0 sends nothing
    for r in range(W):
        zeros[r][W // 2] = 0  # and nobody sends rank W/2 anything
    out.append(zeros)
    out.append([[0] * W for _ in range(W)])  # nothing at all
    out.append([[rows if d == 0 else 0 for d in range(W)] if r == 1 else [0] * W for r in range(W)])
    out.append([list(map(int, rng.multinomial(rows // 2, np.ones(W) / W))) for _ in range(W)])  # part of x
    return out


def reference(xs, counts, rank):
    """torch: the rows rank `rank` receives, in source-rank order."""
    parts = []
    for s, x in enumerate(xs):
        start = sum(counts[s][:rank])
        parts.append(x[start:start + counts[s][rank]])
    return torch.cat(parts)


def twin_rows(xs, dname, codec, counts, rank, capacity):
    """The CPU twin of the rows the plan moves to `rank` (every rank's capacity given)."""
    W = len(xs)
    row = xs[0][0].numel() if xs[0].dim() > 1 else 1
    p = odyn.plan(counts, [x.shape[0] for x in xs], capacity)
    moved = odyn.moved_inputs([raw(x) for x in xs], p, row)
    splits = [[p["moved"][r][d] * row for d in range(W)] for r in range(W)]
    got = _C.twin_all_to_all(moved, dname, codec, splits)[rank]
    return from_raw(np.asarray(got), xs[0].dtype).view(-1, *xs[0].shape[1:]), p


def dynamic_vs_host_sized(rank, world_size):
    """Every dtype x codec x count shape x row length: the rows equal the host-sized all_to_all of the
    same counts bit for bit and the CPU twin; exact codecs equal the torch reference; the counts
    written; rows past them untouched; int32 and int64 counts."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=16 << 20)
    rng = np.random.default_rng(11)
    for row in (1, 3, 8, 4096 + 8):
        rows = 40 if row < 4096 else 6
        mats = count_matrices(rng, W, rows)
        for dname, dtype in DTYPES.items():
            for mi, counts in enumerate(mats):
                g = torch.Generator(device="cuda").manual_seed(1000 * row + mi)
                xs = [torch.randn(rows, row, generator=g, device="cuda").to(dtype) for _ in range(W)]
                want_exact = reference(xs, counts, rank)
                n = want_exact.shape[0]
                codecs = CODECS if (mi == 0 and row in (3, 4096 + 8)) else ["fp16", "fp8", "int4"]
                for ci, codec in enumerate(codecs):
                    tag = f"row={row} {dname} counts#{mi} {codec}"
                    cdt = torch.int64 if (mi + ci) % 2 else torch.int32
                    send = torch.tensor(counts[rank], dtype=cdt, device="cuda")
                    out = torch.full((W * rows, row), SENTINEL, dtype=dtype, device="cuda")
                    recv = torch.full((W,), -1, dtype=cdt, device="cuda")
                    comm.all_to_all_dynamic(xs[rank], send, out, recv, codec=codec)
                    host = comm.all_to_all(xs[rank][:sum(counts[rank])], codec=codec, input_split_sizes=counts[rank],
                                           output_split_sizes=[counts[s][rank] for s in range(W)])
                    torch.cuda.synchronize()
                    comm.check()
                    res[f"== host-sized {tag}"] = same_bits(out[:n], host.view(-1, row))
                    res[f"counts {tag}"] = None if recv.tolist() == [counts[s][rank] for s in range(W)] else \
                        f"got {recv.tolist()}"
                    res[f"tail untouched {tag}"] = None if bool((out[n:] == SENTINEL).all()) else "written"
                    if codec in ("fp16", "lossless"):
                        res[f"== torch {tag}"] = same_bits(out[:n], want_exact)
                    elif row != 1 or mi < 2:
                        want, _ = twin_rows(xs, dname, codec, counts, rank, [W * rows] * W)
                        res[f"== twin {tag}"] = same_bits(out[:n], want)
    # Ranks of different CTA sizes in one call: rank 0's capacity of 16 MB runs it at 512 threads, the
    # others' small ones at 256 (each host picks by its own bytes; the slices are the same).
    row, rows = 4096, 6
    counts = count_matrices(rng, W, rows)[0]
    g = torch.Generator(device="cuda").manual_seed(4242)
    xs = [torch.randn(rows, row, generator=g, device="cuda").to(torch.bfloat16) for _ in range(W)]
    n = sum(counts[s][rank] for s in range(W))
    for codec in ("fp16", "fp8", "int4"):
        capacity = (16 << 20) // (row * 2) if rank == 0 else W * rows
        out = torch.full((capacity, row), SENTINEL, dtype=torch.bfloat16, device="cuda")
        recv = torch.full((W,), -1, dtype=torch.int32, device="cuda")
        comm.all_to_all_dynamic(xs[rank], torch.tensor(counts[rank], dtype=torch.int32, device="cuda"), out, recv,
                                codec=codec)
        host = comm.all_to_all(xs[rank][:sum(counts[rank])], codec=codec, input_split_sizes=counts[rank],
                               output_split_sizes=[counts[s][rank] for s in range(W)])
        torch.cuda.synchronize()
        comm.check()
        res[f"mixed CTA sizes {codec}: == host-sized"] = same_bits(out[:n], host.view(-1, row))
        res[f"mixed CTA sizes {codec}: tail untouched"] = None if bool((out[n:] == SENTINEL).all()) else "written"
    comm.close()
    return res


def _graph_case(rank, W, dtype, codec, rows, row, replays, seed):
    """1000 replays of one graph (dispatch: dynamic all-to-all; a stand-in expert; combine: the reverse
    dynamic all-to-all) with the counts and inputs of a bank loaded before each replay; every output
    checked on the GPU against the expected bits."""
    rng = np.random.default_rng(seed)
    mats = count_matrices(rng, W, rows) + count_matrices(rng, W, rows)
    cap = W * rows
    bank = []
    for b, counts in enumerate(mats):
        g = torch.Generator(device="cuda").manual_seed(seed + b)
        xs = [torch.randn(rows, row, generator=g, device="cuda").to(dtype) for _ in range(W)]
        exact = codec in ("fp16", "bf16", "fp32", "lossless")
        if exact:
            got = reference(xs, counts, rank)
        else:
            got, _ = twin_rows(xs, {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[dtype],
                               codec, counts, rank, [cap] * W)
        out = torch.full((cap, row), SENTINEL, dtype=dtype, device="cuda")
        out[:got.shape[0]] = got
        recv = torch.tensor([counts[s][rank] for s in range(W)], dtype=torch.int32, device="cuda")
        # combine: each rank gets back 2 * (what it sent), its rows in send order; exact codec
        back = torch.full((rows, row), SENTINEL, dtype=dtype, device="cuda")
        n_sent = sum(counts[rank])
        if exact:
            back[:n_sent] = xs[rank][:n_sent] * 2
        else:  # what the others decoded, doubled, comes back exactly: use the twin of every rank's dispatch
            mine = []
            for d in range(W):
                rows_d, p = twin_rows(xs, {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[dtype],
                                      codec, counts, d, [cap] * W)
                at = p["recv_at"][d][rank]
                mine.append(rows_d[at:at + counts[rank][d]] * 2)
            back[:n_sent] = torch.cat(mine)
        send = torch.tensor(counts[rank], dtype=torch.int32, device="cuda")
        bank.append((xs[rank], send, out, recv, back))
    x = torch.empty(rows, row, dtype=dtype, device="cuda")
    send = torch.empty(W, dtype=torch.int32, device="cuda")
    out = torch.empty(cap, row, dtype=dtype, device="cuda")
    recv = torch.empty(W, dtype=torch.int32, device="cuda")
    back = torch.empty(rows, row, dtype=dtype, device="cuda")
    back_counts = torch.empty(W, dtype=torch.int32, device="cuda")
    comm = _graph_case.comm

    def body():
        out.fill_(SENTINEL)
        back.fill_(SENTINEL)
        comm.all_to_all_dynamic(x, send, out, recv, codec=codec)
        y = out * 2  # the stand-in expert (sentinel rows too: they are never sent back)
        comm.all_to_all_dynamic(y, recv, back, back_counts, codec="fp16")

    return harness.replay_checked(body, [x, send], [out, recv, back], bank, replays)


def dynamic_graph_replays(rank, world_size):
    """QR_DYNAMIC_REPLAYS (1000) replays of dispatch + expert + combine in one CUDA graph, a different
    count matrix (skewed, zeros for some ranks, all to one, none) at every replay, bf16 exact against
    torch, fp8 and int4 against the twin; fp32 and fp16 exact too."""
    replays = int(os.environ.get("QR_DYNAMIC_REPLAYS", "1000"))
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=16 << 20)
    _graph_case.comm = comm
    t0 = time.time()
    for dtype, codec, rows, row, n in ((torch.bfloat16, "bf16", 64, 4096 + 8, replays),
                                       (torch.bfloat16, "fp8", 48, 2048, replays // 4),
                                       (torch.bfloat16, "int4", 48, 2048, replays // 4),
                                       (torch.float16, "fp16", 33, 7, replays // 4),
                                       (torch.float32, "fp32", 20, 1000, replays // 4)):
        wrong = _graph_case(rank, W, dtype, codec, rows, row, n, 5000 + rows)
        comm.check()
        res[f"{dtype} {codec} rows={rows}x{row}: {n} replays"] = None if wrong == 0 else f"{wrong} wrong elements"
    res["info/replays"] = f"{time.time() - t0:.1f}s"
    comm.close()
    return res


def _expect_split_error(comm, words) -> str | None:
    try:
        comm.check()
        return f"no SplitSizeError (wanted one naming {words})"
    except qr.SplitSizeError as e:
        missing = [w for w in words if w not in str(e)]
        return f"message lacks {missing}: {e}" if missing else None
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def dynamic_bad_counts(rank, world_size):
    """Negative counts, counts adding up to more than the input, more rows than a receiver's capacity
    (eager and in a replayed graph): every rank's call ends in well under the timeout, nothing is
    written past the output (guard rows checked), the right ranks raise SplitSizeError naming the rank
    and the case, and a capacity overflow keeps the rank-order prefix."""
    res = {}
    W = world_size
    rows, row, cap = 16, 40, 16
    g = torch.Generator(device="cuda").manual_seed(77)
    xs = [torch.randn(rows, row, generator=g, device="cuda").to(torch.bfloat16) for _ in range(W)]
    even = [rows // W] * W
    even[-1] += rows - sum(even)

    def run(name, counts_of, capacity, expect, graph=False, cdt=torch.int32):
        comm = qr.Communicator(max_size=1 << 20, timeout_s=6.0)
        full = torch.full((capacity + 8, row), SENTINEL, dtype=torch.bfloat16, device="cuda")  # 8 guard rows
        out, recv = full[:capacity], torch.full((W,), -1, dtype=cdt, device="cuda")
        send = torch.tensor(counts_of(rank), dtype=cdt, device="cuda")
        dist.barrier()
        t0 = time.time()
        if graph:  # captured with good counts, replayed with the bad ones
            bad = send.clone()
            send.copy_(torch.tensor(even, dtype=cdt))
            gr = harness.capture_graph(lambda: comm.all_to_all_dynamic(xs[rank], send, out, recv))
            torch.cuda.synchronize()
            comm.check()
            send.copy_(bad)
            for _ in range(3):
                gr.replay()
        else:
            comm.all_to_all_dynamic(xs[rank], send, out, recv)
        torch.cuda.synchronize()
        took = time.time() - t0
        res[f"{name}: ends in time"] = None if took < 5.0 else f"took {took:.1f}s"
        res[f"{name}: guard rows untouched"] = None if bool((full[capacity:] == SENTINEL).all()) else "written"
        res[f"{name}: error"] = _expect_split_error(comm, expect[rank]) if expect.get(rank) else None
        if expect.get(rank) is None:
            try:
                comm.check()
            except Exception as e:  # noqa: BLE001
                res[f"{name}: error"] = f"unexpected {type(e).__name__}: {e}"
        res[f"info/{name}"] = f"rank {rank}: {took:.2f}s"
        dist.barrier()
        comm.close()
        return out, recv

    # rank 1 has a negative count: it raises; every rank that would receive from it says so
    counts_neg = lambda r: [-3] + [0] * (W - 2) + [rows] if r == 1 else even  # noqa: E731
    expect = {r: ["rank 1", "received no rows from rank 1"] for r in range(W) if r != 1}
    expect[1] = ["rank 1", "input_split_sizes[0] is -3", "negative"]
    run("negative", counts_neg, W * rows, expect)
    run("negative in a graph", counts_neg, W * rows, expect, graph=True)
    run("negative int64", lambda r: [-(1 << 40)] + [0] * (W - 1) if r == 1 else even, W * rows,
        {**expect, 1: ["rank 1", "is -1099511627776"]}, cdt=torch.int64)
    # rank 0's counts add up to more than its rows
    expect = {r: ["received no rows from rank 0"] for r in range(1, W)}
    expect[0] = ["rank 0", f"add up to {rows + 1} rows", f"its input's {rows} rows"]
    run("sum above rows", lambda r: [rows + 1] + [0] * (W - 1) if r == 0 else even, W * rows, expect)
    run("sum above rows int64", lambda r: [1 << 40] * W if r == 0 else even, W * rows,
        {**expect, 0: ["rank 0", "more than its input's"]}, cdt=torch.int64)
    # everyone sends rank 0 all its rows; rank 0 holds cap rows: the rank-order prefix, an error on rank 0 only
    out, recv = run("above capacity", lambda r: [rows] + [0] * (W - 1), cap,
                    {0: ["rank 0", f"{W * rows} rows", f"capacity of {cap}"]})
    if rank == 0:
        res["above capacity: prefix kept"] = same_bits(out, xs[0][:cap])
        res["above capacity: counts kept"] = None if recv.tolist() == [cap] + [0] * (W - 1) else recv.tolist()
    run("above capacity in a graph", lambda r: [rows] + [0] * (W - 1), cap,
        {0: ["rank 0", "capacity"]}, graph=True)
    return res


def dynamic_compiled_moe(rank, world_size):
    """torch.compile(fullgraph=True) of a MoE layer (router, dispatch_layout, two dynamic all-to-alls)
    equals eager bit for bit; the moe.dispatch/combine helpers deliver each row to its expert's rank."""
    res = {}
    W, E, k, T, H = world_size, 8 * world_size, 2, 24, 256
    comm = qr.Communicator(max_size=16 << 20)
    g = torch.Generator(device="cuda").manual_seed(5)
    gate = torch.randn(H, E, generator=g, device="cuda")
    x = torch.randn(T, H, generator=g, device="cuda").to(torch.bfloat16) * (rank + 1)

    def layer(x, weights, ids):  # the routing outside: compiled and eager softmax may round differently
        order, send, _ = moe.dispatch_layout(ids, E, W)
        rows = x.index_select(0, torch.div(order, k, rounding_mode="floor"))
        recv_x, recv = comm.all_to_all_dynamic(rows, send, capacity=W * rows.shape[0])
        back, _ = comm.all_to_all_dynamic(recv_x * 2, recv, capacity=rows.shape[0])
        unsorted = torch.empty_like(back).index_copy_(0, order, back)
        return (unsorted.view(T, k, -1).float() * weights.unsqueeze(-1)).sum(1).to(x.dtype)

    weights, ids = torch.topk(torch.softmax(x.float() @ gate, -1), k, dim=-1)
    eager = layer(x, weights, ids)
    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True)(x, weights, ids)
    torch.cuda.synchronize()
    comm.check()
    res["compiled == eager"] = same_bits(compiled, eager)
    res["eager == 2 x sum of weights"] = same_bits(
        eager, (x.float().unsqueeze(1) * 2 * weights.unsqueeze(-1)).sum(1).to(torch.bfloat16))
    ids = torch.topk(torch.randn(T, E, generator=g, device="cuda"), k, dim=-1).indices
    eids = torch.empty(W * T * k, 1, device="cuda")
    recv_x, recv, handle, got_ids = moe.dispatch(comm, x, ids, E, expert_ids_out=eids)
    back = moe.combine(comm, recv_x * 3, handle)
    torch.cuda.synchronize()
    comm.check()
    n = int(recv.sum())
    res["dispatch: rows at their experts' rank"] = None if bool(((got_ids[:n] // (E // W)) == rank).all()) else "no"
    res["combine: rows back in (token, slot) order"] = same_bits(
        back, (x.float() * 3).to(torch.bfloat16).unsqueeze(1).expand(T, k, H).contiguous())
    comm.close()
    return res
