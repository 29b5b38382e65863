"""GPU scenarios of reduce-scatter, all-gather, all-to-all and the fp32 all-reduce (see harness.py).

Every rank builds every rank's inputs from the same seeds, so each computes the CPU twin's result
locally; the GPU output must equal it bit for bit (docs/codec-spec.md), and the exact codecs must
equal the fp32 rank-order reference computed here on the GPU.
"""
from __future__ import annotations

import functools
import os
import time

import numpy as np
import torch
import torch.distributed as dist

import quickreduce as qr
from quickreduce import _C
from quickreduce.collectives import DTYPE_IDS

import harness  # noqa: E402  (tests/gpu is on sys.path)
from scenarios import same_everywhere, same_on_all_ranks  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
BITS = {torch.float16: (torch.int16, np.uint16), torch.bfloat16: (torch.int16, np.uint16),
        torch.float32: (torch.int32, np.uint32)}
CODECS = ["fp16", "lossless", "fp8", "int8", "int6", "int4", "fp4", "int4h", "int6h"]
COUNTS = [1, 7, 33, 1000, 4097, 65_537, 300_001]  # values per segment


def raw(t: torch.Tensor) -> np.ndarray:
    it, nt = BITS[t.dtype]
    return t.contiguous().view(it).cpu().numpy().view(nt)


def from_raw(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    it, _ = BITS[dtype]
    return torch.from_numpy(a.view(np.int16 if it == torch.int16 else np.int32).copy()).cuda().view(dtype)


def rank_inputs(seed: int, n: int, dtype: torch.dtype, world_size: int) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(n, generator=g, device="cuda").to(dtype) for _ in range(world_size)]


def same_values(got: torch.Tensor, want: torch.Tensor) -> str | None:
    """None when equal bit for bit up to the sign of zeros and NaN payloads (the spec's latitude)."""
    if torch.equal(got.view(BITS[got.dtype][0]), want.view(BITS[want.dtype][0])):
        return None
    g, w = got.float(), want.float()
    bad = ~((g == w) | (torch.isnan(g) & torch.isnan(w)))
    if not bad.any():
        return None
    i = int(torch.nonzero(bad)[0])
    return f"{int(bad.sum())} of {got.numel()} differ, first at {i}: got {g[i].item()!r} want {w[i].item()!r}"


def rank_order_sum(xs, lo: int, hi: int) -> torch.Tensor:
    """The fp32 sum of values [lo, hi) of every rank's input in rank order, as the kernels add: rank 0's
    values first (so -0.0 + -0.0 stays -0.0), each later rank's added once."""
    acc = xs[0][lo:hi].float().clone()  # (clone: .float() of an fp32 tensor is that tensor)
    for y in xs[1:]:
        acc += y[lo:hi].float()
    return acc


def twin_reduce_scatter(xs, dname, codec, rank):
    return from_raw(_C.twin_reduce_scatter([raw(x) for x in xs], dname, codec)[rank], xs[0].dtype)


def twin_all_gather(xs, dname, codec):
    return from_raw(_C.twin_all_gather([raw(x) for x in xs], dname, codec), xs[0].dtype)


def twin_all_to_all(xs, dname, codec, splits, rank):
    return from_raw(_C.twin_all_to_all([raw(x) for x in xs], dname, codec, splits)[rank], xs[0].dtype)


def family_vs_twin(comm, xs, rank, dname, codec, k, res):
    """This rank's reduce-scatter, all-gather and even all-to-all of xs[rank] (segments of k values) with
    `codec`: each bit-exact with the twin, the all-gather identical on every rank (into res, keyed by
    collective and "dtype/codec/k=k"). Returns the three outputs."""
    W, x, tag = len(xs), xs[rank], f"{dname}/{codec}/k={k}"
    rs = comm.reduce_scatter(x, codec=codec)
    ag = comm.all_gather(x[:k], codec=codec)
    a2a = comm.all_to_all(x, codec=codec)
    torch.cuda.synchronize()
    comm.check()
    res[f"reduce_scatter {tag}"] = same_values(rs, twin_reduce_scatter(xs, dname, codec, rank))
    res[f"all_gather {tag}"] = same_values(ag, twin_all_gather([y[:k] for y in xs], dname, codec))
    res[f"all_to_all {tag}"] = same_values(a2a, twin_all_to_all(xs, dname, codec, [[k] * W for _ in range(W)], rank))
    res[f"all_gather identical {tag}"] = None if same_on_all_ranks(ag) else "ranks differ"
    return rs, ag, a2a


