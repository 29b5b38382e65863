"""`quickreduce bench`: time quickreduce against NCCL, torch symmetric memory and FlashInfer's
peers on every size, check each result, and print/write/plot the comparison.

    quickreduce bench                              # all local GPUs, bf16, 8K..1G, all methods
    quickreduce bench --gpus 2 --sizes 8K:64M --methods 'nccl,qr_*' --plot bench.png
    quickreduce bench --collective reduce_scatter,all_gather,all_to_all --dtype fp32
    quickreduce bench --shared-gpu --collective all_reduce,reduce_scatter,all_gather,all_to_all
    quickreduce bench --epilogue add_rmsnorm --hidden 8192 --sizes 16K:64M   # + add + RMSNorm
    quickreduce bench --from-csv results/h200-x2/bench.csv --plot h200-x2.png   # no GPU needed

Runs one process per GPU (or in place under torchrun). Methods that cannot run here are listed
with the reason at the end instead of failing the run. See harness.py for how times are taken.

--collective picks what is timed (default all_reduce: the table, CSV and plot are what they were).
Sizes and bus bandwidths are nccl-tests': size is the whole buffer (reduce-scatter: the input,
all-gather: the output, all-to-all: the input); busbw = algbw * 2(n-1)/n for all-reduce and
algbw * (n-1)/n for the others. --shared-gpu runs every rank on GPU 0 over gloo (one GPU is
enough) to check results end to end: its timings mean nothing.

--epilogue add_rmsnorm adds a row group beside the collectives' (CSV `collective` column
all_reduce_add_rmsnorm, its own tables and plot row): the all-reduce of a [tokens, --hidden] tensor
followed by the residual add and RMSNorm, each row timing the whole sequence as one call (fused
qr_fused_<codec> and FlashInfer's trtllm_fused; unfused qr_unfused_<codec> and nccl_unfused, the
vs_nccl baseline of the group). Sizes are the all-reduce's; those that are not whole rows are
skipped. See epilogue.py.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .launch import add_multicast_option, apply_multicast_option
from .plots import plot
from .report import (COLLECTIVE_METHODS, COLLECTIVES, EPILOGUES, QR_ROTATED_CODECS, QR_ROW_CODECS,
                     complete_rows, device_tag, parse_size, parse_sizes, print_results, read_csv, write_csv)

DEFAULT_SIZES = "8K:1G"
DEFAULT_TIMEOUT_S = 540  # under the device machines' 10-minute limit per command
RESULTS_DIR = Path("results")  # results/<gpu>-x<n>/, as the repository publishes them
DEFAULT_ITERS, DEFAULT_WARMUP, DEFAULT_REPLAYS = "50,20,5", 2, 7
# --shared-gpu checks results, its timings mean nothing: fewer sizes and calls than a real run.
SHARED_SIZES, SHARED_ITERS, SHARED_WARMUP, SHARED_REPLAYS = "8K:32M:4", "3,2,1", 1, 2
SHARED_GPU_BANNER = "shared GPU: timings are meaningless, results are checked"


def build_parser(prog: str = "quickreduce bench") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, default=None,
                   help="processes/GPUs (default: all local; 2 ranks with --shared-gpu)")
    p.add_argument("--collective", action="append", default=None, metavar="NAME[,NAME]",
                   help=f"what to time: {', '.join(COLLECTIVES)}; comma list or repeated "
                        "(default all_reduce)")
    p.add_argument("--epilogue", action="append", default=None, choices=list(EPILOGUES),
                   help="also time the all-reduce with what follows it in a layer, fused and "
                        "unfused (add_rmsnorm: residual add + RMSNorm); rows of their own")
    p.add_argument("--hidden", type=int, default=4096,
                   help="row length of the epilogue's [tokens, hidden] tensor (default 4096)")
    p.add_argument("--sizes", default=None,
                   help="START:END[:FACTOR] and/or a comma list, K/M/G suffixes (default 8K:1G; "
                        f"{SHARED_SIZES} with --shared-gpu); nccl-tests' size: the whole buffer")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"],
                   help="tensor dtype (default bf16; fp32 for the segment collectives)")
    p.add_argument("--methods", default="all",
                   help="comma list of names or patterns ('nccl,qr_*'); --list-methods shows them")
    p.add_argument("--codecs", default=None,
                   help="only these quickreduce codecs for the qr_<codec> rows (e.g. int4,fp8)")
    p.add_argument("--iters", default=None,
                   help="calls per CUDA graph for <1M,<=64M,larger sizes, or one number for all "
                        f"(default {DEFAULT_ITERS}; {SHARED_ITERS} with --shared-gpu)")
    p.add_argument("--warmup", type=int, default=None,
                   help=f"untimed graph replays (default {DEFAULT_WARMUP})")
    p.add_argument("--replays", type=int, default=None,
                   help=f"timed graph replays (median; default {DEFAULT_REPLAYS})")
    p.add_argument("--max-size", default=None,
                   help="max_size of the quickreduce Communicator (default: the largest size)")
    p.add_argument("--peer-max-size", default="64M",
                   help="workspace of the vLLM/TRT-LLM peers; larger sizes skip them (default 64M)")
    p.add_argument("--pool-budget", default="6G",
                   help="memory cap for one method's rotating buffers (default 6G)")
    p.add_argument("--csv", default=None,
                   help="CSV path (default results/<gpu>-x<n>/bench.csv)")
    p.add_argument("--plot", default=None, help="also write a PNG plot here")
    p.add_argument("--from-csv", default=None,
                   help="print/plot an existing CSV instead of running (no GPU needed)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"kill the run after this many seconds (default {DEFAULT_TIMEOUT_S})")
    p.add_argument("--no-align-start", action="store_true",
                   help="time each replay from the host barrier alone, without first lining the GPUs up")
    p.add_argument("--gap", action="store_true",
                   help="a one-element kernel between every two calls, as a model has compute between its "
                        "collectives (its time alone is subtracted); NCCL back to back is 4-7 us slower a "
                        "call below 1 MB than with a kernel between")
    p.add_argument("--shared-gpu", action="store_true",
                   help="run every rank on GPU 0 over gloo (QUICKREDUCE_ALLOW_SHARED_GPU=1): checks "
                        "results on one GPU; NCCL, symm_mem and FlashInfer rows are not run and the "
                        "timings are meaningless")
    p.add_argument("--list-methods", action="store_true",
                   help="list the known methods (of the --collective ones) and exit")
    add_multicast_option(p)
    return p


def parse_collectives(values: list[str] | None) -> list[str]:
    """--collective values (each a comma list; repeats allowed) -> collectives in display order."""
    names = [n.strip() for v in (values or ["all_reduce"]) for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in COLLECTIVES]
    if unknown or not names:
        raise ValueError(f"unknown collective {', '.join(unknown) or '(none)'}; "
                         f"choose from {', '.join(COLLECTIVES)}")
    return [c for c in COLLECTIVES if c in names]


def row_groups(collectives: list[str], epilogues: list[str] | None) -> list[str]:
    """The row groups a run times: the collectives, then each --epilogue's group."""
    return collectives + [EPILOGUES[e] for e in dict.fromkeys(epilogues or [])]


