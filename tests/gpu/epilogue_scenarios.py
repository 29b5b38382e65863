"""GPU scenarios of the all-reduce's add + RMSNorm (+ FP8) epilogue (see harness.py): the fused
call against the numpy oracle of docs/codec-spec.md applied to the same all-reduce's output (bit
for bit), against torch's unfused add + RMSNorm (close: only the order of the sum of squares
differs), identical bits on every rank, CUDA-graph replays, bad arguments."""
from __future__ import annotations

import os

import numpy as np
import torch
import torch.distributed as dist

import quickreduce as qr
from quickreduce import oracle

import harness  # noqa: E402  (tests/gpu is on sys.path)
from collective_scenarios import from_raw, raw, same_values  # noqa: E402
from scenarios import same_on_all_ranks  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
CODECS = ["bf16", "lossless", "fp8", "int8", "int4", "int4h"]
SHAPES = [(1, 1024), (3, 4096), (7, 2048), (33, 8192), (2, 16384), (5, 1000 * 8)]  # (tokens, hidden)


def _inputs(seed, tokens, hidden, dtype, rank):
    """This rank's x; the residual and weight every rank shares (replicated, as in tensor parallelism)."""
    mine = torch.Generator(device="cuda").manual_seed(seed * 16 + rank)
    shared = torch.Generator(device="cuda").manual_seed(seed * 16 + 15)
    x = torch.randn(tokens, hidden, generator=mine, device="cuda").to(dtype)
    residual = torch.randn(tokens, hidden, generator=shared, device="cuda").mul_(4).to(dtype)
    weight = (1 + 0.1 * torch.randn(hidden, generator=shared, device="cuda")).to(dtype)
    return x, residual, weight


def _oracle(summed, residual, weight, dname, eps, fp8=None, fp8_scale=None):
    out, res, codes, scales = oracle.add_rmsnorm(raw(summed).reshape(summed.shape), raw(residual).reshape(summed.shape),
                                                 raw(weight), dname, eps, fp8, fp8_scale)
    return from_raw(out, summed.dtype).view(summed.shape), from_raw(res, summed.dtype).view(summed.shape), codes, scales


def _torch_unfused(summed, residual, weight, eps):
    """What a model does without fusion: torch's add, then Hugging Face's LlamaRMSNorm."""
    r = summed + residual
    h = r.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(r.dtype), r


def epilogue_vs_oracle(rank, world_size):
    """Every codec x dtype x shape, with the residual added in the two-shot (its size threshold at 0)
    and after it: fused == oracle(the same all-reduce's output) bit for bit, residual_out too;
    identical on every rank; close to torch's unfused sequence."""
    res = {}
    comm = qr.Communicator(max_size=8 << 20)
    eps = 1e-6
    for min_bytes, dname, dtype in ((m, *d) for m in (0, 1 << 62) for d in DTYPES.items()):
        comm.two_shot_residual_min_bytes = min_bytes
        for codec in CODECS:
            if codec == "lossless" and dtype == torch.float16:
                continue
            for tokens, hidden in SHAPES:
                x, residual, weight = _inputs(hash((tokens, hidden)) % 10_000, tokens, hidden, dtype, rank)
                summed = comm.all_reduce(x, codec=codec)  # the same call twice gives the same bits
                out, res_out = comm.all_reduce_add_rmsnorm(x, residual, weight, eps, codec=codec)
                want_out, want_res, _, _ = _oracle(summed, residual, weight, dname, eps)
                key = f"{dname}/{codec}/{tokens}x{hidden}/{'add in two-shot' if min_bytes == 0 else 'after'}"
                res[f"{key}/out"] = same_values(out, want_out)
                res[f"{key}/residual_out"] = same_values(res_out, want_res)
                res[f"{key}/same on all ranks"] = None if same_on_all_ranks(out) else "ranks differ"
                if codec in ("bf16", "lossless"):
                    t_out, t_res = _torch_unfused(summed, residual, weight, eps)
                    ulp = (out.float() - t_out.float()).abs().max().item()
                    res[f"{key}/torch residual"] = same_values(res_out, t_res)
                    scale = t_out.float().abs().max().item()
                    res[f"{key}/torch norm close"] = None if ulp <= scale * 2 ** -6 else f"max diff {ulp} (scale {scale})"
    comm.check()
    comm.close()
    return res


