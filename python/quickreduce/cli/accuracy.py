"""`quickreduce accuracy`: error of the compressed all-reduce against a float64 reference.

For every data set, dtype, world size and codec it runs an all-reduce (the C++ CPU twin by
default, real GPUs with --device cuda, the numpy oracle with --device oracle) and reports the
relative L2 error and the max abs error against the float64 sum of the (dtype-rounded) inputs,
beside a prediction built from single-tensor round trips of the oracle: each rank's input is
quantized once (first shot) where another rank reduces it (the owner adds its own values
exactly), and the sum once more (second shot), so
    predicted = sqrt(sum_r ||RT(x_r) - x_r||^2 over values r does not own + ||RT(sum) - sum||^2) / ||sum||.

`--collective reduce_scatter|all_gather|all_to_all` does the same for the segment collectives (CPU
twin; one quantization a value): every segment's round trip RT (blocks from the segment's start) is
the prediction, summed over every rank's output: all-gather and all-to-all sqrt(sum ||RT(seg) - seg||^2)
/ ||out||, reduce-scatter the same over the segments a rank receives from the others plus the
roundings of the fp32 rank-order adds and of the sum to T, / ||sum||.
`--dtypes fp32` covers fp32 inputs (bf16 block scales).

`--accuracy-json PATH` measures every lossy codec on the CPU twin for every collective, data kind,
dtype and world size and writes the relative L2 errors in the form of
python/quickreduce/tuned/codec_accuracy.json, which `codec="auto:<codec>"` ranks codecs by
(quickreduce.tuning.admits).
"""
from __future__ import annotations

import argparse
import csv
import functools
import math
import sys

import numpy as np

from quickreduce import oracle
from quickreduce.cli.launch import free_port

CODECS = ("passthrough", "fp8", "int8", "int6", "int6h", "int4", "int4h", "fp4")  # passthrough runs as the dtype's name
# On request only: "lossless" has the passthrough's error by construction (the same bits).
EXTRA_CODECS = ("lossless",)
DATASETS = ("gaussian", "student_t", "llm")
DTYPES = ("bf16", "fp16")
ALL_DTYPES = DTYPES + ("fp32",)  # fp32: the collectives (and the fp32 all-reduce) only
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
HIDDEN = 4096          # columns of the [tokens, hidden] matrix of the "llm" data set
OUTLIER_FRAC = 0.005   # share of hidden channels that are outliers
OUTLIER_SCALES = (20.0, 100.0)  # each outlier channel's magnitude, uniform in this range (as in LLM hidden states)


def api_codec(codec: str, dtype: str) -> str:
    return dtype if codec == "passthrough" else codec


