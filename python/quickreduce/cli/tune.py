"""`quickreduce tune`: time the candidates that `algo="auto"` / `codec="auto[:bound]"` choose
from on this machine, and write the table they imply to the user cache, where
`quickreduce.tuning.load_table` finds it.

    quickreduce tune                      # all local GPUs, bf16 and fp16, 8K..1G
    quickreduce tune --collectives reduce_scatter,all_gather,all_to_all   # those too, also in fp32
    quickreduce tune --out python/quickreduce/tuned/h200-w2.json --csv tune.csv
    quickreduce tune --from-csv tune.csv --out table.json   # rebuild a table, no GPU needed
    quickreduce tune --from-csv all-reduce-bf16.csv,family-bf16.csv,family-fp32.csv --out table.json

The all-reduce's candidates: NCCL as `auto` runs it for an out-of-place call (a copy, then NCCL in place:
the bench row `nccl_copy`; NCCL in place is timed beside it for the CSV's speedup column only),
quickreduce one-shot and two-shot, the two-shot with the lossless packing and with each codec. --collectives adds each segment collective's (reduce-scatter,
all-gather, all-to-all), for the table's per-collective section that their `codec="auto:<codec>"`
reads: quickreduce's passthrough and each codec, the rotated ones included (no NCCL: the collectives
have no NCCL fallback; no qr_lossless: it runs as the passthrough there). Both are timed by bench's
sweep (harness.run_sweep), and `--from-csv` reads the same rows from bench or tune CSVs: every
collective in them, so an all-reduce CSV and the family CSVs of one run make one table.
tuning.table_from_measurements and tuning.collective_entries state how the choices are made.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..tuning import SEGMENT_COLLECTIVES, cache_path, save_table, table_from_measurements
from .bench import DEFAULT_SIZES, DEFAULT_TIMEOUT_S, parse_collectives, parse_iters, run, usable_gpus
from .launch import add_multicast_option, apply_multicast_option
from .report import (QR_CODECS, QR_ROTATED_CODECS, QR_ROW_CODECS, complete_rows, human_size,
                     parse_size, parse_sizes, read_csv, write_csv)

# A lossless row this far from the float64 sum is a bug, not a candidate.
LOSSLESS_ERROR_LIMIT = 1e-2
ALL_REDUCE_DTYPES = ("bf16", "fp16")  # the fp32 all-reduce is a reduce-scatter + all-gather: their entries
SEGMENT_DTYPES = ("bf16", "fp16", "fp32")


def candidates(codecs: list[str]) -> dict[str, tuple[str, str | None]]:
    """All-reduce benchmark method -> (algo, codec); codec None means passthrough. NCCL is timed as
    `auto` runs it for an out-of-place call, after a copy (`nccl_copy`): timed in place it won 24-95 MB
    on 4x H200, where `auto` out of place then measured 5-6% slower than our two-shot
    (2026-11-26). In-place calls (the torch.distributed backend) skip that copy."""
    table: dict[str, tuple[str, str | None]] = {
        "nccl_copy": ("nccl", None), "qr_one_shot": ("one_shot", None), "qr_two_shot": ("two_shot", None),
        "qr_lossless": ("two_shot", "lossless"), "qr_rs_ag": ("rs_ag", None)}
    for codec in codecs:
        if codec != "lossless":  # an exact candidate, in the table above
            table[f"qr_{codec}"] = ("two_shot", codec)
    return table


def collective_candidates(codecs: list[str]) -> dict[str, tuple[str, str | None]]:
    """A segment collective's benchmark method -> ("exchange", codec); codec None is the passthrough,
    its only exact candidate (`lossless` runs as the passthrough outside the all-reduce, and the
    collectives have no NCCL fallback, so NCCL is no candidate)."""
    table: dict[str, tuple[str, str | None]] = {"qr_passthrough": ("exchange", None)}
    for codec in codecs:
        if codec != "lossless":
            table[f"qr_{codec}"] = ("exchange", codec)
    return table


def call_input_bytes(collective: str, size: int, world_size: int) -> int:
    """The bytes of one rank's input tensor, which `choose_collective` is given, at a row's size
    (nccl-tests' whole buffer: the input, but the all-gather's output)."""
    return size // world_size if collective == "all_gather" else size


def measurements_from_rows(rows: list[dict[str, Any]], methods: dict[str, tuple[str, str | None]],
                           collective: str = "all_reduce") -> tuple[list[dict[str, Any]], list[str]]:
    """`collective`'s benchmark rows -> `table_from_measurements` input, dropping rows that are not
    correct. Other collectives' rows (also named 'nccl', 'qr_int4', ...) and the epilogue's are
    skipped. A segment collective's size becomes its call's input bytes (`call_input_bytes`)."""
    measurements, warnings = [], []
    for row in rows:
        if (row.get("collective") or "all_reduce") != collective:
            continue
        if row["method"] not in methods or not row.get("time_us"):
            continue
        algo, codec = methods[row["method"]]
        where = f"{row['method']} at {human_size(row['size'])} {row['dtype']}"
        if collective != "all_reduce":
            where = f"{collective}/{where}"
        if row.get("identical") is False:
            warnings.append(f"{where}: ranks disagree bitwise; not a candidate")
            continue
        err = row.get("rel_err")
        if codec in (None, "lossless") and (err is None or err > LOSSLESS_ERROR_LIMIT):
            warnings.append(f"{where}: rel_err {err} is too large for a lossless method; skipped")
            continue
        size = row["size"] if collective == "all_reduce" else call_input_bytes(collective, row["size"],
                                                                                 row["world_size"])
        measurements.append({"collective": collective, "dtype": row["dtype"], "size": size,
                             "algo": algo, "codec": codec or row["dtype"], "time_us": row["time_us"],
                             "rel_err": err})
    return measurements, warnings


def all_measurements(rows: list[dict[str, Any]], codecs: dict[str, list[str]]
                     ) -> tuple[list[dict[str, Any]], list[str]]:
    """Every collective's measurements in `rows`: the all-reduce's and each segment collective's
    (`codecs`: the codecs each considers, as `tune_codecs` gives them)."""
    measurements, warnings = measurements_from_rows(rows, candidates(codecs["all_reduce"]))
    reduce_methods = {r["method"] for r in rows if (r.get("collective") or "all_reduce") == "all_reduce"}
    if "nccl" in reduce_methods and "nccl_copy" not in reduce_methods:
        warnings.append("no nccl_copy rows (NCCL timed in place only, as older CSVs have it): "
                        "NCCL is no all-reduce candidate in this table")
    for collective in SEGMENT_COLLECTIVES:
        more, notes = measurements_from_rows(rows, collective_candidates(codecs[collective]), collective)
        measurements += more
        warnings += notes
    return measurements, warnings


def tune_codecs(spec: str | None) -> dict[str, list[str]]:
    """{collective: codecs to consider}: --codecs for all, else the all-reduce's five plain codecs
    (as tune always timed) and the segment collectives' seven (the rotated ones too)."""
    if spec is not None:
        chosen = [c.strip() for c in spec.split(",") if c.strip()]
        unknown = [c for c in chosen if c not in QR_ROW_CODECS + QR_ROTATED_CODECS]
        if unknown:
            raise ValueError(f"unknown codecs {unknown}")
        return {c: chosen for c in ("all_reduce",) + SEGMENT_COLLECTIVES}
    return {"all_reduce": list(QR_CODECS),
            **{c: list(QR_CODECS + QR_ROTATED_CODECS) for c in SEGMENT_COLLECTIVES}}


