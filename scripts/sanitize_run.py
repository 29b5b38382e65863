"""A short 2-rank (QR_TEST_WORLD_SIZE) run of every algorithm and codec at a few sizes (small, tail, large), and of
the segment collectives (reduce-scatter, all-gather, all-to-all even and uneven; bf16 and fp32), for
compute-sanitizer (scripts/gpu_check.sh stage `sanitize`). Every call is checked: the exact paths
against the fp32 rank-ordered sum, the lossy codecs against the CPU twin bit for bit, and every
rank's output against every other's. Exits non-zero on a wrong result.

With fewer GPUs than ranks (a one-GPU machine), both ranks share GPU 0 (tests/gpu/harness.py's
shared mode): the two processes' kernels then take turns on the GPU, so it says nothing of speed,
but it runs every path, the peer-memory mapping included.
"""
import os
import sys

import torch
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "gpu"))
import harness  # noqa: E402

WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))  # as tests/gpu/test_dist.py
# From 2 << 20 (4 MiB) a one-shot interleaves push and sum and empties its slots as it reads them;
# 4 MiB is the largest one-shot on 4 or 8 GPUs, 4 << 20 (8 MiB) on 2.
SIZES = (4096, 4096 * 3 + 5, 1 << 20, 2 << 20, (2 << 20) + 8, (3 << 20) + 1, 4 << 20)
SEGMENTS = (33, 4097, 100_001)  # values per segment: small (flag-in-data path) and larger
# QR_SANITIZE_SHORT=1: the three smallest all-reduce sizes and the two smallest segments, every path
# and codec still (racecheck at 8 ranks on one shared GPU does not fit a device call otherwise).
if os.environ.get("QR_SANITIZE_SHORT") == "1":
    SIZES, SEGMENTS = SIZES[:3], SEGMENTS[:2]
# QR_SANITIZE_PARTS: a comma list of the parts to run (default all of them).
PARTS = ("all_reduce", "collectives", "epilogue")
SELECTED = os.environ.get("QR_SANITIZE_PARTS", ",".join(PARTS)).split(",")
if not set(SELECTED) <= set(PARTS):
    sys.exit(f"QR_SANITIZE_PARTS={','.join(SELECTED)}: the parts are {','.join(PARTS)}")