# ---- data ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)  # every (data, dtype, rank) is reused across codecs and W
def make_input(dataset: str, dtype: str, rank: int, numel: int, seed: int) -> np.ndarray:
    """One rank's input as T bits: drawn in float32, rounded to T (the reference sees the
    rounded values, so input rounding is not counted as codec error)."""
    rng = np.random.default_rng([seed, DATASETS.index(dataset), rank])
    if dataset == "gaussian":
        x = rng.standard_normal(numel, dtype=np.float32)
    elif dataset == "student_t":
        x = rng.standard_t(3, numel).astype(np.float32)
    elif dataset == "llm":
        hidden = min(HIDDEN, numel)
        tokens = -(-numel // hidden)
        x = rng.standard_normal((tokens, hidden), dtype=np.float32)
        # the same outlier channels on every rank, as in a real layer's activations
        channels = np.random.default_rng([seed, 99])
        cols = channels.choice(hidden, max(1, round(OUTLIER_FRAC * hidden)), replace=False)
        x[:, cols] *= channels.uniform(*OUTLIER_SCALES, cols.size).astype(np.float32)
        x = x.reshape(-1)[:numel]
    else:
        raise ValueError(f"unknown data set {dataset!r}")
    out = oracle.from_f32(x, dtype)
    out.flags.writeable = False  # cached: shared by every caller
    return out


@functools.lru_cache(maxsize=None)
def _first_shot_err2(dataset, dtype, codec, rank, world, numel, seed) -> float:
    """First-shot squared error of one rank: its values owned by another rank take a round trip."""
    not_mine = oracle.owners(numel, world) != rank
    return round_trip_err2(make_input(dataset, dtype, rank, numel, seed), dtype, codec, not_mine)


def reference(inputs, dtype) -> np.ndarray:
    """float64 sum of the inputs' T values."""
    return sum(oracle.to_f32(x, dtype).astype(np.float64) for x in inputs)


def metrics(out_bits, ref, dtype) -> tuple[float, float]:
    """(relative L2 error, max abs error) of the T output against the float64 reference."""
    err = oracle.to_f32(out_bits, dtype).astype(np.float64) - ref
    return float(np.linalg.norm(err) / np.linalg.norm(ref)), float(np.max(np.abs(err)))


def round_trip_err2(x, dtype, codec, where=True) -> float:
    """||RT(x) - x||^2 of one oracle quantize/dequantize of T bits x (over `where`)."""
    d = oracle.to_f32(oracle.round_trip(x, dtype, codec), dtype).astype(np.float64)
    return float(np.sum(np.where(where, (d - oracle.to_f32(x, dtype)) ** 2, 0.0)))


def predicted(ref, first_shot_err2, dtype, codec) -> float:
    """Error predicted from independent round trips: each rank's input (first shot, squared
    errors given) and the sum (second shot, including the output's to_T)."""
    d = oracle.round_trip(oracle.from_f32(ref.astype(np.float32), dtype), dtype, codec)
    e2 = sum(first_shot_err2) + float(np.sum((oracle.to_f32(d, dtype) - ref) ** 2))
    return math.sqrt(e2) / float(np.linalg.norm(ref))


# ---- backends: each returns {(dataset, dtype, codec): out bits} for one world size ------------

def _run_host(fn, jobs, world, numel, seed):
    res = {}
    for dataset, dtype, codec in jobs:
        xs = [make_input(dataset, dtype, r, numel, seed) for r in range(world)]
        res[(dataset, dtype, codec)] = np.asarray(fn(xs, dtype, api_codec(codec, dtype)))
    return res


def _cuda_worker(rank, world, port, jobs, numel, seed, queue):
    import torch
    import torch.distributed as dist
    import quickreduce as qr

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    try:
        comm = qr.Communicator(group=None, max_size=None)
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}
        for dataset, dtype, codec in jobs:
            x = make_input(dataset, dtype, rank, numel, seed)
            xt = torch.from_numpy(x.view(np.int16).copy()).view(tdt[dtype]).cuda()
            y = comm.all_reduce(xt, codec=api_codec(codec, dtype))
            torch.cuda.synchronize()
            if rank == 0:
                queue.put(((dataset, dtype, codec),
                           y.cpu().contiguous().view(torch.int16).numpy().view(np.uint16).copy()))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _run_cuda(jobs, world, numel, seed):
    import queue as queue_mod

    import torch.multiprocessing as mp

    q = mp.get_context("spawn").Queue()
    procs = mp.start_processes(_cuda_worker, args=(world, free_port(), jobs, numel, seed, q),
                               nprocs=world, join=False, start_method="spawn")
    res = {}
    while len(res) < len(jobs):  # drain before joining, or rank 0 blocks on a full pipe
        try:
            key, y = q.get(timeout=1.0)
            res[key] = y
        except queue_mod.Empty:
            if any(p.exitcode not in (None, 0) for p in procs.processes):
                break  # a rank failed: join() below raises its exception
    while not procs.join():
        pass
    if len(res) < len(jobs):
        raise RuntimeError(f"cuda run at world size {world} returned {len(res)}/{len(jobs)} results")
    return res


# ---- output -------------------------------------------------------------------------------------

FIELDS = ("data", "dtype", "codec", "world_size", "numel", "rel_l2", "predicted_rel_l2", "max_abs",
          "device")


def _print_table(rows, title):
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        print(f"{'data':<10} {'dtype':<5} {'codec':<6} {'W':>2} {'rel L2':>10} {'predicted':>10} "
              f"{'max abs':>10}")
        for r in rows:
            print(f"{r['data']:<10} {r['dtype']:<5} {r['codec']:<6} {r['world_size']:>2} "
                  f"{r['rel_l2']:>10.3e} {r['predicted_rel_l2']:>10.3e} {r['max_abs']:>10.3e}")
        return
    t = Table(title=title)
    for h in ("data", "dtype", "codec", "W", "rel L2", "predicted", "max abs"):
        t.add_column(h, justify="left" if h in ("data", "dtype", "codec") else "right")
    for r in rows:
        t.add_row(r["data"], r["dtype"], r["codec"], str(r["world_size"]), f"{r['rel_l2']:.3e}",
                  f"{r['predicted_rel_l2']:.3e}", f"{r['max_abs']:.3e}")
    Console(width=max(100, Console().width)).print(t)