def tune_dtypes(spec: str | None, segments: list[str]) -> dict[str, list[str]]:
    """{collective: dtypes to time it in}: --dtypes (default bf16,fp16, and fp32 with segment
    collectives); fp32 goes to the segment collectives alone."""
    chosen = [d.strip() for d in (spec or ",".join(SEGMENT_DTYPES if segments else ALL_REDUCE_DTYPES)).split(",")
              if d.strip()]
    if not chosen or not set(chosen) <= set(SEGMENT_DTYPES):
        raise ValueError(f"unknown dtypes {chosen}; choose from {', '.join(SEGMENT_DTYPES)}")
    reduce_dtypes = [d for d in chosen if d in ALL_REDUCE_DTYPES]
    if not reduce_dtypes or (len(reduce_dtypes) < len(chosen) and not segments):
        raise ValueError("the all-reduce is timed in bf16 and/or fp16, fp32 only with --collectives "
                         "(the fp32 all-reduce runs as a reduce-scatter and an all-gather and uses "
                         "their entries)")
    return {"all_reduce": reduce_dtypes, **{c: chosen for c in segments}}


def sweep_configs(codecs: dict[str, list[str]], dtypes: dict[str, list[str]], args: argparse.Namespace):
    """One bench sweep per dtype list: the collectives timed in the same dtypes share one."""
    from .harness import SweepConfig

    groups: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for collective, its_dtypes in dtypes.items():
        methods = candidates if collective == "all_reduce" else collective_candidates
        # NCCL in place too, for the CSV's speedup column (no candidate: `auto` copies first)
        reference = ["nccl"] if collective == "all_reduce" else []
        groups.setdefault(tuple(its_dtypes), {})[collective] = reference + list(methods(codecs[collective]))
    return [SweepConfig(methods=plan["all_reduce"] if list(plan) == ["all_reduce"] else plan,
                        sizes=parse_sizes(args.sizes), dtypes=list(group_dtypes),
                        iters=parse_iters(args.iters), pool_budget_bytes=parse_size(args.pool_budget))
            for group_dtypes, plan in groups.items()]