def run(rank, world, port, failures):
    import torch.distributed as dist

    import quickreduce as qr
    import scenarios  # the GPU tests' reference helpers

    harness.init_rank(rank, world, port)
    comm = qr.Communicator(max_size=8 << 20, timeout_s=120)
    comm.two_shot_residual_min_bytes = 0  # the epilogue's add inside the two-shot at every size here
    wrong = []

    def check(key, out, want_bits=None, want=None):
        torch.cuda.synchronize()
        if want is not None and not torch.equal(out.view(torch.int16), want.view(torch.int16)):
            wrong.append(f"{key}: differs from the fp32 rank-ordered sum")
        if want_bits is not None and not scenarios.same_values(scenarios.bits(out), want_bits, "bf16"):
            wrong.append(f"{key}: GPU != twin: " + scenarios.first_mismatch(scenarios.bits(out), want_bits))
        if not scenarios.same_on_all_ranks(out):
            wrong.append(f"{key}: ranks differ")

    # Large, small, large again: a one-shot clears what the previous call left in its buffers.
    for n in (SIZES + SIZES[::-1]) * ("all_reduce" in SELECTED):
        xs = scenarios.inputs_for(n, n, torch.bfloat16, world)
        exact = scenarios.exact_passthrough(xs)
        for algo in ("one_shot", "two_shot"):
            if algo == "one_shot" and n * 2 > comm._c.one_shot_max_bytes:
                continue
            check(f"{algo}/bf16/n={n}", comm.all_reduce(xs[rank], codec="bf16", algo=algo), want=exact)
        for codec in qr.codec_names()[1:]:
            check(f"two_shot/{codec}/n={n}", comm.all_reduce(xs[rank], codec=codec, algo="two_shot"),
                  want_bits=scenarios.twin(xs, "bf16", codec))
        # values 2^-40..2^40 apart: the lossless codec's slices go raw (its restaging path)
        g = torch.Generator(device="cuda").manual_seed(n + 1)
        wides = [x * torch.exp2(torch.randint(-40, 41, (n,), generator=g, device="cuda")).bfloat16() for x in xs]
        check(f"two_shot/lossless-wide/n={n}", comm.all_reduce(wides[rank], codec="lossless", algo="two_shot"),
              want=scenarios.exact_passthrough(wides))
    # The segment collectives (exchange kernel), with odd and uneven sizes, checked against the twin.
    import collective_scenarios as cs
    for k in SEGMENTS * ("collectives" in SELECTED):
        for dname in ("bf16", "fp32"):
            xs = cs.rank_inputs(k, world * k, cs.DTYPES[dname], world)
            for codec in ("fp16", "fp8", "int4", "int6h"):
                tag = f"{dname}/{codec}/k={k}"
                for key, out, want in (
                        ("reduce_scatter", comm.reduce_scatter(xs[rank], codec=codec),
                         cs.twin_reduce_scatter(xs, dname, codec, rank)),
                        ("all_gather", comm.all_gather(xs[rank][:k], codec=codec),
                         cs.twin_all_gather([x[:k] for x in xs], dname, codec)),
                        ("all_to_all", comm.all_to_all(xs[rank], codec=codec),
                         cs.twin_all_to_all(xs, dname, codec, [[k] * world] * world, rank))):
                    torch.cuda.synchronize()
                    if cs.same_values(out, want) is not None:
                        wrong.append(f"{key}/{tag}: GPU != twin: {cs.same_values(out, want)}")
            rows = [[(k + 3 * r + d) % 50 for d in range(world)] for r in range(world)]  # uneven
            ys = [cs.rank_inputs(k + r, sum(rows[r]), cs.DTYPES[dname], 1)[0] for r in range(world)]
            out = comm.all_to_all(ys[rank], codec="int6", input_split_sizes=rows[rank],
                                  output_split_sizes=[rows[r][rank] for r in range(world)])
            torch.cuda.synchronize()
            if cs.same_values(out, cs.twin_all_to_all(ys, dname, "int6", rows, rank)) is not None:
                wrong.append(f"all_to_all uneven/{dname}/k={k}: GPU != twin")
    # The add + RMSNorm epilogue after the one-shot and the two-shot (rows in registers, and the
    # chunked path above hidden 16384), with and without FP8 output per token: the same bits on every
    # rank and residual_out equal to torch's add of the all-reduce's output.
    for tokens, hidden in ((3, 1024), (2, 8192), (1, 20480)) * ("epilogue" in SELECTED):
        x = torch.randn(tokens, hidden, generator=torch.Generator(device="cuda").manual_seed(hidden + rank),
                        device="cuda").bfloat16()
        shared = torch.Generator(device="cuda").manual_seed(hidden)  # residual and weight: the same on every rank
        residual = torch.randn(tokens, hidden, generator=shared, device="cuda").bfloat16()
        weight = torch.rand(hidden, generator=shared, device="cuda").bfloat16()
        for codec in ("bf16", "int4"):
            summed = comm.all_reduce(x, codec=codec)
            out, res_out = comm.all_reduce_add_rmsnorm(x, residual, weight, 1e-6, codec=codec)
            check(f"epilogue/{codec}/{tokens}x{hidden}", out)
            _, res_fp8, codes, _ = comm.all_reduce_add_rmsnorm(x, residual, weight, 1e-6, codec=codec,
                                                               fp8="per_token")
            check(f"epilogue fp8/{codec}/{tokens}x{hidden}", codes.view(torch.int16))
            for key, got in (("", res_out), (" fp8", res_fp8)):
                if not torch.equal(got, summed + residual):
                    wrong.append(f"epilogue{key}/{codec}/{tokens}x{hidden}: residual_out != all_reduce(x) + residual")
    comm.check()
    comm.close()
    dist.destroy_process_group()
    failures[rank] = wrong


if __name__ == "__main__":
    os.environ.setdefault("QR_TEST_SHARED_GPU", "1")  # on a one-GPU machine, share it
    shared = harness.shared_gpu(WORLD)
    print(f"sanitize_run: {WORLD} ranks on {'one shared GPU' if shared else f'{WORLD} GPUs'}")
    with mp.Manager() as manager:
        failures = manager.dict()
        mp.spawn(run, args=(WORLD, harness.free_port(), failures), nprocs=WORLD)
        wrong = [f"rank {r}: {msg}" for r in sorted(failures.keys()) for msg in failures[r]]
    for msg in wrong[:20]:
        print(msg)
    if wrong:
        sys.exit(f"sanitize_run: {len(wrong)} wrong results")
    print(f"sanitize_run: done, every result right (parts {','.join(SELECTED)}: {len(SIZES) * 2} all-reduce sizes, "
          "every path; reduce-scatter, all-gather, all-to-all even and uneven; the add + RMSNorm epilogue)")