def parse_iters(text: str) -> tuple[int, int, int]:
    values = [int(v) for v in text.split(",")]
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or min(values) < 1:
        raise ValueError(f"bad --iters {text!r}: one number or three (small,medium,large)")
    return values[0], values[1], values[2]


def select_methods(spec: str, codecs: str | None = None, collective: str = "all_reduce",
                   strict: bool = True) -> list[str]:
    """Known method names of `collective` matching the comma list of names/patterns, in display
    order. `strict`: a pattern that matches none of them is an error."""
    known = list(COLLECTIVE_METHODS[collective])
    patterns = [p.strip() for p in spec.split(",") if p.strip()]
    chosen = set()
    for pattern in patterns:
        matches = known if pattern == "all" else fnmatch.filter(known, pattern)
        if not matches and strict:
            raise ValueError(f"no method matches {pattern!r}; known: {', '.join(known)}")
        chosen.update(matches)
    if codecs:
        wanted = {c.strip() for c in codecs.split(",") if c.strip()}
        chosen = {m for m in chosen if not _codec_of(m) or _codec_of(m) in wanted}
    return [m for m in known if m in chosen]


def select_plan(spec: str, codecs: str | None, collectives: list[str]) -> dict[str, list[str]]:
    """{collective: its methods matching `spec`}; a pattern must match a method of at least one
    of the collectives (so 'symm_mem_two_shot' may go with --collective all_reduce,all_gather)."""
    plan = {c: select_methods(spec, codecs, c, strict=False) for c in collectives}
    for pattern in (p.strip() for p in spec.split(",") if p.strip()):
        if pattern != "all" and not any(fnmatch.filter(COLLECTIVE_METHODS[c], pattern)
                                        for c in collectives):
            known = sorted({m for c in collectives for m in COLLECTIVE_METHODS[c]})
            raise ValueError(f"no method matches {pattern!r}; known: {', '.join(known)}")
    return plan


