"""GPU scenarios run inside each rank's process (see harness.py). Every rank builds every rank's
inputs from the same seeds, so each can compute the reference locally, without communication.
Collectives of our own go through the group's backend: NCCL, or gloo where ranks share a GPU."""
from __future__ import annotations

import hashlib
import os
import time

import numpy as np
import torch
import torch.distributed as dist

import quickreduce as qr
from quickreduce import _C, oracle

import harness  # noqa: E402  (tests/gpu is on sys.path)

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
SIZES = [1, 3, 7, 8, 9, 31, 32, 33, 255, 1000, 4095, 4096, 4097, 65535, 65536, 65537, 300_001,
         (1 << 20) - 1, (1 << 20) + 3, 3_000_017, 4 << 20]


def inputs_for(seed: int, numel: int, dtype: torch.dtype, world_size: int, scale: float = 1.0) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [(torch.randn(numel, generator=g, device="cuda") * scale).to(dtype) for _ in range(world_size)]


def exact_passthrough(xs: list[torch.Tensor]) -> torch.Tensor:
    acc = torch.zeros_like(xs[0], dtype=torch.float32)
    for x in xs:  # the kernels' order: rank 0 first
        acc += x.float()
    return acc.to(xs[0].dtype)


def rel_err(out: torch.Tensor, xs: list[torch.Tensor]) -> float:
    ref = sum(x.double() for x in xs)
    return float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))