def _print_markdown(rows, codecs):
    """One line per (data, dtype, W); cells 'measured (predicted)' relative L2 error."""
    cells = {(r["data"], r["dtype"], r["world_size"], r["codec"]): r for r in rows}
    keys = sorted({k[:3] for k in cells}, key=lambda k: (DATASETS.index(k[0]), k[1], k[2]))
    print("| data | dtype | W | " + " | ".join(codecs) + " |")
    print("|---|---|---|" + "---|" * len(codecs))
    for d, t, w in keys:
        vals = []
        for c in codecs:
            r = cells.get((d, t, w, api_codec(c, t)))
            vals.append(f"{r['rel_l2']:.2e} ({r['predicted_rel_l2']:.2e})" if r else "")
        print(f"| {d} | {t} | {w} | " + " | ".join(vals) + " |")
    print("\nrelative L2 error vs float64, measured (predicted from one round trip per shot)")


def _segment_err2(x, dtype, codec, lo, hi) -> float:
    """||RT(seg) - seg||^2 of the segment x[lo:hi], blocks from its start."""
    return round_trip_err2(x[lo:hi], dtype, codec) if hi > lo else 0.0


def collective_row(collective, dataset, dtype, codec, world, numel, seed, predict: bool = True) -> dict:
    """Measured (CPU twin) and predicted relative L2 error of one segment collective, over the
    outputs of every rank. numel: each rank's input (divisible by world). predict=False: no
    prediction (nan), the measurement alone."""
    from quickreduce import _C
    xs = [make_input(dataset, dtype, r, numel, seed) for r in range(world)]
    f64 = [oracle.to_f32(x, dtype).astype(np.float64) for x in xs]
    k = numel // world
    if collective == "all_gather":
        outs = [_C.twin_all_gather(xs, dtype, codec)]
        refs = [np.concatenate(f64)]
        e2 = sum(_segment_err2(x, dtype, codec, 0, numel) for x in xs) if predict else 0.0
    elif collective == "all_to_all":
        outs = _C.twin_all_to_all(xs, dtype, codec, [[k] * world] * world)
        refs = [np.concatenate([f[d * k:(d + 1) * k] for f in f64]) for d in range(world)]
        e2 = sum(_segment_err2(x, dtype, codec, d * k, (d + 1) * k) for r, x in enumerate(xs) for d in range(world)
                 if d != r) if predict else 0.0  # each rank's own segment arrives exact
    elif collective == "reduce_scatter":
        outs = _C.twin_reduce_scatter(xs, dtype, codec)
        refs = [sum(f[r * k:(r + 1) * k] for f in f64) for r in range(world)]
        e2 = sum(_segment_err2(xs[s], dtype, codec, r * k, (r + 1) * k)
                 for r in range(world) for s in range(world) if s != r) if predict else 0.0
        for r, ref in enumerate(refs if predict else []):  # the fp32 adds in rank order, then the sum's rounding to T
            acc = f64[0][r * k:(r + 1) * k].astype(np.float32)
            for f in f64[1:]:
                exact = acc.astype(np.float64) + f[r * k:(r + 1) * k]
                acc = exact.astype(np.float32)
                e2 += float(np.sum((acc - exact) ** 2))
            e2 += float(np.sum((oracle.to_f32(oracle.from_f32(acc, dtype), dtype) - acc.astype(np.float64)) ** 2))
    else:
        raise ValueError(f"unknown collective {collective!r}")
    err = np.concatenate([oracle.to_f32(o, dtype).astype(np.float64) - ref for o, ref in zip(outs, refs)])
    norm = float(np.linalg.norm(np.concatenate(refs)))
    return dict(collective=collective, data=dataset, dtype=dtype, codec=codec, world_size=world, numel=numel,
                rel_l2=float(np.linalg.norm(err)) / norm, predicted_rel_l2=math.sqrt(e2) / norm if predict else math.nan,
                max_abs=float(np.max(np.abs(err))), device="cpu")


LOSSY_CODECS = tuple(c for c in CODECS if c != "passthrough")
DATA_KINDS = {"gaussian": "N(0, 1)",
              "student_t": "Student's t with 3 degrees of freedom (heavy tails)",
              "llm": f"[tokens, {HIDDEN}] N(0, 1) with {OUTLIER_FRAC:.1%} of the channels scaled by "
                     f"{OUTLIER_SCALES[0]:g}-{OUTLIER_SCALES[1]:g}x, the same channels on every rank "
                     "(outlier channels, as in LLM hidden states)"}