def collectives_vs_twin(rank, world_size):
    """Every collective x codec x dtype on odd sizes: bit-exact with the twin; exact codecs equal the
    fp32 rank-order reference; all-gather identical on every rank."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=16 << 20)
    for dname, dtype in DTYPES.items():
        for ci, k in enumerate(COUNTS):
            xs = rank_inputs(1000 * ci + len(dname), W * k, dtype, W)
            for codec in CODECS:
                tag = f"{dname}/{codec}/k={k}"
                rs, ag, a2a = family_vs_twin(comm, xs, rank, dname, codec, k, res)
                if codec in ("fp16", "lossless"):
                    acc = rank_order_sum(xs, rank * k, (rank + 1) * k)
                    res[f"reduce_scatter exact {tag}"] = same_values(rs, acc.to(dtype))
                    res[f"all_gather exact {tag}"] = same_values(ag, torch.cat([y[:k] for y in xs]))
                    res[f"all_to_all exact {tag}"] = same_values(a2a, torch.cat([y[rank * k:(rank + 1) * k] for y in xs]))
    comm.close()
    return res


def large_segments_vs_twin(rank, world_size):
    """The slice path where CTAs take many slices: every collective bit-exact with the twin on segments
    of ~2M values (slices forced: QUICKREDUCE_PACKET_SEGMENT_MAX_KB=0) and past 64 MiB a call, each
    with a partial last slice (on 2 GPUs a 16-bit call's threads take two slices a step, the last ones
    one at a time); all-gather identical on every rank."""
    res = {}
    W = world_size
    big = (64 << 20) // (2 * W) + 3 * 2048 + 5  # a 16-bit call's larger tensor just past 64 MiB
    cases = [("bf16", 2_000_003), ("fp16", 2_000_003), ("fp32", 2_000_003), ("bf16", big), ("fp32", big // 2)]
    comm = qr.Communicator(max_size=W * big * 2 + (1 << 20))
    comm.packet_segment_max_bytes = 0  # what QUICKREDUCE_PACKET_SEGMENT_MAX_KB=0 sets
    for ci, (dname, k) in enumerate(cases):
        dtype = DTYPES[dname]
        xs = rank_inputs(5000 + ci, W * k, dtype, W)
        for codec in ["fp16", "fp8", "int6", "int4", "int4h"]:
            family_vs_twin(comm, xs, rank, dname, codec, k, res)
        del xs
    comm.close()
    return res


def uneven_all_to_all(rank, world_size):
    """Random uneven splits (zeros included), rows of several values, odd offsets: bit-exact with the twin."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=16 << 20)
    rng = np.random.default_rng(7)  # the same matrices on every rank
    for trial in range(6):
        row = int(rng.choice([1, 3, 8, 64, 4096]))
        rows = rng.integers(0, 40, size=(W, W))
        rows[rng.integers(0, W), rng.integers(0, W)] = 0
        for dname, dtype in DTYPES.items():
            xs = [rank_inputs(5000 + trial * 31 + r, int(rows[r].sum()) * row, dtype, 1)[0] for r in range(W)]
            for codec in ("fp16", "fp8", "int4"):
                out = comm.all_to_all(xs[rank].view(-1, row) if row > 1 else xs[rank], codec=codec,
                                      input_split_sizes=rows[rank].tolist(),
                                      output_split_sizes=rows[:, rank].tolist())
                torch.cuda.synchronize()
                comm.check()
                splits = (rows * row).tolist()
                res[f"trial {trial} row {row} {dname}/{codec}"] = same_values(
                    out.reshape(-1), twin_all_to_all(xs, dname, codec, splits, rank))
    comm.close()
    return res