def epilogue_fp8(rank, world_size):
    """FP8 output, per token and per tensor, against the oracle's codes and scales."""
    import ml_dtypes
    res = {}
    comm = qr.Communicator(max_size=8 << 20)
    for dname, dtype in DTYPES.items():
        for tokens, hidden in [(5, 4096), (1, 8192)]:
            x, residual, weight = _inputs(7 + tokens, tokens, hidden, dtype, rank)
            summed = comm.all_reduce(x, codec="bf16")
            out, _, codes, scales = comm.all_reduce_add_rmsnorm(x, residual, weight, 1e-5, codec="bf16", fp8="per_token")
            _, _, want_codes, want_scales = _oracle(summed, residual, weight, dname, 1e-5, "per_token")
            got = codes.view(torch.uint8).cpu().numpy().view(ml_dtypes.float8_e4m3fn).astype(np.float32)
            key = f"{dname}/{tokens}x{hidden}"
            res[f"{key}/per_token codes"] = None if np.array_equal(got, want_codes) else "codes differ"
            res[f"{key}/per_token scales"] = (None if np.array_equal(scales.view(-1).cpu().numpy(), want_scales)
                                              else "scales differ")
            fixed = torch.tensor([0.02], device="cuda")
            _, _, codes, _ = comm.all_reduce_add_rmsnorm(x, residual, weight, 1e-5, codec="bf16", fp8="per_tensor",
                                                         fp8_scale=fixed)
            _, _, want_codes, _ = _oracle(summed, residual, weight, dname, 1e-5, "per_tensor", np.float32(0.02))
            got = codes.view(torch.uint8).cpu().numpy().view(ml_dtypes.float8_e4m3fn).astype(np.float32)
            res[f"{key}/per_tensor codes"] = None if np.array_equal(got, want_codes) else "codes differ"
    comm.close()
    return res


def epilogue_in_place_and_graphs(rank, world_size):
    """out=x and residual_out=residual in place; 200 graph replays with new inputs, checked; with the
    residual added after the two-shot and inside it (two_shot_residual_min_bytes 0)."""
    res = {}
    comm = qr.Communicator(max_size=8 << 20)
    tokens, hidden = 9, 4096
    weight = _inputs(100, tokens, hidden, torch.bfloat16, rank)[2]
    bank = []
    for b in range(3):
        x, residual, _ = _inputs(100 + b, tokens, hidden, torch.bfloat16, rank)
        summed = comm.all_reduce(x, codec="int4")
        bank.append((x, residual, *_oracle(summed, residual, weight, "bf16", 1e-6)[:2]))
    for route, min_bytes in (("after the two-shot", 1 << 62), ("in the two-shot", 0)):
        comm.two_shot_residual_min_bytes = min_bytes
        x, r = bank[0][0].clone(), bank[0][1].clone()
        out, res_out = comm.all_reduce_add_rmsnorm(x, r, weight, 1e-6, codec="int4", out=x, residual_out=r)
        res[f"{route}/in place"] = same_values(x, bank[0][2]) or same_values(r, bank[0][3])
        res[f"{route}/in place returns the inputs"] = None if out is x and res_out is r else "not the same tensors"
        gx, gr = torch.empty_like(x), torch.empty_like(r)
        outs = [torch.empty_like(x), torch.empty_like(r)]

        def body():
            comm.all_reduce_add_rmsnorm(gx, gr, weight, 1e-6, codec="int4", out=outs[0], residual_out=outs[1])

        wrong = harness.replay_checked(body, [gx, gr], outs, bank, int(os.environ.get("QR_EPILOGUE_REPLAYS", "200")))
        res[f"{route}/graph replays correct"] = None if wrong == 0 else f"{wrong} wrong elements"
    comm.check()
    comm.close()
    return res