def measure(configs: list, gpus: int, timeout_s: float) -> dict[str, Any] | None:
    """Run the sweeps one after another within `timeout_s` in all; their rows and notes in one
    result (None on torchrun ranks other than 0, which still run every sweep)."""
    deadline = time.monotonic() + timeout_s
    results = [run(config, gpus, max(1.0, deadline - time.monotonic())) for config in configs]
    if any(r is None for r in results):
        return None
    merged = dict(results[0], rows=[], notes=[])
    for result in results:
        merged["rows"] += result["rows"]
        merged["notes"] += result["notes"]
    return merged


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
        for (low, high), entry in zip(_size_ranges(entries), entries):
            exact = entry["lossless"]
            cells = [dtype, f"{approx_size(low)}..{approx_size(high)}", "/".join(exact) if isinstance(exact, list) else exact]
            for bound in bounds:
                choice = entry["lossy"].get(bound)
                cells.append("/".join(choice) if choice else "(lossless)")
            lines.append(cells)
    return lines


def describe_collectives(data: dict[str, Any]) -> list[list[str]]:
    """Printable rows of the per-collective section (none without one): collective, dtype, input
    size range, then the codec each measured bound runs ("passthrough" where it won)."""
    measured = {c for errors in data.get("collective_codec_errors", {}).values() for c in errors}
    bounds = [c for c in QR_CODECS + QR_ROTATED_CODECS if c in measured]
    if not data.get("collectives"):
        return []
    lines = [["collective", "dtype", "input sizes", "exact", *[f"<= {b}" for b in bounds]]]
    for collective, per_dtype in data["collectives"].items():
        for dtype, entries in per_dtype.items():
            for (low, high), entry in zip(_size_ranges(entries), entries):
                lines.append([collective, dtype, f"{approx_size(low)}..{approx_size(high)}", "passthrough",
                              *[entry["lossy"].get(b, "passthrough") for b in bounds]])
    return lines


def _size_ranges(entries: list[dict[str, Any]]) -> list[tuple[int, int | None]]:
    """(lowest, highest) bytes each breakpoint covers."""
    highs = [e["max_bytes"] for e in entries]
    return list(zip([0] + [h + 1 for h in highs[:-1]], highs))


def print_description(data: dict[str, Any]) -> None:
    title = f"quickreduce auto table: {data['gpu']} x{data['world_size']}"
    _print_lines(title, describe(data))
    if data.get("collectives"):
        _print_lines(f"{title}, segment collectives (auto:<codec>)", describe_collectives(data))


def _print_lines(title: str, lines: list[list[str]]) -> None:
    try:
        from rich.table import Table

        from .report import make_console
    except ImportError:
        print(title)
        for line in lines:
            print("  ".join(cell.ljust(16) for cell in line))
        return
    table = Table(title=title)
    for header in lines[0]:
        table.add_column(header)
    for line in lines[1:]:
        table.add_row(*line)
    make_console().print(table)