def mixed_cta_all_to_all(rank, world_size):
    """An all-to-all with split sizes whose ranks run different CTA sizes (each host picks its own: 512
    threads move two slices at a time, 256 one): every mix, segments of odd slice counts (a pass with
    one slice), bit-exact with the twin, and the automatic choice (16 MB a rank) beside 256-thread peers."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=64 << 20)
    stream = torch.cuda.current_stream().cuda_stream
    rng = np.random.default_rng(11)  # the same matrices on every rank
    mixes = {"all 256": [256] * W, "all 512": [512] * W, "even ranks 512": [512 if r % 2 == 0 else 256 for r in range(W)],
             "rank 0 at 256": [256] + [512] * (W - 1)}
    for trial in range(3):
        # values a segment: up to ~7 slices of 2048 values, some a slice plus a few values, some empty
        vals = rng.integers(0, 7 * 2048, size=(W, W))
        vals[0, W - 1] = 2048 * 3 + 5
        vals[W - 1, 0] = 0
        for dname, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
            xs = [rank_inputs(7100 + trial * 17 + r, int(vals[r].sum()), dtype, 1)[0] for r in range(W)]
            for codec in ("fp16", "fp8", "int4"):  # (fp16: the exact passthrough, any dtype)
                want = twin_all_to_all(xs, dname, codec, vals.tolist(), rank)
                for mix, threads in mixes.items():
                    out = torch.empty(int(vals[:, rank].sum()), dtype=dtype, device="cuda")
                    comm._c.exchange(_C.EXCHANGE_ALL_TO_ALL, xs[rank].data_ptr(), out.data_ptr(), DTYPE_IDS[dtype],
                                     qr.codecs.codec_id(codec), vals[rank].tolist(), vals[:, rank].tolist(), stream,
                                     threads=threads[rank])
                    torch.cuda.synchronize()
                    comm.check()
                    res[f"trial {trial} {dname}/{codec} {mix}"] = same_values(out, want)
    # The automatic choice: rank 0 sends 16 MB (512 threads), the others a little (256).
    row = 4096
    rows = [[(2048 // W if s == 0 else 3) + d for d in range(W)] for s in range(W)]  # rank 0: >= 2048 rows of 8 KB
    xs = [rank_inputs(7300 + r, sum(rows[r]) * row, torch.bfloat16, 1)[0] for r in range(W)]
    out = comm.all_to_all(xs[rank].view(-1, row), codec="fp16", input_split_sizes=rows[rank],
                          output_split_sizes=[rows[s][rank] for s in range(W)])
    torch.cuda.synchronize()
    comm.check()
    res["automatic: rank 0 at 512, the others at 256"] = same_values(
        out.reshape(-1), twin_all_to_all(xs, "bf16", "fp16", [[c * row for c in r] for r in rows], rank))
    comm.close()
    return res


def fp32_all_reduce(rank, world_size):
    """The fp32 all-reduce (reduce-scatter + all-gather) against the twin, identical on every rank."""
    res = {}
    comm = qr.Communicator(max_size=16 << 20)
    for i, n in enumerate([1, 31, 1000, 65_537, 1 << 20]):
        xs = rank_inputs(9000 + i, n, torch.float32, world_size)
        for codec in CODECS:
            out = comm.all_reduce(xs[rank], codec=codec)
            inplace = xs[rank].clone()
            comm.all_reduce(inplace, out=inplace, codec=codec)
            torch.cuda.synchronize()
            comm.check()
            want = from_raw(_C.twin_all_reduce([raw(x) for x in xs], "fp32", codec), torch.float32)
            res[f"n={n} {codec}"] = same_values(out, want)
            res[f"n={n} {codec} in place"] = same_values(inplace, want)
            res[f"n={n} {codec} identical"] = None if same_on_all_ranks(out) else "ranks differ"
    comm.close()
    return res


def collective_graph_replays(rank, world_size):
    """One CUDA graph mixing all four collectives, replayed QR_COLLECTIVE_REPLAYS times (1000) with
    new inputs before each replay; every output checked on the GPU against the twin's."""
    replays = int(os.environ.get("QR_COLLECTIVE_REPLAYS", "1000"))
    res = {}
    W, k = world_size, 4096 + 24
    comm = qr.Communicator(max_size=8 << 20)
    bank = []
    for b in range(4):
        xs = rank_inputs(20_000 + b, W * k, torch.bfloat16, W)
        splits = [[k] * W for _ in range(W)]
        bank.append((xs[rank], twin_reduce_scatter(xs, "bf16", "int4", rank),
                     twin_all_gather([y[:k] for y in xs], "bf16", "fp8"),
                     twin_all_to_all(xs, "bf16", "int6", splits, rank),
                     torch.from_numpy(_C.twin_all_reduce([raw(x) for x in xs], "bf16", "int8").view(np.int16)).cuda()
                     .view(torch.bfloat16)))
    x = torch.empty(W * k, dtype=torch.bfloat16, device="cuda")
    outs = [torch.empty_like(t) for t in bank[0][1:]]

    def body():
        comm.reduce_scatter(x, out=outs[0], codec="int4")
        comm.all_gather(x[:k], out=outs[1], codec="fp8")
        comm.all_to_all(x, out=outs[2], codec="int6")
        comm.all_reduce(x, out=outs[3], codec="int8")

    t0 = time.time()
    wrong = harness.replay_checked(body, [x], outs, bank, replays)
    comm.check()
    res["replays correct"] = None if wrong == 0 else f"{wrong} wrong elements"
    res["info/replays"] = f"{replays} replays x 4 collectives in {time.time() - t0:.1f}s"
    comm.close()
    return res