def same_everywhere(value) -> bool:
    """True when every rank passed an equal value (gathered as objects: gloo gathers no CUDA tensors)."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, value)
    return all(e == value for e in everyone)


def same_on_all_ranks(t: torch.Tensor) -> bool:
    """Compare a hash of the raw bits across ranks."""
    return same_everywhere(hashlib.sha1(t.view(torch.int16).cpu().numpy().tobytes()).hexdigest())


def bits(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int16).cpu().numpy().view(np.uint16)


def twin(xs: list[torch.Tensor], dtype_name: str, codec: str) -> np.ndarray:
    return _C.twin_all_reduce([bits(x) for x in xs], dtype_name, codec)


def same_values(got: np.ndarray, want: np.ndarray, dtype_name: str) -> bool:
    """Bit equality, except that +0/-0 compare equal and NaN matches any NaN (docs/codec-spec.md)."""
    if np.array_equal(got, want):
        return True
    if dtype_name == "bf16":
        g = (got.astype(np.uint32) << 16).view(np.float32)
        w = (want.astype(np.uint32) << 16).view(np.float32)
    else:
        g, w = got.view(np.float16).astype(np.float32), want.view(np.float16).astype(np.float32)
    return bool(np.array_equal(g, w, equal_nan=True))


def first_mismatch(got, want) -> str:
    idx = np.nonzero(got != want)[0]
    return f"{len(idx)} differ, first at {idx[0]}: got 0x{got[idx[0]]:04x} want 0x{want[idx[0]]:04x}" if len(idx) else ""


def _fail(msg):
    return msg


# ---------------------------------------------------------------- scenarios
def passthrough_reference(rank, world_size):
    """One-shot, two-shot and reduce-scatter + all-gather (rs_ag) against the exact fp32-ordered sum and
    float64, many sizes, both dtypes."""
    res = {}
    comm = qr.Communicator(max_size=64 << 20)
    for dname, dtype in DTYPES.items():
        for algo in ("one_shot", "two_shot", "rs_ag"):
            for i, n in enumerate(SIZES):
                if algo == "one_shot" and n * 2 > comm._c.one_shot_max_bytes:
                    continue
                xs = inputs_for(1000 + i, n, dtype, world_size)
                out = comm.all_reduce(xs[rank], codec="fp16", algo=algo)
                want = exact_passthrough(xs)
                key = f"{algo}/{dname}/n={n}"
                err = rel_err(out, xs)
                if not torch.equal(out.view(torch.int16), want.view(torch.int16)):
                    res[key] = f"differs from the fp32 rank-ordered sum (rel err vs float64 {err:.2e})"
                elif err > 1e-2:
                    res[key] = f"rel err vs float64 {err:.2e}"
                elif not same_on_all_ranks(out):
                    res[key] = "ranks differ"
                else:
                    res[key] = None
        # max_size exactly, two-shot, in place
        n = comm.max_size // 2
        xs = inputs_for(7, n, dtype, world_size)
        want = exact_passthrough(xs)
        x = xs[rank].clone()
        comm.all_reduce(x, out=x, algo="two_shot")
        res[f"max_size_in_place/{dname}"] = None if torch.equal(x.view(torch.int16), want.view(torch.int16)) else "wrong"
        x = xs[rank].clone()
        comm.all_reduce(x, out=x, algo="rs_ag")
        res[f"rs_ag_in_place/{dname}"] = None if torch.equal(x.view(torch.int16), want.view(torch.int16)) else "wrong"
    comm.close()
    return res


def codecs_vs_twin(rank, world_size):
    """Every codec, both dtypes, every size in SIZES: GPU output == CPU twin bit for bit, and ranks identical."""
    res = {}
    comm = qr.Communicator(max_size=64 << 20)
    for dname, dtype in DTYPES.items():
        for codec in qr.codec_names():
            for i, n in enumerate(SIZES):
                xs = inputs_for(5000 + i, n, dtype, world_size, scale=3.0)
                out = comm.all_reduce(xs[rank], codec=codec, algo="two_shot")
                want = twin(xs, dname, codec)
                got = bits(out)
                key = f"{codec}/{dname}/n={n}"
                if not same_values(got, want, dname):
                    res[key] = "GPU != twin: " + first_mismatch(got, want)
                elif not same_on_all_ranks(out):
                    res[key] = "ranks differ"
                else:
                    res[key] = None
    comm.close()
    return res


def codec_edge_values(rank, world_size):
    """NaN/Inf spread to their block only; bf16 extremes survive the scale; GPU == twin."""
    res = {}
    comm = qr.Communicator(max_size=1 << 20)
    n = 4096
    for dname, dtype in DTYPES.items():
        big = 3.0e38 if dname == "bf16" else 60000.0
        for codec in qr.codec_names():
            xs = inputs_for(77, n, dtype, world_size)
            xs[0][100] = float("nan")
            xs[-1][1000] = float("inf")
            xs[0][2000] = big
            xs[0][3000:3032] = 0
            out = comm.all_reduce(xs[rank], codec=codec, algo="two_shot")
            got, want = bits(out), twin(xs, dname, codec)
            o = out.float().cpu()
            key = f"{codec}/{dname}"
            if not same_values(got, want, dname):
                res[key] = "GPU != twin: " + first_mismatch(got, want)
            elif torch.isfinite(o[100]) or torch.isfinite(o[1000]):
                res[key] = "non-finite input came back finite"
            elif codec != "fp16" and not (torch.isfinite(o[:96]).all() and torch.isfinite(o[128:992]).all()):
                res[key] = "NaN spread beyond its block"
            elif not torch.isfinite(o[2000]) or abs(float(o[2000]) - big) > 0.2 * big:
                res[key] = f"large value {big} came back as {float(o[2000])}"
            else:
                res[key] = None
    comm.close()
    return res


def fp4_every_fp16_value(rank, world_size):
    """fp4 on every fp16 value in [-6, 6] at scale 1 (rank 0's data; the others send zeros): the
    GPU's paired fp16 encode == the CPU twin's scalar one, bit for bit, on every input and tie."""
    v = oracle.fp4_unit_scale_inputs()
    xs = [torch.from_numpy(v).to(torch.float16).cuda() if r == 0 else
          torch.zeros(len(v), dtype=torch.float16, device="cuda") for r in range(world_size)]
    comm = qr.Communicator(max_size=1 << 20)
    out = comm.all_reduce(xs[rank], codec="fp4", algo="two_shot")
    got, want = bits(out), twin(xs, "fp16", "fp4")
    comm.close()
    if not same_values(got, want, "fp16"):
        return {"fp4/fp16": "GPU != twin: " + first_mismatch(got, want)}
    return {"fp4/fp16": None if same_on_all_ranks(out) else "ranks differ"}


def graph_replays(rank, world_size):
    """1000 replays of a captured graph with new inputs each time, for one-shot, two-shot and a codec."""
    res = {}
    comm = qr.Communicator(max_size=16 << 20)
    for algo, codec, n in (("one_shot", "fp16", 4096 + 3), ("two_shot", "fp16", 1 << 20), ("two_shot", "int4", 1 << 20),
                           ("rs_ag", "fp16", (1 << 20) + 3)):
        dtype = torch.bfloat16
        bank = [inputs_for(9000 + k, n, dtype, world_size) for k in range(4)]
        x = torch.empty(n, dtype=dtype, device="cuda")
        out = torch.empty_like(x)
        x.copy_(bank[0][rank])
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            comm.all_reduce(x, out=out, codec=codec, algo=algo)  # warm-up outside capture
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            comm.all_reduce(x, out=out, codec=codec, algo=algo)
        wrong = 0
        for it in range(1000):
            k = it % 4
            x.copy_(bank[k][rank])
            g.replay()
            if it % 50 == 0 or it > 990:
                want = exact_passthrough(bank[k]) if codec == "fp16" else None
                if want is not None:
                    wrong += int(not torch.equal(out.view(torch.int16), want.view(torch.int16)))
                else:
                    got = bits(out)
                    wrong += int(not same_values(got, twin(bank[k], "bf16", codec), "bf16"))
        torch.cuda.synchronize()
        comm.check()
        res[f"{algo}/{codec}"] = None if wrong == 0 else f"{wrong} checked replays wrong"
        res[f"{algo}/{codec}/identical"] = None if same_on_all_ranks(out) else "ranks differ"
    comm.close()
    return res


def side_by_side_and_nccl(rank, world_size):
    """Two communicators interleaved, with NCCL collectives and other-stream work in between."""
    res = {}
    a = qr.Communicator(max_size=8 << 20)
    b = qr.Communicator(max_size=8 << 20)
    side = torch.cuda.Stream()
    wrong = 0
    for it in range(50):
        n = [4097, 1 << 16, (1 << 20) + 5][it % 3]
        xs = inputs_for(it, n, torch.float16, world_size)
        want = exact_passthrough(xs)
        with torch.cuda.stream(side):
            t = torch.ones(1 << 16, device="cuda") * (rank + 1)
            dist.all_reduce(t)
            busy = torch.randn(256, 256, device="cuda") @ torch.randn(256, 256, device="cuda")
        y1 = a.all_reduce(xs[rank])
        y2 = b.all_reduce(xs[rank], algo="two_shot")
        torch.cuda.current_stream().wait_stream(side)
        expect_t = world_size * (world_size + 1) / 2
        wrong += int(not torch.equal(y1, want)) + int(not torch.equal(y2, want)) + int(float(t[0]) != expect_t)
        del busy
    torch.cuda.synchronize()
    res["interleaved"] = None if wrong == 0 else f"{wrong} wrong results"
    a.close()
    b.close()
    return res


def handles_api(rank, world_size):
    """The seeds' init/get_comm_handle/set_comm_handles/allreduce(profile, x), handles through the group."""
    qr.init(world_size, rank)
    handles = [None] * world_size
    dist.all_gather_object(handles, qr.get_comm_handle())
    qr.set_comm_handles(handles)
    res = {}
    for profile, codec in enumerate(qr.codec_names(), start=1):
        xs = inputs_for(300 + profile, 40_000, torch.float16, world_size)
        y = qr.allreduce(profile, xs[rank])
        got, want = bits(y), twin(xs, "fp16", codec)
        res[f"profile{profile}"] = None if same_values(got, want, "fp16") else "GPU != twin: " + first_mismatch(got, want)
    qr.destroy()
    return res


def bad_inputs(rank, world_size):
    res = {}
    comm = qr.Communicator(max_size=1 << 20)
    x = torch.randn(1024, device="cuda", dtype=torch.float16)

    def expect(name, exc, fn, words):
        try:
            fn()
            res[name] = "no exception"
        except exc as e:
            res[name] = None if all(w in str(e) for w in words) else f"message {e!r} lacks {words}"
        except Exception as e:  # noqa: BLE001
            res[name] = f"wrong exception {type(e).__name__}: {e}"

    expect("int dtype", TypeError, lambda: comm.all_reduce(x.to(torch.int32)), ["dtype"])
    expect("float64", TypeError, lambda: comm.all_reduce(x.double()), ["dtype"])
    expect("cpu tensor", ValueError, lambda: comm.all_reduce(x.cpu()), ["CUDA"])
    if torch.cuda.device_count() > 1:
        other = (rank + 1) % torch.cuda.device_count()
        expect("other gpu", ValueError, lambda: comm.all_reduce(x.to(f"cuda:{other}")), ["cuda:"])
    expect("non-contiguous", ValueError, lambda: comm.all_reduce(x.view(32, 32).t()), ["contiguous"])
    expect("misaligned", ValueError, lambda: comm.all_reduce(x[1:]), ["aligned"])
    expect("too large", ValueError, lambda: comm.all_reduce(torch.empty(1 << 20, device="cuda", dtype=torch.float16)), ["max_size"])
    expect("bad codec", ValueError, lambda: comm.all_reduce(x, codec="int3"), ["codec"])
    expect("one-shot with codec", ValueError, lambda: comm.all_reduce(x, codec="int4", algo="one_shot"), ["one-shot"])
    empty = torch.empty(0, device="cuda", dtype=torch.float16)
    res["zero elements"] = None if comm.all_reduce(empty).numel() == 0 else "wrong"
    comm.close()
    expect("after close", qr.QuickReduceError, lambda: comm.all_reduce(x), ["closed"])
    raw = _C.Communicator(rank, world_size, torch.cuda.current_device(), 1 << 20, 5.0)
    expect("before handles", qr.QuickReduceError,
           lambda: raw.all_reduce(x.data_ptr(), x.data_ptr(), x.numel(), 0, 1, 1, 0), ["handles"])
    raw.close()
    return res


def peer_timeout(rank, world_size):
    """Rank 1 skips a call: rank 0 must get PeerTimeoutError within the timeout + 5 s, then stay broken."""
    res = {}
    comm = qr.Communicator(max_size=1 << 20, timeout_s=2.0)
    x = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    comm.all_reduce(x)  # one good call
    torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        failure, what = harness.expect_peer_timeout(comm, lambda: comm.all_reduce(x, algo="two_shot"))
        res["timeout raised"] = failure or (None if "rank 1" in what else f"does not name rank 1: {what}")
        res["info/timeout raised"] = what
        try:
            comm.all_reduce(x)
            res["broken after"] = "later call did not raise"
        except qr.PeerTimeoutError:
            res["broken after"] = None
    dist.barrier()
    comm.close()
    return res


def call_mismatch(rank, world_size):
    """Ranks that make different calls get CallMismatchError (or at worst a timeout), never data."""
    res = {}
    for name, kwargs0, kwargs1, n0, n1 in (
            ("two_shot size", {"algo": "two_shot"}, {"algo": "two_shot"}, 1 << 16, (1 << 16) + 8),
            ("two_shot codec", {"algo": "two_shot", "codec": "int4"}, {"algo": "two_shot", "codec": "int8"}, 1 << 16, 1 << 16),
            ("one_shot size", {"algo": "one_shot"}, {"algo": "one_shot"}, 4096, 4104),
            ("dtype", {"algo": "one_shot"}, {"algo": "one_shot"}, 4096, 4096)):
        comm = qr.Communicator(max_size=1 << 20, timeout_s=3.0)
        dtype = torch.bfloat16 if (name == "dtype" and rank == 1) else torch.float16
        n = n0 if rank == 0 else n1
        x = torch.randn(n, device="cuda", dtype=dtype)
        kwargs = kwargs0 if rank == 0 else kwargs1
        t0 = time.time()
        comm.all_reduce(x, **kwargs)
        torch.cuda.synchronize()
        try:
            comm.check()
            res[name] = "no error"
        except qr.CallMismatchError as e:
            res[name] = None if "different" in str(e) else f"message: {e}"
            res[f"info/{name}"] = f"rank {rank}: CallMismatchError after {time.time() - t0:.2f}s: {e}"
        except qr.PeerTimeoutError as e:
            res[name] = None  # waiting for data the peer never sends: an error, not garbage
            res[f"info/{name}"] = f"rank {rank}: PeerTimeoutError after {time.time() - t0:.2f}s"
        dist.barrier()
        comm.close()
    return res


def soak(rank, world_size):
    """100,000 calls of random size/dtype/codec/algorithm with every result checked on the GPU,
    NCCL and matmuls on a side stream, then 10,000 graph replays with changing inputs
    (QR_SOAK_CALLS and QR_SOAK_REPLAYS set fewer, for ranks that share a GPU)."""
    calls = int(os.environ.get("QR_SOAK_CALLS", "100000"))
    replays = int(os.environ.get("QR_SOAK_REPLAYS", "10000"))
    res = {}
    comm = qr.Communicator(max_size=8 << 20)
    rng = np.random.default_rng(1234)  # same sequence on every rank
    # From 2 << 20 (4 MiB) a one-shot empties its slots on read, mixed here with ones that leave a
    # clearing pass; (3 << 20) + 1 goes one-shot on 2 GPUs only (4 MiB is the most on more).
    sizes = [1, 7, 4096 + 3, 65536, 300_001, 1 << 20, (2 << 20) - 5, 2 << 20, (3 << 20) + 1]
    cases = []  # (inputs on this rank, expected output) per size, dtype, codec
    for i, n in enumerate(sizes):
        for dname, dtype in DTYPES.items():
            xs = inputs_for(40_000 + i, n, dtype, world_size)
            for codec in qr.codec_names():
                want = exact_passthrough(xs) if codec == "fp16" else \
                    torch.from_numpy(twin(xs, dname, codec).view(np.int16)).cuda().view(dtype)
                cases.append((xs[rank], want, codec))
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")
    digest = torch.zeros((), dtype=torch.int64, device="cuda")
    side = torch.cuda.Stream()
    free0 = torch.cuda.mem_get_info()[0]
    t0 = time.time()
    picks = rng.integers(0, len(cases), calls)
    one_shot_coin = rng.integers(0, 2, calls)
    one_shot_max = comm._c.one_shot_max_bytes
    for it in range(calls):
        x, want, codec = cases[picks[it]]
        fits = x.numel() * 2 <= one_shot_max
        algo = "one_shot" if codec == "fp16" and fits and one_shot_coin[it] else "two_shot"
        out = comm.all_reduce(x, codec=codec, algo=algo)
        wrong += (out.view(torch.int16) != want.view(torch.int16)).sum()
        digest += out.view(torch.int16).sum()
        if it % 1000 == 0:
            with torch.cuda.stream(side):
                t = torch.ones(4096, device="cuda")
                dist.all_reduce(t)
                torch.randn(512, 512, device="cuda") @ torch.randn(512, 512, device="cuda")
            torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    comm.check()
    took = time.time() - t0
    res["calls correct"] = None if int(wrong) == 0 else f"{int(wrong)} wrong elements"
    res["calls identical"] = None if same_everywhere(int(digest)) else "ranks differ"
    res["info/calls"] = f"{calls} calls in {took:.1f}s, wrong elements {int(wrong)}"

    # 10,000 graph replays: one-shot, two-shot and int4 in one graph, inputs changed per replay.
    n = 65536 + 3
    bank = [inputs_for(50_000 + k, n, torch.bfloat16, world_size) for k in range(8)]
    want = [(exact_passthrough(b), torch.from_numpy(twin(b, "bf16", "int4").view(np.int16)).cuda().view(torch.bfloat16))
            for b in bank]
    x = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    exp_exact, exp_int4 = torch.empty_like(x), torch.empty_like(x)
    errs = torch.zeros((), dtype=torch.int64, device="cuda")
    o1, o2, o3 = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)

    def body():
        comm.all_reduce(x, out=o1, algo="one_shot")
        comm.all_reduce(x, out=o2, algo="two_shot")
        comm.all_reduce(x, out=o3, codec="int4")
        errs.add_((o1.view(torch.int16) != exp_exact.view(torch.int16)).sum()
                  + (o2.view(torch.int16) != exp_exact.view(torch.int16)).sum()
                  + (o3.view(torch.int16) != exp_int4.view(torch.int16)).sum())

    x.copy_(bank[0][rank]); exp_exact.copy_(want[0][0]); exp_int4.copy_(want[0][1])
    g = harness.capture_graph(body)
    torch.cuda.synchronize()
    errs.zero_()
    t0 = time.time()
    for it in range(replays):
        k = it % 8
        x.copy_(bank[k][rank]); exp_exact.copy_(want[k][0]); exp_int4.copy_(want[k][1])
        g.replay()
    torch.cuda.synchronize()
    comm.check()
    res["graph replays"] = None if int(errs) == 0 else f"{int(errs)} wrong elements"
    res["info/graph replays"] = f"{replays} replays x 3 calls in {time.time() - t0:.1f}s, wrong elements {int(errs)}"
    del g
    comm.close()
    torch.cuda.synchronize()
    free1 = torch.cuda.mem_get_info()[0]
    res["info/soak memory"] = f"free before {free0 >> 20} MiB, after close {free1 >> 20} MiB"
    return res