def result_from_csv(*paths: str) -> dict[str, Any] | None:
    """The CSVs' rows together in the shape `run` returns: one device and world size across them
    all, or None after an error message."""
    rows = [row for path in paths for row in read_csv(path)]
    devices = {r.get("device") for r in rows}
    world_sizes = {r.get("world_size") for r in rows}
    if not rows or len(devices) != 1 or len(world_sizes) != 1 or None in world_sizes:
        print(f"quickreduce tune: {', '.join(paths)} need rows of one device and one world size "
              f"(found {len(rows)} rows, devices {sorted(map(str, devices))}, "
              f"world sizes {sorted(map(str, world_sizes))})", file=sys.stderr)
        return None
    return {"rows": rows, "device": devices.pop(), "world_size": world_sizes.pop(), "notes": []}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quickreduce tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=int, default=None, help="processes/GPUs (default: all local)")
    p.add_argument("--collectives", action="append", default=None, metavar="NAME[,NAME]",
                   help="also time these segment collectives for their auto:<codec> entries: "
                        f"{', '.join(SEGMENT_COLLECTIVES)}; comma list or repeated (the all-reduce "
                        "is always timed)")
    p.add_argument("--sizes", default=DEFAULT_SIZES,
                   help="as for bench (default 8K:1G; a segment collective's size is bench's, the "
                        "all-gather's the output)")
    p.add_argument("--dtypes", default=None,
                   help="comma list (default bf16,fp16; with --collectives bf16,fp16,fp32, fp32 "
                        "for the segment collectives alone)")
    p.add_argument("--codecs", default=None,
                   help="codecs to consider (default: the all-reduce int8,fp8,int6,int4,fp4; the "
                        "segment collectives those and int6h,int4h)")
    p.add_argument("--iters", default="50,20,5", help="calls per CUDA graph, as for bench")
    p.add_argument("--pool-budget", default="6G", help="as for bench")
    p.add_argument("--out", default=None, help="also write the table here")
    p.add_argument("--no-cache", action="store_true", help="do not write the user cache")
    p.add_argument("--csv", default=None, help="also write the measurements as a bench CSV")
    p.add_argument("--from-csv", action="append", default=None, metavar="CSV[,CSV]",
                   help="build the table from CSVs that earlier tune or bench runs wrote, every "
                        "collective in them; comma list or repeated (no GPU run)")
    p.add_argument("--driver", default=None, metavar="VERSION",
                   help="with --from-csv: the NVIDIA driver the CSVs were measured under, recorded in the "
                        "table (default: this machine's)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help="seconds for all the sweeps together")
    add_multicast_option(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        segments = [c for c in parse_collectives(args.collectives) if c != "all_reduce"]
        codecs = tune_codecs(args.codecs)
        configs = sweep_configs(codecs, tune_dtypes(args.dtypes, segments), args)
    except ValueError as exc:
        print(f"quickreduce tune: {exc}", file=sys.stderr)
        return 2
    sizes_text = args.sizes
    if args.driver and not args.from_csv:
        print("quickreduce tune: --driver names the driver of --from-csv's measurements; a run records "
              "this machine's", file=sys.stderr)
        return 2
    if args.from_csv:
        paths = [p.strip() for value in args.from_csv for p in value.split(",") if p.strip()]
        missing = [p for p in paths if not Path(p).is_file()]
        if missing:
            print(f"quickreduce tune: --from-csv {', '.join(missing)}: no such file", file=sys.stderr)
            return 2
        result = result_from_csv(*paths)
        if result is None:
            return 2
        measured = [r["size"] for r in result["rows"]]
        sizes_text = f"{human_size(min(measured))}:{human_size(max(measured))} (from {', '.join(paths)})"
    else:
        gpus = usable_gpus(args.gpus, "tune")
        if not gpus:
            return 2
        apply_multicast_option(args)
        try:
            result = measure(configs, gpus, args.timeout)
        except RuntimeError as exc:  # launch.LaunchError: a rank failed or the run timed out
            print(f"quickreduce tune: {exc}", file=sys.stderr)
            return 1
        if result is None:  # a rank other than 0 under torchrun
            return 0
    rows = complete_rows(result["rows"], result["world_size"])
    if args.csv:
        print(f"wrote {write_csv(rows, args.csv)}", file=sys.stderr)
    measurements, warnings = all_measurements(rows, codecs)
    for line in result["notes"] + warnings:
        print(f"note: {line}", file=sys.stderr)
    if not any(m["collective"] == "all_reduce" and m["algo"] != "nccl" for m in measurements):
        print("quickreduce tune: no quickreduce all-reduce candidate was measured; nothing written",
              file=sys.stderr)
        return 1
    note = (f"measured by quickreduce tune on {time.strftime('%Y-%m-%d')}, "
            f"{result['device']} x{result['world_size']}, sizes {sizes_text}")
    driver = args.driver if args.from_csv else None
    data = table_from_measurements(measurements, result["device"], result["world_size"], driver=driver, note=note)
    print_description(data)
    targets = [] if args.no_cache else [cache_path(result["device"], result["world_size"], data["driver"])]
    targets += [Path(args.out)] if args.out else []
    for target in targets:
        print(f"wrote {save_table(data, target)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