def accuracy_cells(world_sizes, numel: int, seed: int, datasets=DATASETS, log=None) -> dict:
    """{"<collective>/<data kind>/<dtype>/w<W>": {codec: relative L2 error}} of every lossy codec,
    measured on the CPU twin: the all-reduce in bf16 and fp16, the segment collectives in fp32 too."""
    from quickreduce import _C
    cells = {}
    for collective in COLLECTIVES:
        for w in world_sizes:
            for d in datasets:
                for t in (DTYPES if collective == "all_reduce" else ALL_DTYPES):
                    errors = {}
                    for c in LOSSY_CODECS:
                        if collective == "all_reduce":
                            xs = [make_input(d, t, r, numel, seed) for r in range(w)]
                            errors[c] = metrics(np.asarray(_C.twin_all_reduce(xs, t, c)), reference(xs, t), t)[0]
                        else:
                            errors[c] = collective_row(collective, d, t, c, w, numel, seed, predict=False)["rel_l2"]
                    cells[f"{collective}/{d}/{t}/w{w}"] = {c: float(f"{e:.6g}") for c, e in errors.items()}
                    if log:
                        log(f"{collective}/{d}/{t}/w{w}: " + " ".join(f"{c}={e:.3e}" for c, e in errors.items()))
    return cells


def write_accuracy_json(path, world_sizes, numel: int, seed: int, command: str, log=None) -> None:
    import json
    cells = accuracy_cells(world_sizes, numel, seed, log=log)
    data = {"format": 1, "measured_by": command,
            "how": "relative L2 error of each lossy codec against the float64 result, on the CPU twin (bit-exact "
                   "with the CUDA kernels), for every collective, data kind, dtype and world size; seeded "
                   "inputs, rounded to the dtype first. quickreduce.tuning.admits lets auto:<codec> run "
                   "another codec only where its error is at most <codec>'s in every cell.",
            "numel_per_rank": numel, "seed": seed, "world_sizes": list(world_sizes), "data_kinds": DATA_KINDS,
            "rel_l2": cells}
    text = "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items() if k != "rel_l2")
    text += ',\n "rel_l2": {\n' + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in cells.items())
    with open(path, "w") as f:
        f.write(text + "\n }\n}\n")