def epilogue_fused_one_shot(rank, world_size):
    """The one-shot with the epilogue in the same kernel (a thread-block cluster of hidden / 1024 CTAs
    a row) against the two-kernel path (QUICKREDUCE_FUSED_EPILOGUE=0): the same bits for both dtypes
    and every row shape it takes, in place too, over 200 graph replays; identical on all ranks; a peer
    that skips a call gives PeerTimeoutError; a peer making the two-kernel call gives an error."""
    from quickreduce import epilogues

    res = {}
    eps = 1e-5
    comm = qr.Communicator(max_size=8 << 20)

    def both(x, residual, weight):  # an exact codec: the one-shot (QUICKREDUCE_QUANTIZATION aside)
        codec = "bf16" if x.dtype == torch.bfloat16 else "fp16"
        comm.fused_epilogue = True
        fused = comm.all_reduce_add_rmsnorm(x, residual, weight, eps, codec=codec)
        fused = tuple(t.clone() for t in fused)
        comm.fused_epilogue = False
        return fused, comm.all_reduce_add_rmsnorm(x, residual, weight, eps, codec=codec)

    # Rows of 1 to 16 CTAs (7 and 12 too) take the fused kernel up to its largest call, 256 KiB
    # (16 x 8192, kFusedOneShotMaxBytes); above it (17 x 8192, 64 x 4096) and for a row that is not
    # whole CTAs (2560) the two-kernel path runs.
    shapes = [(4, 1024), (2, 2048), (1, 4096), (5, 4096), (16, 8192), (3, 16384), (2, 12288), (1, 7168),
              (17, 8192), (64, 4096), (3, 2560)]
    fused_shapes = shapes[:8]
    for dname, dtype in DTYPES.items():
        for tokens, hidden in shapes:
            x, residual, weight = _inputs(tokens * 7 + hidden, tokens, hidden, dtype, rank)
            key = f"{dname}/{tokens}x{hidden}"
            comm.fused_epilogue = True
            fuses = epilogues._route(comm, x, dname, None, tokens, hidden)[0] == "one kernel"
            want_fused = (tokens, hidden) in fused_shapes
            res[f"{key}/route"] = None if fuses == want_fused else f"fused kernel: {fuses}, expected {want_fused}"
            (out, res_out), (want_out, want_res) = both(x, residual, weight)
            res[f"{key}/out"] = same_values(out, want_out)
            res[f"{key}/residual_out"] = same_values(res_out, want_res)
            res[f"{key}/same on all ranks"] = None if same_on_all_ranks(out) else "ranks differ"
            xi, ri = x.clone(), residual.clone()  # in place: out=x, residual_out=residual
            comm.fused_epilogue = True
            comm.all_reduce_add_rmsnorm(xi, ri, weight, eps, codec=dname, out=xi, residual_out=ri)
            res[f"{key}/in place"] = same_values(xi, want_out) or same_values(ri, want_res)
    # 200 graph replays of the fused call with new inputs, checked against the two-kernel path's bits.
    tokens, hidden = 4, 4096
    weight = _inputs(500, tokens, hidden, torch.bfloat16, rank)[2]
    bank = []
    for b in range(3):
        x, residual, _ = _inputs(500 + b, tokens, hidden, torch.bfloat16, rank)
        comm.fused_epilogue = False
        bank.append((x, residual, *comm.all_reduce_add_rmsnorm(x, residual, weight, eps, codec="bf16")))
    comm.fused_epilogue = True
    gx, gr = torch.empty_like(bank[0][0]), torch.empty_like(bank[0][1])
    outs = [torch.empty_like(gx), torch.empty_like(gr)]

    def body():
        comm.all_reduce_add_rmsnorm(gx, gr, weight, eps, codec="bf16", out=outs[0], residual_out=outs[1])

    wrong = harness.replay_checked(body, [gx, gr], outs, bank, int(os.environ.get("QR_EPILOGUE_REPLAYS", "200")))
    res["graph replays correct"] = None if wrong == 0 else f"{wrong} wrong elements"
    comm.check()
    comm.close()
    # A peer that skips a fused call: the waiting rank's error comes within seconds.
    x, residual, weight = _inputs(600, 2, 4096, torch.bfloat16, rank)
    comm = qr.Communicator(max_size=8 << 20, timeout_s=2.0)
    dist.barrier()
    if rank == 0:
        res["peer skips a call"], res["info/peer skips a call"] = harness.expect_peer_timeout(
            comm, lambda: comm.all_reduce_add_rmsnorm(x, residual, weight, eps, codec="bf16"))
    dist.barrier()
    comm.close()
    # Rank 1 makes the two-kernel call of the same size: an error, never each other's data.
    comm = qr.Communicator(max_size=8 << 20, timeout_s=2.0)
    comm.fused_epilogue = rank != 1
    comm.all_reduce_add_rmsnorm(x, residual, weight, eps, codec="bf16")
    torch.cuda.synchronize()
    try:
        comm.check()
        res["fused against two-kernel"] = None if rank > 1 else "no error"
    except (qr.CallMismatchError, qr.PeerTimeoutError) as e:
        res["fused against two-kernel"] = None
        res["info/fused against two-kernel"] = f"rank {rank}: {type(e).__name__}: {e}"
    dist.barrier()
    comm.close()
    return res


def epilogue_bad_inputs(rank, world_size):
    """Clear exceptions before anything is launched."""
    res = {}
    comm = qr.Communicator(max_size=1 << 20)
    x = torch.randn(4, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(1024, device="cuda", dtype=torch.bfloat16)
    cases = {
        "hidden not a multiple of 8": (lambda: comm.all_reduce_add_rmsnorm(x[:, :1020].contiguous(), x[:, :1020].contiguous(), w[:1020]), ValueError),
        "residual shape": (lambda: comm.all_reduce_add_rmsnorm(x, x[:2], w), ValueError),
        "weight shape": (lambda: comm.all_reduce_add_rmsnorm(x, x, w[:512]), ValueError),
        "fp32": (lambda: comm.all_reduce_add_rmsnorm(x.float(), x.float(), w.float()), TypeError),
        "eps": (lambda: comm.all_reduce_add_rmsnorm(x, x, w, eps=0.0), ValueError),
        "fp8 mode": (lambda: comm.all_reduce_add_rmsnorm(x, x, w, fp8="per_row"), ValueError),
        "per_tensor without scale": (lambda: comm.all_reduce_add_rmsnorm(x, x, w, fp8="per_tensor"), ValueError),
    }
    for name, (call, exc) in cases.items():
        try:
            call()
            res[name] = f"no {exc.__name__}"
        except exc:
            res[name] = None
    torch.cuda.synchronize()
    comm.check()
    comm.close()
    return res
