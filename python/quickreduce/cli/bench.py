"""`quickreduce bench`: time quickreduce against NCCL, torch symmetric memory and FlashInfer's
peers on every size, check each result, and print/write/plot the comparison.

    quickreduce bench                              # all local GPUs, bf16, 8K..1G, all methods
    quickreduce bench --gpus 2 --sizes 8K:64M --methods 'nccl,qr_*' --plot bench.png
    quickreduce bench --from-csv bench/results/h200-x2.csv --plot h200-x2.png   # no GPU needed

Runs one process per GPU (or in place under torchrun). Methods that cannot run here are listed
with the reason at the end instead of failing the run. See harness.py for how times are taken.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .report import (METHOD_LOSSY, QR_ROW_CODECS, complete_rows, device_tag, parse_size,
                     parse_sizes, plot, print_results, read_csv, write_csv)

DEFAULT_SIZES = "8K:1G"
DEFAULT_TIMEOUT_S = 540  # under the device machines' 10-minute limit per command
RESULTS_DIR = Path("bench") / "results"


def build_parser(prog: str = "quickreduce bench") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, default=None, help="processes/GPUs (default: all local)")
    p.add_argument("--sizes", default=DEFAULT_SIZES,
                   help="START:END[:FACTOR] and/or a comma list, K/M/G suffixes (default 8K:1G)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--methods", default="all",
                   help="comma list of names or patterns ('nccl,qr_*'); --list-methods shows them")
    p.add_argument("--codecs", default=None,
                   help="only these quickreduce codecs for the qr_<codec> rows (e.g. int4,fp8)")
    p.add_argument("--iters", default="50,20,5",
                   help="calls per CUDA graph for <1M,<=64M,larger sizes, or one number for all")
    p.add_argument("--warmup", type=int, default=2, help="untimed graph replays")
    p.add_argument("--replays", type=int, default=7, help="timed graph replays (median)")
    p.add_argument("--max-size", default=None,
                   help="max_size of the quickreduce Communicator (default: the largest size)")
    p.add_argument("--peer-max-size", default="64M",
                   help="workspace of the vLLM/TRT-LLM peers; larger sizes skip them (default 64M)")
    p.add_argument("--pool-budget", default="6G",
                   help="memory cap for one method's rotating buffers (default 6G)")
    p.add_argument("--csv", default=None,
                   help="CSV path (default bench/results/<gpu>-x<n>.csv)")
    p.add_argument("--plot", default=None, help="also write a PNG plot here")
    p.add_argument("--from-csv", default=None,
                   help="print/plot an existing CSV instead of running (no GPU needed)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"kill the run after this many seconds (default {DEFAULT_TIMEOUT_S})")
    p.add_argument("--no-align-start", action="store_true",
                   help="time each replay from the host barrier alone, without first lining the GPUs up")
    p.add_argument("--list-methods", action="store_true", help="list the known methods and exit")
    return p


def parse_iters(text: str) -> tuple[int, int, int]:
    values = [int(v) for v in text.split(",")]
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or min(values) < 1:
        raise ValueError(f"bad --iters {text!r}: one number or three (small,medium,large)")
    return values[0], values[1], values[2]


def select_methods(spec: str, codecs: str | None = None) -> list[str]:
    """Known method names matching the comma list of names/patterns, in display order."""
    known = list(METHOD_LOSSY)
    patterns = [p.strip() for p in spec.split(",") if p.strip()]
    chosen = set()
    for pattern in patterns:
        matches = known if pattern == "all" else fnmatch.filter(known, pattern)
        if not matches:
            raise ValueError(f"no method matches {pattern!r}; known: {', '.join(known)}")
        chosen.update(matches)
    if codecs:
        wanted = {c.strip() for c in codecs.split(",") if c.strip()}
        chosen = {m for m in chosen if not _codec_of(m) or _codec_of(m) in wanted}
    return [m for m in known if m in chosen]


def _codec_of(method: str) -> str | None:
    """The quickreduce codec a method row is about (qr_int4 and qr_auto_int4 -> int4)."""
    for codec in QR_ROW_CODECS:
        if method.startswith("qr_") and method.endswith(codec):
            return codec
    return None


def default_gpu_count() -> int:
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    import torch

    return torch.cuda.device_count()


def usable_gpus(requested: int | None, tool: str) -> int:
    """GPUs to run on (requested or all local); 0 after printing why when fewer than 2."""
    gpus = requested or default_gpu_count()
    if gpus < 2:
        print(f"quickreduce {tool}: needs at least 2 GPUs, found {gpus}", file=sys.stderr)
        return 0
    return gpus


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list_methods:
        for name, lossy in METHOD_LOSSY.items():
            print(f"{name:22} {'lossy' if lossy else 'lossless'}")
        return 0
    if args.from_csv:
        return show_csv(args.from_csv, args.plot)
    try:
        config = sweep_config(args)
    except ValueError as exc:
        print(f"quickreduce bench: {exc}", file=sys.stderr)
        return 2
    gpus = usable_gpus(args.gpus, "bench")
    if not gpus:
        return 2
    partial = Path(args.csv + ".partial") if args.csv else RESULTS_DIR / "bench.partial.csv"
    config = replace(config, partial_csv=str(partial))
    if os.environ.get("RANK", "0") == "0":
        print(f"quickreduce bench: {gpus} GPUs, {args.dtype}, {len(config.sizes)} sizes, "
              f"methods: {', '.join(config.methods)}", file=sys.stderr, flush=True)
    try:
        result = run(config, gpus, args.timeout)
    except RuntimeError as exc:  # launch.LaunchError: a rank failed or the run timed out
        print(f"quickreduce bench: {exc}", file=sys.stderr)
        if partial.exists():
            print(f"quickreduce bench: results up to the failure are in {partial}", file=sys.stderr)
        return 1
    if result is None:  # a rank other than 0 under torchrun
        return 0
    rows = complete_rows(result["rows"], result["world_size"])
    print_results(rows, result["notes"])
    tag = device_tag(result["device"], result["world_size"])
    csv_path = write_csv(rows, args.csv or RESULTS_DIR / f"{tag}.csv")
    print(f"wrote {csv_path}", file=sys.stderr)
    if partial.exists():
        partial.unlink()
    if args.plot and rows:
        print(f"wrote {plot(rows, args.plot)}", file=sys.stderr)
    return 0


def sweep_config(args: argparse.Namespace):
    from .harness import SweepConfig

    return SweepConfig(
        methods=select_methods(args.methods, args.codecs),
        sizes=parse_sizes(args.sizes),
        dtypes=[args.dtype],
        iters=parse_iters(args.iters),
        warmup=args.warmup,
        replays=args.replays,
        qr_max_bytes=parse_size(args.max_size) if args.max_size else None,
        peer_max_bytes=parse_size(args.peer_max_size),
        pool_budget_bytes=parse_size(args.pool_budget),
        align_start=not args.no_align_start,
    )


def run(config, gpus: int, timeout_s: float) -> dict[str, Any] | None:
    """Run the sweep on `gpus` ranks; rank 0's result dict (None on other torchrun ranks)."""
    from . import harness, launch

    return launch.spawn(harness.run_sweep, gpus, config, timeout_s=timeout_s)


def show_csv(path: str, plot_path: str | None) -> int:
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