def _csv_list(s, allowed=None):
    items = [v.strip() for v in s.split(",") if v.strip()]
    if allowed is not None:
        bad = [v for v in items if v not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {','.join(allowed)}")
    return items


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {value}")
    return value


def parse_world_sizes(text: str) -> list[int]:
    """A comma list of world sizes, each one the build supports (2.._C.MAX_WORLD_SIZE)."""
    from quickreduce import _C

    limit = int(_C.MAX_WORLD_SIZE)
    sizes = []
    for item in _csv_list(text):
        try:
            sizes.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a whole number") from None
    bad = [w for w in sizes if not 2 <= w <= limit]
    if not sizes or bad:
        raise argparse.ArgumentTypeError(f"world sizes must be 2..{limit} (this build's limit), got {text!r}")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quickreduce accuracy", description=__doc__.split("\n")[0])
    p.add_argument("--world-sizes", type=parse_world_sizes, default=[2, 4, 8],
                   help="comma list of ranks to simulate, each 2..8 (default 2,4,8)")
    p.add_argument("--numel", type=positive_int, default=1 << 20, help="elements per rank (default 1048576)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--codecs", type=lambda s: _csv_list(s, CODECS + EXTRA_CODECS), default=list(CODECS),
                   help=f"comma list from {','.join(CODECS + EXTRA_CODECS)} (default: all but lossless)")
    p.add_argument("--dtypes", type=lambda s: _csv_list(s, ALL_DTYPES), default=list(DTYPES),
                   help="comma list from bf16,fp16,fp32 (default bf16,fp16; fp32 with --collective only)")
    p.add_argument("--collective", choices=COLLECTIVES, default="all_reduce",
                   help="the segment collectives run on the CPU twin (one quantization a value)")
    p.add_argument("--datasets", type=lambda s: _csv_list(s, DATASETS), default=list(DATASETS),
                   help="comma list of data kinds: gaussian (N(0,1)), student_t (3 degrees of freedom: "
                        "heavy tails), llm (Gaussian with 0.5%% outlier channels of 20-100x) (default: all)")
    p.add_argument("--device", choices=("cpu", "cuda", "oracle"), default="cpu",
                   help="cpu: the C++ twin; cuda: real GPUs (NCCL group); oracle: the numpy oracle")
    p.add_argument("--csv", metavar="PATH", help="also write the rows to a CSV file")
    p.add_argument("--markdown", action="store_true", help="print a GitHub-markdown table")
    p.add_argument("--accuracy-json", metavar="PATH",
                   help="measure every lossy codec for every collective, data kind and dtype at --world-sizes "
                        "on the CPU twin and write the errors auto:<codec> ranks codecs by (the form of "
                        "python/quickreduce/tuned/codec_accuracy.json); ignores --codecs/--dtypes/--datasets")
    return p


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.accuracy_json:
        if args.device != "cpu":
            p.error("--accuracy-json runs on the CPU twin (--device cpu)")
        bad = [w for w in args.world_sizes if args.numel % w]
        if bad:
            p.error(f"--numel {args.numel} must divide by every world size (not {bad})")
        command = f"quickreduce accuracy --accuracy-json {args.accuracy_json} --world-sizes " \
                  f"{','.join(map(str, args.world_sizes))} --numel {args.numel} --seed {args.seed}"
        write_accuracy_json(args.accuracy_json, args.world_sizes, args.numel, args.seed, command,
                            log=lambda text: print(text, file=sys.stderr, flush=True))
        print(f"wrote {args.accuracy_json}", file=sys.stderr)
        return 0

    if args.collective != "all_reduce":
        if args.device != "cpu":
            p.error("--collective other than all_reduce runs on the CPU twin only (--device cpu)")
        bad = [w for w in args.world_sizes if args.numel % w]
        if bad:
            p.error(f"--numel {args.numel} must divide by every world size (not {bad})")
        rows = [collective_row(args.collective, d, t, api_codec(c, t), w, args.numel, args.seed)
                for w in args.world_sizes for d in args.datasets for t in args.dtypes for c in args.codecs]
        rows.sort(key=lambda r: (DATASETS.index(r["data"]), r["dtype"], r["world_size"]))
        _print_table(rows, f"quickreduce accuracy: {args.collective} (CPU twin), {args.numel} elements per rank")
        if args.markdown:
            _print_markdown(rows, args.codecs)
        if args.csv:
            _write_csv(args.csv, rows, ("collective",) + FIELDS)
        return 0
    if "fp32" in args.dtypes:
        p.error("--dtypes fp32 needs --collective reduce_scatter, all_gather or all_to_all")

    if args.device == "cpu":
        from quickreduce import _C
        run = lambda jobs, w: _run_host(_C.twin_all_reduce, jobs, w, args.numel, args.seed)
    elif args.device == "oracle":
        run = lambda jobs, w: _run_host(oracle.all_reduce, jobs, w, args.numel, args.seed)
    else:
        import torch
        ngpu = torch.cuda.device_count()
        if not any(w <= ngpu for w in args.world_sizes):
            p.error(f"--device cuda runs world size {min(args.world_sizes)} or more on as many GPUs; "
                    f"found {ngpu} GPU(s) (--device cpu runs the CPU twin)")
        run = lambda jobs, w: _run_cuda(jobs, w, args.numel, args.seed)

    jobs = [(d, t, c) for d in args.datasets for t in args.dtypes for c in args.codecs]
    rows = []
    for w in args.world_sizes:
        if args.device == "cuda" and w > ngpu:
            print(f"note: skipping world size {w}: only {ngpu} GPU(s) here", file=sys.stderr)
            continue
        outs = run(jobs, w)
        for d, t, c in jobs:
            xs = [make_input(d, t, r, args.numel, args.seed) for r in range(w)]
            ref = reference(xs, t)
            rel, mx = metrics(outs[(d, t, c)], ref, t)
            pc = api_codec(c, t)
            e1 = [_first_shot_err2(d, t, pc, r, w, args.numel, args.seed) for r in range(w)]
            rows.append(dict(data=d, dtype=t, codec=pc, world_size=w, numel=args.numel,
                             rel_l2=rel, predicted_rel_l2=predicted(ref, e1, t, pc),
                             max_abs=mx, device=args.device))

    rows.sort(key=lambda r: (DATASETS.index(r["data"]), r["dtype"], r["world_size"]))
    _print_table(rows, f"quickreduce accuracy: device={args.device}, {args.numel} elements per rank, "
                       f"seed {args.seed}")
    if args.markdown:
        _print_markdown(rows, args.codecs)
    if args.csv:
        _write_csv(args.csv, rows, FIELDS)
    return 0


def _write_csv(path, rows, fields) -> None:
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=fields)
        wr.writeheader()
        wr.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