def small_segments(rank, world_size):
    """The flag-in-data path of small exact segments (exchange/packets.cuh): around its 2 MiB limit,
    -0.0 kept, the all-ones NaN sent as a NaN with its lowest bit cleared on every rank, equal to the
    slice path (QUICKREDUCE_PACKET_SEGMENT_MAX_KB=0), 1000 graph replays mixing the three collectives
    with the one-shot all-reduce, and a peer that skips a call: PeerTimeoutError within seconds."""
    res = {}
    W = world_size
    max_size = W * ((2 << 20) + 16)  # the reduce-scatter's input at the largest k below
    comm = qr.Communicator(max_size=max_size, timeout_s=2.0)
    slices = qr.Communicator(max_size=max_size)
    slices.packet_segment_max_bytes = 0  # what QUICKREDUCE_PACKET_SEGMENT_MAX_KB=0 sets
    for dname, dtype in DTYPES.items():
        size = torch.empty((), dtype=dtype).element_size()
        limit = (2 << 20) // size
        for k in (1, 3, 8, 1023, limit - 1, limit, limit + 1):
            xs = rank_inputs(70_000 + k + size, W * k, dtype, W)
            for y in xs:
                y[::7] = -0.0
            x = xs[rank]
            tag = f"{dname}/k={k}"
            got = (comm.reduce_scatter(x), comm.all_gather(x[:k]), comm.all_to_all(x))
            ref = (slices.reduce_scatter(x), slices.all_gather(x[:k]), slices.all_to_all(x))
            torch.cuda.synchronize()
            comm.check()
            slices.check()
            acc = rank_order_sum(xs, rank * k, (rank + 1) * k)
            want = (acc.to(dtype), torch.cat([y[:k] for y in xs]), torch.cat([y[rank * k:(rank + 1) * k] for y in xs]))
            for name, g, r, w_ in zip(("reduce_scatter", "all_gather", "all_to_all"), got, ref, want):
                bits = BITS[dtype][0]
                res[f"{name} {tag} bitwise"] = None if torch.equal(g.view(bits), w_.view(bits)) else same_values(g, w_)
                res[f"{name} {tag} == slice path"] = None if torch.equal(g.view(bits), r.view(bits)) else "differs"
            res[f"all_gather identical {tag}"] = None if same_on_all_ranks(got[1]) else "ranks differ"
    # The sentinel's bit pattern (a NaN with every bit set) arrives as a NaN with its lowest bit clear.
    for dname, dtype in DTYPES.items():
        bits, _ = BITS[dtype]
        ones = torch.full((W * 64,), -1, dtype=bits, device="cuda")
        x = ones.view(dtype)
        ag = comm.all_gather(x[:64]).view(bits)
        a2a = comm.all_to_all(x).view(bits)
        torch.cuda.synchronize()
        res[f"all-ones NaN {dname}"] = None if bool((ag == -2).all() and (a2a == -2).all()) else \
            f"got {ag[:4].tolist()} / {a2a[:4].tolist()}"
        res[f"all-ones NaN identical {dname}"] = None if same_on_all_ranks(ag.view(dtype)) else "ranks differ"
    # 1000 graph replays, the packet path of each collective beside the one-shot all-reduce.
    k = 4096 + 24
    bank = []
    for b in range(4):
        xs = rank_inputs(80_000 + b, W * k, torch.bfloat16, W)
        acc = rank_order_sum(xs, rank * k, (rank + 1) * k)
        full = rank_order_sum(xs, 0, W * k)
        bank.append((xs[rank], acc.bfloat16(), torch.cat([y[:k] for y in xs]),
                     torch.cat([y[rank * k:(rank + 1) * k] for y in xs]), full.bfloat16()))
    x = torch.empty(W * k, dtype=torch.bfloat16, device="cuda")
    outs = [torch.empty_like(t) for t in bank[0][1:]]

    def body():
        comm.reduce_scatter(x, out=outs[0])
        comm.all_gather(x[:k], out=outs[1])
        comm.all_to_all(x, out=outs[2])
        comm.all_reduce(x, out=outs[3], codec="bf16", algo="one_shot")

    wrong = harness.replay_checked(body, [x], outs, bank, int(os.environ.get("QR_COLLECTIVE_REPLAYS", "1000")))
    comm.check()
    res["graph replays correct"] = None if wrong == 0 else f"{wrong} wrong elements"
    # A peer that skips a small call: the waiting rank's error comes within seconds.
    x = torch.randn(W * 1024, device="cuda", dtype=torch.bfloat16)
    dist.barrier()
    if rank == 0:
        res["peer skips a call"], res["info/peer skips a call"] = harness.expect_peer_timeout(
            comm, lambda: comm.all_gather(x[:1024]))
    dist.barrier()
    comm.close()
    slices.close()
    return res