def _codec_of(method: str) -> str | None:
    """The quickreduce codec a method row is about (qr_int4, qr_auto_int4, qr_fused_int4 -> int4;
    None for the passthrough rows, which --codecs keeps)."""
    codec = method.split("_")[-1]
    return codec if method.startswith("qr_") and codec in QR_ROW_CODECS + QR_ROTATED_CODECS else None


def default_gpu_count() -> int:
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    import torch

    return torch.cuda.device_count()


def usable_gpus(requested: int | None, tool: str, shared_gpu: bool = False) -> int:
    """GPUs to run on (requested or all local); 0 after printing why when fewer than 2.
    With `shared_gpu` it is the number of ranks (default 2), all on one GPU."""
    gpus = requested or (2 if shared_gpu and "WORLD_SIZE" not in os.environ else default_gpu_count())
    if gpus < 2:
        what = "ranks" if shared_gpu else "GPUs"
        print(f"quickreduce {tool}: needs at least 2 {what}, found {gpus}"
              + ("" if shared_gpu else " (--shared-gpu runs every rank on one GPU)"),
              file=sys.stderr)
        return 0
    return gpus


def list_methods(collectives: list[str]) -> None:
    """--list-methods: all-reduce's as they always printed; other collectives' under a header."""
    for collective in collectives:
        if collectives != ["all_reduce"]:
            print(f"# {collective}")
        for name, lossy in COLLECTIVE_METHODS[collective].items():
            print(f"{name:22} {'lossy' if lossy else 'lossless'}")


def default_csv_path(tag: str, collectives: list[str], shared_gpu: bool,
                     epilogues: list[str] | None = None, gap: bool = False) -> Path:
    """results/<gpu>-x<n>/bench.csv for all-reduce alone; other collectives and the epilogues add their
    names, a shared-GPU run '-shared' and a --gap run '-gap', so none overwrites the all-reduce results
    that `quickreduce tune --from-csv` reads."""
    name = "bench"
    parts = collectives + list(dict.fromkeys(epilogues or []))
    if parts != ["all_reduce"]:
        name += "-" + "-".join(parts)
    if shared_gpu:
        name += "-shared"
    if gap:
        name += "-gap"
    return RESULTS_DIR / tag / f"{name}.csv"


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv)[:1] == ["moe"]:  # `quickreduce bench moe`: cli/moe_bench.py
        from . import moe_bench
        return moe_bench.main((sys.argv[1:] if argv is None else argv)[1:])
    args = build_parser().parse_args(argv)
    try:
        collectives = parse_collectives(args.collective)
    except ValueError as exc:
        print(f"quickreduce bench: {exc}", file=sys.stderr)
        return 2
    if args.list_methods:
        list_methods(row_groups(collectives, args.epilogue))
        return 0
    if args.from_csv:
        return show_csv(args.from_csv, args.plot)
    try:
        config = sweep_config(args)
    except ValueError as exc:
        print(f"quickreduce bench: {exc}", file=sys.stderr)
        return 2
    gpus = usable_gpus(args.gpus, "bench", args.shared_gpu)
    if not gpus:
        return 2
    apply_multicast_option(args)
    partial = Path(args.csv + ".partial") if args.csv else RESULTS_DIR / "bench.partial.csv"
    config = replace(config, partial_csv=str(partial))
    if os.environ.get("RANK", "0") == "0":
        if args.shared_gpu:
            print(f"quickreduce bench: {SHARED_GPU_BANNER.upper()}", file=sys.stderr, flush=True)
        what = "ranks on one shared GPU" if args.shared_gpu else "GPUs"
        plan = config.plan()
        methods = "; ".join(f"{c}: {', '.join(m)}" for c, m in plan.items()) \
            if list(plan) != ["all_reduce"] else ", ".join(plan["all_reduce"])
        print(f"quickreduce bench: {gpus} {what}, {args.dtype}, {len(config.sizes)} sizes, "
              f"methods: {methods}", file=sys.stderr, flush=True)
    try:
        result = run(config, gpus, args.timeout, shared_gpu=args.shared_gpu)
    except RuntimeError as exc:  # launch.LaunchError: a rank failed or the run timed out
        print(f"quickreduce bench: {exc}", file=sys.stderr)
        if partial.exists():
            print(f"quickreduce bench: results up to the failure are in {partial}", file=sys.stderr)
        return 1
    if result is None:  # a rank other than 0 under torchrun
        return 0
    rows = complete_rows(result["rows"], result["world_size"])
    notes = list(result["notes"])
    if args.shared_gpu:
        notes.insert(0, SHARED_GPU_BANNER)
    if args.gap:
        notes.insert(0, "--gap: a one-element kernel between every two calls; its time alone is subtracted")
    print_results(rows, notes)
    tag = device_tag(result["device"], result["world_size"])
    csv_path = write_csv(rows, args.csv or default_csv_path(tag, collectives, args.shared_gpu,
                                                            args.epilogue, args.gap))
    print(f"wrote {csv_path}", file=sys.stderr)
    if partial.exists():
        partial.unlink()
    if args.plot and rows:
        note = SHARED_GPU_BANNER.upper() if args.shared_gpu else None
        print(f"wrote {plot(rows, args.plot, note=note)}", file=sys.stderr)
    if args.shared_gpu:
        print(f"quickreduce bench: {SHARED_GPU_BANNER.upper()}", file=sys.stderr, flush=True)
    return 0