def two_groups(rank, world_size):
    """Communicators on two different process groups over the same ranks, interleaved."""
    ga = dist.new_group(list(range(world_size)))
    gb = dist.new_group(list(range(world_size)))
    a = qr.Communicator(group=ga, max_size=4 << 20)
    b = qr.Communicator(group=gb, max_size=4 << 20)
    wrong = 0
    for it in range(200):
        xs = inputs_for(60_000 + it, [4099, 1 << 18, 1 << 20][it % 3], torch.float16, world_size)
        want = exact_passthrough(xs)
        wrong += int(not torch.equal(a.all_reduce(xs[rank]), want))
        wrong += int(not torch.equal(b.all_reduce(xs[rank], algo="two_shot"), want))
        dist.all_reduce(torch.ones(8, device="cuda"), group=ga if it % 2 else gb)
    a.close()
    b.close()
    return {"interleaved groups": None if wrong == 0 else f"{wrong} wrong"}


def create_close_cycles(rank, world_size):
    """100 create/close cycles: no error, device memory back where it started."""
    # Free memory is the device's: where ranks share a GPU, each reads it with the other rank at
    # the same point (a communicator holds ~82 MiB here), hence the barriers.
    torch.cuda.synchronize()
    dist.barrier()
    free0 = torch.cuda.mem_get_info()[0]
    x = torch.randn(1 << 16, device="cuda", dtype=torch.float16)
    want = None
    for it in range(100):
        comm = qr.Communicator(max_size=16 << 20)
        y = comm.all_reduce(x)
        want = y if want is None else want
        if not torch.equal(y, want):
            return {"cycles": f"cycle {it}: result changed"}
        comm.close()
    torch.cuda.synchronize()
    dist.barrier()
    free1 = torch.cuda.mem_get_info()[0]
    leak = (free0 - free1) >> 20
    return {"cycles": None if leak < 64 else f"{leak} MiB less free after 100 cycles",
            "info/cycles": f"100 cycles of a 16 MiB communicator: free {free0 >> 20} -> {free1 >> 20} MiB"}