def coded_rs_limit(codec: str, world_size: int) -> int:
    """The largest bf16 reduce-scatter segment (values) on the coded small path: its wire (32 lanes a 256
    values; past 32768 lanes a lane in one 8-byte unit for 32 bits of codes, else two: half or one 16-byte
    vector) from the W - 1 peers within kCodedPacketMaxIngressBytes (2 MiB), the segment within the default
    packet_segment_max_bytes (2 MiB). Every limit here lies past 32768 lanes."""
    code_bits = round(8 * (qr.codecs.codec_info(codec)["bits_per_value"] - 0.5))
    units = 1 if code_bits + 16 <= 48 else 2
    lanes = (2 << 20) * 2 // (16 * units * (world_size - 1))
    return min(lanes // 32 * 256, (2 << 20) // 2)


def coded_small_segments(rank, world_size):
    """The scaled codecs' flag-in-data path (exchange/coded_packets.cuh): every scaled codec and dtype
    bit-exact with the twin and with the slice path (QUICKREDUCE_PACKET_SEGMENT_MAX_KB=0), at tail
    sizes and around the reduce-scatter's wire limit (int4: one 8-byte unit a lane, int6h: two);
    1000 graph replays mixing coded and exact packet calls on their shared channel."""
    res = {}
    W = world_size
    limits = {c: coded_rs_limit(c, W) for c in ("int4", "int6h")}
    max_size = W * (max(limits.values()) + 64) * 2
    comm = qr.Communicator(max_size=max_size)
    slices = qr.Communicator(max_size=max_size)
    slices.packet_segment_max_bytes = 0
    scaled = [c for c in CODECS if c not in ("fp16", "lossless")]
    cases = [(d, c, k) for d in DTYPES for c in scaled for k in (1, 33, 4097)]
    cases += [("bf16", c, k) for c, limit in limits.items() for k in (limit - 8, limit, limit + 8)]
    # int4 from two units a lane to one: past 32768 lanes (the channel's threads)
    cases += [("bf16", "int4", k) for k in (32768 * 8, 32768 * 8 + 8)]
    for dname, codec, k in cases:
        dtype = DTYPES[dname]
        xs = rank_inputs(90_000 + k + len(codec) + len(dname), W * k, dtype, W)
        x = xs[rank]
        tag = f"{dname}/{codec}/k={k}"
        got = (comm.reduce_scatter(x, codec=codec), comm.all_gather(x[:k], codec=codec), comm.all_to_all(x, codec=codec))
        ref = (slices.reduce_scatter(x, codec=codec), slices.all_gather(x[:k], codec=codec),
               slices.all_to_all(x, codec=codec))
        torch.cuda.synchronize()
        comm.check()
        slices.check()
        splits = [[k] * W for _ in range(W)]
        twin = (twin_reduce_scatter(xs, dname, codec, rank), twin_all_gather([y[:k] for y in xs], dname, codec),
                twin_all_to_all(xs, dname, codec, splits, rank))
        bits = BITS[dtype][0]
        for name, g, r, t in zip(("reduce_scatter", "all_gather", "all_to_all"), got, ref, twin):
            res[f"{name} {tag} == twin"] = same_values(g, t)
            res[f"{name} {tag} == slice path"] = None if torch.equal(g.view(bits), r.view(bits)) else "differs"
        res[f"all_gather identical {tag}"] = None if same_on_all_ranks(got[1]) else "ranks differ"
    # Coded and exact calls alternating on the packet channel (coded units and round-tripped values, exact
    # packets), in a graph.
    k = 4096 + 24
    bank = []
    for b in range(4):
        xs = rank_inputs(95_000 + b, W * k, torch.bfloat16, W)
        acc = rank_order_sum(xs, rank * k, (rank + 1) * k)
        splits = [[k] * W for _ in range(W)]
        bank.append((xs[rank], twin_reduce_scatter(xs, "bf16", "int4", rank), acc.bfloat16(),
                     twin_all_gather([y[:k] for y in xs], "bf16", "fp8"), torch.cat([y[:k] for y in xs]),
                     twin_all_to_all(xs, "bf16", "int6h", splits, rank)))
    x = torch.empty(W * k, dtype=torch.bfloat16, device="cuda")
    outs = [torch.empty_like(t) for t in bank[0][1:]]

    def body():
        comm.reduce_scatter(x, out=outs[0], codec="int4")
        comm.reduce_scatter(x, out=outs[1])
        comm.all_gather(x[:k], out=outs[2], codec="fp8")
        comm.all_gather(x[:k], out=outs[3])
        comm.all_to_all(x, out=outs[4], codec="int6h")

    wrong = harness.replay_checked(body, [x], outs, bank, int(os.environ.get("QR_COLLECTIVE_REPLAYS", "1000")))
    comm.check()
    res["graph replays correct"] = None if wrong == 0 else f"{wrong} wrong elements"
    comm.close()
    slices.close()
    return res


def collective_bad_inputs(rank, world_size):
    """Bad arguments raise clear Python exceptions before anything is launched."""
    res = {}
    W = world_size
    comm = qr.Communicator(max_size=1 << 20)
    x = torch.randn(W * 64, device="cuda", dtype=torch.bfloat16)

    def expect(name, exc, fn, words):
        try:
            fn()
            res[name] = "no exception"
        except exc as e:
            res[name] = None if all(w in str(e) for w in words) else f"message lacks {words}: {e}"
        except Exception as e:  # noqa: BLE001
            res[name] = f"{type(e).__name__}: {e}"

    expect("reduce_scatter indivisible", ValueError, lambda: comm.reduce_scatter(x[:W * 64 - 1]), ["divide"])
    expect("all_to_all indivisible", ValueError, lambda: comm.all_to_all(x[:W * 64 - 1]), ["divisible"])
    expect("split sizes do not add up", ValueError,
           lambda: comm.all_to_all(x, input_split_sizes=[1] * W, output_split_sizes=[1] * W), ["add up"])
    expect("split count", ValueError, lambda: comm.all_to_all(x, input_split_sizes=[W * 64]), ["sizes"])
    expect("negative split", ValueError,
           lambda: comm.all_to_all(x, input_split_sizes=[-1] + [0] * (W - 2) + [W * 64 + 1]), ["non-negative"])
    expect("int dtype", TypeError, lambda: comm.all_gather(x.to(torch.int32)), ["dtype"])
    expect("float64 dtype", TypeError, lambda: comm.reduce_scatter(x.double()), ["dtype"])
    expect("out wrong size", ValueError, lambda: comm.all_gather(x, out=torch.empty_like(x)), ["out"])
    expect("out wrong dtype", TypeError, lambda: comm.all_gather(x, out=torch.empty(W * x.numel(), device="cuda")),
           ["dtype"])
    expect("out overlaps", ValueError, lambda: comm.all_to_all(x, out=x), ["overlaps"])
    expect("cpu tensor", ValueError, lambda: comm.all_gather(x.cpu()), ["CUDA"])
    expect("not contiguous", ValueError, lambda: comm.all_gather(x.view(W, 64).t()), ["contiguous"])
    expect("unknown codec", ValueError, lambda: comm.all_gather(x, codec="int3"), ["unknown codec"])
    expect("too large", ValueError, lambda: comm.all_gather(torch.empty(1 << 19, device="cuda")), ["max_size"])
    expect("bad codecs key", ValueError, lambda: qr.Communicator(max_size=1 << 20, codecs={"broadcast": "fp8"}),
           ["keys"])
    dist.barrier()
    comm.close()
    return res


def collective_peer_timeout(rank, world_size):
    """Rank 1 skips a call of each collective: rank 0 gets PeerTimeoutError within seconds."""
    res = {}
    W = world_size
    for name in ("reduce_scatter", "all_gather", "all_to_all"):
        comm = qr.Communicator(max_size=1 << 20, timeout_s=2.0)
        x = torch.randn(W * 1024, device="cuda", dtype=torch.bfloat16)
        getattr(comm, name)(x)  # one good call
        torch.cuda.synchronize()
        dist.barrier()
        if rank == 0:
            res[name], res[f"info/{name}"] = harness.expect_peer_timeout(
                comm, functools.partial(getattr(comm, name), x, codec="int4"))
        dist.barrier()
        comm.close()
    return res


def collective_mismatch(rank, world_size):
    """Ranks that disagree (collective, size, codec, split sizes) get CallMismatchError or a timeout,
    never each other's data."""
    res = {}
    W = world_size
    odd = rank == 1
    cases = {
        "collective": lambda c, x: c.all_gather(x) if odd else c.reduce_scatter(x),
        "size": lambda c, x: c.all_gather(x[:512] if odd else x[:256]),
        "codec": lambda c, x: c.reduce_scatter(x, codec="int4" if odd else "fp8"),
        "coded vs exact": lambda c, x: c.reduce_scatter(x, codec="int4" if odd else "bf16"),
        "dtype": lambda c, x: c.all_gather(x.float() if odd else x),
        "splits": lambda c, x: c.all_to_all(x, input_split_sizes=[256 * W] + [0] * (W - 1),
                                            output_split_sizes=[256 * W if rank == 0 else 0] + [0] * (W - 1))
        if odd else c.all_to_all(x),
    }
    for name, call in cases.items():
        comm = qr.Communicator(max_size=1 << 20, timeout_s=3.0)
        x = torch.randn(W * 256, device="cuda", dtype=torch.bfloat16)
        t0 = time.time()
        call(comm, x)
        torch.cuda.synchronize()
        try:
            comm.check()
            res[name] = "no error" if rank in (0, 1) else None
        except qr.CallMismatchError as e:
            res[name] = None
            res[f"info/{name}"] = f"rank {rank}: CallMismatchError after {time.time() - t0:.2f}s: {e}"
        except qr.PeerTimeoutError as e:
            res[name] = None  # waiting for data the peer never sends: an error, not garbage
            res[f"info/{name}"] = f"rank {rank}: PeerTimeoutError after {time.time() - t0:.2f}s: {e}"
        dist.barrier()
        comm.close()
    return res


def collective_soak(rank, world_size):
    """QR_COLLECTIVE_SOAK_CALLS (2000) random collectives (kind, dtype, codec, size, splits), each
    checked against the twin's output on the GPU, interleaved with all-reduces."""
    calls = int(os.environ.get("QR_COLLECTIVE_SOAK_CALLS", "2000"))
    W = world_size
    res = {}
    comm = qr.Communicator(max_size=8 << 20)
    rng = np.random.default_rng(99)
    cases = []
    for i in range(24):
        dname = ["fp16", "bf16", "fp32"][i % 3]
        dtype = DTYPES[dname]
        codec = CODECS[i % len(CODECS)]
        k = int(rng.choice([5, 64, 999, 4096, 70_001]))
        xs = rank_inputs(30_000 + i, W * k, dtype, W)
        kind = ["reduce_scatter", "all_gather", "all_to_all", "all_to_all_uneven"][i % 4]
        if kind == "reduce_scatter":
            cases.append((kind, xs[rank], {}, twin_reduce_scatter(xs, dname, codec, rank), codec))
        elif kind == "all_gather":
            cases.append((kind, xs[rank][:k], {}, twin_all_gather([y[:k] for y in xs], dname, codec), codec))
        elif kind == "all_to_all":
            cases.append((kind, xs[rank], {}, twin_all_to_all(xs, dname, codec, [[k] * W] * W, rank), codec))
        else:
            rows = rng.integers(0, 2 * k // W + 1, size=(W, W))
            ys = [rank_inputs(40_000 + i * 8 + r, int(rows[r].sum()), dtype, 1)[0] for r in range(W)]
            kw = {"input_split_sizes": rows[rank].tolist(), "output_split_sizes": rows[:, rank].tolist()}
            cases.append(("all_to_all", ys[rank], kw, twin_all_to_all(ys, dname, codec, rows.tolist(), rank), codec))
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")
    picks = rng.integers(0, len(cases), calls)
    ar = torch.randn(65_536, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    for it in range(calls):
        kind, x, kw, want, codec = cases[picks[it]]
        out = getattr(comm, kind)(x, codec=codec, **kw)
        it_ = BITS[out.dtype][0]
        wrong += (out.view(it_) != want.view(it_)).sum()
        if it % 7 == 0:
            comm.all_reduce(ar, codec="int4")
    torch.cuda.synchronize()
    comm.check()
    res["soak correct"] = None if int(wrong) == 0 else f"{int(wrong)} wrong elements"
    res["info/soak"] = f"{calls} calls in {time.time() - t0:.1f}s"
    res["soak finished together"] = None if same_everywhere(calls) else "ranks differ"
    comm.close()
    return res
