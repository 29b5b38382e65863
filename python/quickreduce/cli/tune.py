"""`quickreduce tune`: time the candidates that `algo="auto"` / `codec="auto[:bound]"` choose
from (NCCL, quickreduce one-shot and two-shot, two-shot with each codec) on this machine, and
write the table they imply to the user cache, where `quickreduce.tuning.load_table` finds it.

    quickreduce tune                      # all local GPUs, bf16 and fp16, 8K..1G
    quickreduce tune --out python/quickreduce/tuned/h200-w2.json --csv tune.csv
    quickreduce tune --from-csv tune.csv --out table.json   # rebuild a table, no GPU needed
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..tuning import cache_path, save_table, table_from_measurements
from .bench import DEFAULT_SIZES, DEFAULT_TIMEOUT_S, parse_iters, run, usable_gpus
from .report import (QR_CODECS, QR_ROW_CODECS, complete_rows, human_size, parse_size, parse_sizes,
                     read_csv, write_csv)

# A lossless row this far from the float64 sum is a bug, not a candidate.
LOSSLESS_ERROR_LIMIT = 1e-2


def candidates(codecs: list[str]) -> dict[str, tuple[str, str | None]]:
    """Benchmark method -> (algo, codec); codec None means passthrough."""
    table: dict[str, tuple[str, str | None]] = {
        "nccl": ("nccl", None), "qr_one_shot": ("one_shot", None), "qr_two_shot": ("two_shot", None),
        "qr_lossless": ("two_shot", "lossless")}
    for codec in codecs:
        if codec != "lossless":  # an exact candidate, in the table above
            table[f"qr_{codec}"] = ("two_shot", codec)
    return table


def measurements_from_rows(rows: list[dict[str, Any]], methods: dict[str, tuple[str, str | None]]
                           ) -> tuple[list[dict[str, Any]], list[str]]:
    """Benchmark rows -> `table_from_measurements` input, dropping rows that are not correct.
    Only all-reduce rows count (a bench CSV may hold other collectives' rows, also named 'nccl')."""
    measurements, warnings = [], []
    for row in rows:
        if (row.get("collective") or "all_reduce") != "all_reduce":
            continue
        if row["method"] not in methods or not row.get("time_us"):
            continue
        algo, codec = methods[row["method"]]
        where = f"{row['method']} at {human_size(row['size'])} {row['dtype']}"
        if row.get("identical") is False:
            warnings.append(f"{where}: ranks disagree bitwise; not a candidate")
            continue
        err = row.get("rel_err")
        if codec in (None, "lossless") and (err is None or err > LOSSLESS_ERROR_LIMIT):
            warnings.append(f"{where}: rel_err {err} is too large for a lossless method; skipped")
            continue
        measurements.append({"dtype": row["dtype"], "size": row["size"], "algo": algo,
                             "codec": codec or row["dtype"], "time_us": row["time_us"],
                             "rel_err": err})
    return measurements, warnings


def approx_size(nbytes: int | None) -> str:
    if nbytes is None:
        return "inf"
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return str(nbytes)


def describe(data: dict[str, Any]) -> list[list[str]]:
    """Printable rows: dtype, size range, lossless choice, then one column per codec bound."""
    bounds = [c for c in data["codec_error_order"] if c in QR_CODECS]
    lines = [["dtype", "sizes", "lossless", *[f"<= {b}" for b in bounds]]]
    for dtype, entries in data["dtypes"].items():
        low = 0
        for entry in entries:
            high = entry["max_bytes"]
            exact = entry["lossless"]
            cells = [dtype, f"{approx_size(low)}..{approx_size(high)}", "/".join(exact) if isinstance(exact, list) else exact]
            for bound in bounds:
                choice = entry["lossy"].get(bound)
                cells.append("/".join(choice) if choice else "(lossless)")
            lines.append(cells)
            low = (high or 0) + 1
    return lines


def print_description(data: dict[str, Any]) -> None:
    lines = describe(data)
    try:
        from rich.table import Table

        from .report import make_console
    except ImportError:
        for line in lines:
            print("  ".join(cell.ljust(16) for cell in line))
        return
    table = Table(title=f"quickreduce auto table: {data['gpu']} x{data['world_size']}")
    for header in lines[0]:
        table.add_column(header)
    for line in lines[1:]:
        table.add_row(*line)
    make_console().print(table)


def result_from_csv(path: str) -> dict[str, Any] | None:
    """A CSV's rows in the shape `run` returns: one device and world size, or an error message."""
    rows = read_csv(path)
    devices = {r.get("device") for r in rows}
    world_sizes = {r.get("world_size") for r in rows}
    if not rows or len(devices) != 1 or len(world_sizes) != 1 or None in world_sizes:
        print(f"quickreduce tune: {path} needs rows of one device and one world size "
              f"(found {len(rows)} rows, devices {sorted(map(str, devices))}, "
              f"world sizes {sorted(map(str, world_sizes))})", file=sys.stderr)
        return None
    return {"rows": rows, "device": devices.pop(), "world_size": world_sizes.pop(), "notes": []}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quickreduce tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=int, default=None, help="processes/GPUs (default: all local)")
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="as for bench (default 8K:1G)")
    p.add_argument("--dtypes", default="bf16,fp16", help="comma list (default bf16,fp16)")
    p.add_argument("--codecs", default=",".join(QR_CODECS), help="codecs to consider")
    p.add_argument("--iters", default="50,20,5", help="calls per CUDA graph, as for bench")
    p.add_argument("--pool-budget", default="6G", help="as for bench")
    p.add_argument("--out", default=None, help="also write the table here")
    p.add_argument("--no-cache", action="store_true", help="do not write the user cache")
    p.add_argument("--csv", default=None, help="also write the measurements as a bench CSV")
    p.add_argument("--from-csv", default=None, metavar="CSV",
                   help="build the table from a CSV an earlier tune or bench wrote (no GPU run)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .harness import SweepConfig

    try:
        codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
        unknown = [c for c in codecs if c not in QR_ROW_CODECS]  # lossless: always a candidate
        dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
        if unknown or not set(dtypes) <= {"bf16", "fp16"}:
            raise ValueError(f"unknown codecs {unknown} or dtypes {dtypes}")
        methods = candidates(codecs)
        config = SweepConfig(methods=list(methods), sizes=parse_sizes(args.sizes), dtypes=dtypes,
                             iters=parse_iters(args.iters),
                             pool_budget_bytes=parse_size(args.pool_budget))
    except ValueError as exc:
        print(f"quickreduce tune: {exc}", file=sys.stderr)
        return 2
    sizes_text = args.sizes
    if args.from_csv:
        result = result_from_csv(args.from_csv)
        if result is None:
            return 2
        measured = [r["size"] for r in result["rows"]]
        sizes_text = f"{human_size(min(measured))}:{human_size(max(measured))} (from {args.from_csv})"
    else:
        gpus = usable_gpus(args.gpus, "tune")
        if not gpus:
            return 2
        try:
            result = run(config, gpus, args.timeout)
        except RuntimeError as exc:  # launch.LaunchError: a rank failed or the run timed out
            print(f"quickreduce tune: {exc}", file=sys.stderr)
            return 1
        if result is None:  # a rank other than 0 under torchrun
            return 0
    rows = complete_rows(result["rows"], result["world_size"])
    if args.csv:
        print(f"wrote {write_csv(rows, args.csv)}", file=sys.stderr)
    measurements, warnings = measurements_from_rows(rows, methods)
    for line in result["notes"] + warnings:
        print(f"note: {line}", file=sys.stderr)
    if not any(m["algo"] != "nccl" for m in measurements):
        print("quickreduce tune: no quickreduce candidate was measured; nothing written",
              file=sys.stderr)
        return 1
    note = (f"measured by quickreduce tune on {time.strftime('%Y-%m-%d')}, "
            f"{result['device']} x{result['world_size']}, sizes {sizes_text}")
    data = table_from_measurements(measurements, result["device"], result["world_size"], note=note)
    print_description(data)
    targets = [] if args.no_cache else [cache_path(result["device"], result["world_size"])]
    targets += [Path(args.out)] if args.out else []
    for target in targets:
        print(f"wrote {save_table(data, target)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