def sweep_config(args: argparse.Namespace):
    from .harness import SweepConfig

    shared = getattr(args, "shared_gpu", False)
    collectives = parse_collectives(getattr(args, "collective", None))
    epilogues = getattr(args, "epilogue", None)
    hidden = getattr(args, "hidden", 4096)
    if epilogues and (hidden < 8 or hidden % 8):
        raise ValueError(f"--hidden must be a positive multiple of 8 (16-byte rows), got {hidden}")
    if epilogues and args.dtype not in ("bf16", "fp16"):
        raise ValueError(f"--epilogue takes --dtype bf16 or fp16, not {args.dtype}")
    groups = row_groups(collectives, epilogues)
    plan = select_plan(args.methods, args.codecs, groups)
    if not any(plan.values()):
        raise ValueError(f"--methods {args.methods!r} selects no method of {', '.join(groups)}")
    iters = args.iters or (SHARED_ITERS if shared else DEFAULT_ITERS)
    warmup = args.warmup if args.warmup is not None else (SHARED_WARMUP if shared else DEFAULT_WARMUP)
    replays = args.replays if args.replays is not None else (SHARED_REPLAYS if shared else DEFAULT_REPLAYS)
    if replays < 1 or warmup < 0:
        raise ValueError("--replays must be at least 1 and --warmup at least 0")
    return SweepConfig(
        # All-reduce alone keeps the list form (what `quickreduce tune` passes too).
        methods=plan["all_reduce"] if groups == ["all_reduce"] else plan,
        sizes=parse_sizes(args.sizes or (SHARED_SIZES if shared else DEFAULT_SIZES)),
        dtypes=[args.dtype],
        iters=parse_iters(iters),
        warmup=warmup,
        replays=replays,
        qr_max_bytes=parse_size(args.max_size) if args.max_size else None,
        peer_max_bytes=parse_size(args.peer_max_size),
        pool_budget_bytes=parse_size(args.pool_budget),
        align_start=not args.no_align_start,
        gap=getattr(args, "gap", False),
        shared_gpu=shared,
        hidden=hidden,
    )


def run(config, gpus: int, timeout_s: float, shared_gpu: bool = False) -> dict[str, Any] | None:
    """Run the sweep on `gpus` ranks; rank 0's result dict (None on other torchrun ranks).
    `shared_gpu`: every rank on GPU 0 over gloo (config.shared_gpu should say so too)."""
    from . import harness, launch

    if shared_gpu:
        config = replace(config, shared_gpu=True)
    return launch.spawn(harness.run_sweep, gpus, config, timeout_s=timeout_s, shared_gpu=shared_gpu)


def show_csv(path: str, plot_path: str | None) -> int:
    if not Path(path).is_file():
        print(f"quickreduce bench: --from-csv {path}: no such file", file=sys.stderr)
        return 2
    rows = read_csv(path)
    if not rows:
        print(f"quickreduce bench: no rows in {path}", file=sys.stderr)
        return 1
    world_sizes = {r.get("world_size") for r in rows if r.get("world_size")}
    if len(world_sizes) == 1 and any(r.get("algbw_GBps") is None for r in rows):
        rows = complete_rows(rows, world_sizes.pop())  # a CSV without bandwidth columns
    print_results(rows)
    if plot_path:
        print(f"wrote {plot(rows, plot_path)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
