"""Everything about benchmark results that needs no GPU: sizes, bandwidth math, the terminal
tables and CSV files (the plots are in plots.py). Rows are plain dicts with the CSV columns below.

Every row belongs to one collective (the `collective` column; rows without one, as in CSVs written
before it existed, are all-reduce rows), or to the all-reduce + add + RMSNorm epilogue (`EPILOGUE`:
sized, counted and bandwidth-rated as its all-reduce). Sizes, counts and bus bandwidths follow nccl-tests:
"size" is the whole buffer (all-reduce: the tensor; reduce-scatter: the input; all-gather: the
output; all-to-all: the input), "count" is nccl-tests' count (all-reduce: values in the tensor;
the others: values per rank's block), and busbw = algbw * `bus_factor`."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any, Iterable

from .. import codecs
from ..tuning import gpu_slug

# One row per (size, method); the first ten columns follow nccl-tests' naming.
# `collective` comes last so readers that know the older columns find them where they were.
CSV_COLUMNS = ["size", "count", "type", "method", "time_us", "algbw_GBps", "busbw_GBps",
               "vs_nccl", "rel_err", "identical", "lossy", "device", "world_size", "dtype",
               "collective"]

# The collectives `quickreduce bench --collective` knows, in display order, and their titles.
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
# `quickreduce bench --epilogue NAME`: an all-reduce and what follows it in a transformer layer, timed
# as one call (fused, or the unfused sequence). Its rows carry the group's name in the `collective`
# column, so readers of the plain all-reduce rows (tune, scripts/readme_table.py) never mix them in.
EPILOGUE = "all_reduce_add_rmsnorm"
EPILOGUES = {"add_rmsnorm": EPILOGUE}
# Every row group in display order: the collectives, then the epilogue.
ROW_GROUPS = COLLECTIVES + (EPILOGUE,)
# Groups whose size, count and bus bandwidth are the all-reduce's (the whole [tokens, hidden] tensor).
ALL_REDUCE_SHAPED = ("all_reduce", EPILOGUE)
COLLECTIVE_TITLES = {"all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter",
                     "all_gather": "all-gather", "all_to_all": "all-to-all",
                     EPILOGUE: "all-reduce + add + RMSNorm"}
# Collectives after which every rank holds the same result: the `identical` column checks that
# they agree bitwise. After a reduce-scatter or an all-to-all each rank holds a different block by
# design, so there is nothing to compare across ranks: `identical` is None there ("n/a"), and
# rel_err against the float64 reference is the whole check (0 for the exact all-to-all rows).
# The epilogue's check is on its normed output, which every rank holds.
REPLICATED_COLLECTIVES = ("all_reduce", "all_gather", EPILOGUE)

# quickreduce's codecs with a bench row each (qr_<codec>), from the registry (csrc/codecs/codec_list.hpp):
# the plain lossy ones, then the lossless packing.
QR_CODECS = tuple(codecs.scaled_codecs(rotated=False))
QR_ROW_CODECS = QR_CODECS + tuple(c for c in codecs.exact_codecs() if c != "fp16")
# The Hadamard-rotated codecs: rows of their own after the plain codecs (qr_int4h, qr_int6h), so a
# run shows each beside its plain twin.
QR_ROTATED_CODECS = tuple(codecs.rotated_codecs())
# Epilogue rows: qr_fused_<codec> for each of these, qr_unfused_<codec> (our all-reduce, then torch's
# add and RMSNorm) for the exact ones and one lossy codec (the epilogue's cost does not depend on the
# codec, so one lossy pair shows it).
EPILOGUE_CODECS = ("passthrough", "lossless", "int8", "fp8", "int6", "int6h", "int4", "int4h", "fp4")
UNFUSED_CODECS = ("passthrough", "lossless", "int4")

# Display order and lossy flag of every method `quickreduce bench` knows.
METHOD_LOSSY = {
    "nccl": False, "nccl_copy": False, "nccl_symm": False, "symm_mem_one_shot": False, "symm_mem_two_shot": False, "vllm_custom": False,
    "trtllm_one_shot": False, "trtllm_one_shot_pdl": False, "trtllm_two_shot": False,
    "qr_one_shot": False, "qr_two_shot": False, "qr_rs_ag": False, "qr_lossless": False, "qr_auto": False,
    "flashinfer_fp8": True, "qr_int8": True, "qr_fp8": True, "qr_int6": True, "qr_int4": True,
    "qr_fp4": True, **{f"qr_{codec}": True for codec in QR_ROTATED_CODECS}, "qr_auto_int4": True,
}
# The same for the segment collectives (reduce-scatter, all-gather, all-to-all): NCCL, torch symmetric
# memory's op where it has one, quickreduce passthrough (the benchmark's dtype, exact) and per codec.
EXCHANGE_METHOD_LOSSY = {"nccl": False, "nccl_symm": False, "symm_mem": False, "qr_passthrough": False,
                         "qr_lossless": False,
                         **{f"qr_{codec}": True for codec in QR_CODECS + QR_ROTATED_CODECS},
                         "qr_auto_int4": True}  # what auto:int4 picks from the tuned table
# The epilogue's rows: NCCL + torch's add and RMSNorm (the baseline, as NCCL is the collectives'),
# FlashInfer's fused TensorRT-LLM op, quickreduce fused per codec and quickreduce unfused.
_EPILOGUE_ROWS = (("fused", EPILOGUE_CODECS), ("unfused", UNFUSED_CODECS))
EPILOGUE_METHOD_LOSSY = {
    "nccl_unfused": False, "trtllm_fused": False,
    **{f"qr_{kind}_{c}": False for kind, codecs in _EPILOGUE_ROWS for c in codecs
       if c in ("passthrough", "lossless")},
    **{f"qr_{kind}_{c}": True for kind, codecs in _EPILOGUE_ROWS for c in codecs
       if c not in ("passthrough", "lossless")},
}
COLLECTIVE_METHODS = {"all_reduce": METHOD_LOSSY, "reduce_scatter": EXCHANGE_METHOD_LOSSY,
                      "all_gather": EXCHANGE_METHOD_LOSSY, "all_to_all": EXCHANGE_METHOD_LOSSY,
                      EPILOGUE: EPILOGUE_METHOD_LOSSY}
# The row every other row of its group is compared with (vs_nccl, the lossy plot panel).
BASELINES = {EPILOGUE: "nccl_unfused"}
# Rows of quickreduce that are not quickreduce's own way of doing the job (its all-reduce followed by
# torch's ops): plotted beside the fused rows, never counted as quickreduce's best or as a peer.
COMPANION_PREFIX = "qr_unfused_"
# nccl-tests prints the dtype under "type" with these names.
NCCL_TYPE_NAMES = {"bf16": "bfloat16", "fp16": "half", "fp32": "float"}
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


# --------------------------------------------------------------------------- sizes

def parse_size(text: str) -> int:
    """'8K' -> 8192, '1G' -> 2**30, '4096' -> 4096 (binary units, as nccl-tests)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"bad size {text!r}: use bytes or a K/M/G suffix, e.g. 8K, 64M, 1G")
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if value != int(value) or value <= 0:
        raise ValueError(f"bad size {text!r}: must be a positive whole number of bytes")
    return int(value)


def parse_sizes(spec: str, *, align: int = 16) -> list[int]:
    """'8K:1G' (doubling), '8K:1G:4' (times 4), '8K,64K,1M', or any comma mix of these.

    Every size must be a multiple of `align` bytes (16: all methods move 16-byte vectors).
    """
    sizes: set[int] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        fields = part.split(":")
        if len(fields) == 1:
            sizes.add(parse_size(fields[0]))
            continue
        if len(fields) not in (2, 3):
            raise ValueError(f"bad size range {part!r}: use START:END or START:END:FACTOR")
        start, end = parse_size(fields[0]), parse_size(fields[1])
        factor = int(fields[2]) if len(fields) == 3 else 2
        if factor < 2 or end < start:
            raise ValueError(f"bad size range {part!r}: need END >= START and FACTOR >= 2")
        size = start
        while size <= end:
            sizes.add(size)
            size *= factor
    if not sizes:
        raise ValueError(f"no sizes in {spec!r}")
    bad = sorted(s for s in sizes if s % align)
    if bad:
        raise ValueError(f"sizes must be multiples of {align} bytes: {', '.join(map(str, bad))}")
    return sorted(sizes)


def human_size(nbytes: int) -> str:
    """8192 -> '8K', 3 << 20 -> '3M', 1000 -> '1000'."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def device_tag(gpu_name: str, world_size: int) -> str:
    """'h200-x2' for two 'NVIDIA H200'."""
    return f"{gpu_slug(gpu_name)}-x{world_size}"


# --------------------------------------------------------------------------- bandwidth

def bus_factor(world_size: int, collective: str = "all_reduce") -> float:
    """nccl-tests' factor from algbw to busbw (doc/PERFORMANCE.md there): an all-reduce (and the
    epilogue, which is one) moves 2(n-1)/n of the buffer through each rank's links; a
    reduce-scatter, all-gather or all-to-all (n-1)/n of it."""
    if collective not in ROW_GROUPS:
        raise ValueError(f"unknown collective {collective!r}; one of {', '.join(ROW_GROUPS)}")
    per_rank = (world_size - 1) / world_size
    return 2.0 * per_rank if collective in ALL_REDUCE_SHAPED else per_rank


def bandwidths(nbytes: int, time_us: float, world_size: int,
               collective: str = "all_reduce") -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes, as nccl-tests); nbytes is the collective's "size"."""
    algbw = nbytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * bus_factor(world_size, collective)


def nccl_count(nbytes: int, dtype: str, world_size: int, collective: str = "all_reduce") -> int:
    """nccl-tests' "count" column: values in the buffer for an all-reduce, values in one rank's
    block (size / element size / ranks) for a reduce-scatter, all-gather or all-to-all."""
    values = nbytes // ELEMENT_BYTES.get(dtype, 2)
    return values if collective in ALL_REDUCE_SHAPED else values // world_size


def is_lossy(method: str, row: dict[str, Any] | None = None) -> bool:
    if row is not None and row.get("lossy") not in (None, ""):
        return bool(row["lossy"])
    if method in METHOD_LOSSY:
        return METHOD_LOSSY[method]
    return any(codec in method for codec in ("fp8", "int8", "int6", "int4", "fp4"))


def collective_of(row: dict[str, Any]) -> str:
    """A row's collective; rows from before the column existed are all-reduce rows."""
    return row.get("collective") or "all_reduce"


def baseline_method(collective: str) -> str:
    """The method a group's vs_nccl column and lossy plot panel compare with: NCCL's way of doing
    the job ('nccl'; the epilogue's 'nccl_unfused', NCCL then torch's add and RMSNorm)."""
    return BASELINES.get(collective, "nccl")


def is_quickreduce(method: str) -> bool:
    """A row of quickreduce's own (not a peer, not quickreduce's all-reduce followed by torch's ops)."""
    return method.startswith("qr_") and not method.startswith(COMPANION_PREFIX)


def complete_rows(rows: list[dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    """Fill algbw/busbw/vs_nccl/count/type from size and time (each by the row's collective;
    vs_nccl against its `baseline_method`); sort by collective, dtype, size, then method."""
    nccl_time = {(collective_of(r), r["dtype"], r["size"]): r["time_us"] for r in rows
                 if r["method"] == baseline_method(collective_of(r)) and r.get("time_us")}
    out = []
    for row in rows:
        row = dict(row)
        collective = row["collective"] = collective_of(row)
        row.setdefault("lossy", is_lossy(row["method"]))
        row["count"] = nccl_count(row["size"], row["dtype"], world_size, collective)
        row["type"] = NCCL_TYPE_NAMES.get(row["dtype"], row["dtype"])
        row["world_size"] = world_size
        time_us = row.get("time_us")
        if time_us:
            row["algbw_GBps"], row["busbw_GBps"] = bandwidths(row["size"], time_us, world_size,
                                                              collective)
            base = nccl_time.get((collective, row["dtype"], row["size"]))
            row["vs_nccl"] = base / time_us if base else None
        else:
            row["algbw_GBps"] = row["busbw_GBps"] = row["vs_nccl"] = None
        out.append(row)
    return sorted(out, key=lambda r: (_collective_rank(r["collective"]), r["dtype"], r["size"],
                                      method_rank(r["method"], r["collective"])))


def _collective_rank(collective: str) -> tuple[int, str]:
    order = list(ROW_GROUPS)
    return (order.index(collective) if collective in order else len(order), collective)


def method_rank(method: str, collective: str = "all_reduce") -> tuple[int, str]:
    order = list(COLLECTIVE_METHODS.get(collective, METHOD_LOSSY))
    return (order.index(method) if method in order else len(order), method)


def split_by_collective(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """[(collective, its rows)] in display order, each list in the order given."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(collective_of(row), []).append(row)
    return [(c, groups[c]) for c in sorted(groups, key=_collective_rank)]


# --------------------------------------------------------------------------- text tables

def _fmt(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kind == "time":
        return f"{value:.2f}" if value < 1000 else f"{value:.1f}"
    if kind == "bw":
        return f"{value:.2f}"
    if kind == "speedup":
        return f"{value:.2f}x"
    if kind == "err":
        return f"{value:.1e}"
    if kind == "bool":
        return "yes" if value else "NO"
    return str(value)


_TABLE_FIELDS = [  # (csv column, header, width, kind)
    ("size", "size", 11, "int"), ("count", "count", 11, "int"), ("type", "type", 8, "str"),
    ("method", "method", 20, "str"), ("time_us", "time_us", 9, "time"),
    ("algbw_GBps", "algbw_GBps", 10, "bw"), ("busbw_GBps", "busbw_GBps", 10, "bw"),
    ("vs_nccl", "vs_nccl", 7, "speedup"), ("rel_err", "rel_err", 8, "err"),
    ("identical", "identical", 9, "bool"),
]


def _cells(row: dict[str, Any]) -> list[str]:
    cells = [_fmt(row.get(col), kind) for col, _, _, kind in _TABLE_FIELDS]
    if row.get("identical") is None and collective_of(row) not in REPLICATED_COLLECTIVES:
        cells[9] = "n/a"  # every rank holds a different block: nothing to compare across ranks
    return cells


def format_table(rows: list[dict[str, Any]]) -> str:
    """nccl-tests-style plain text, one line per (size, method), a blank line between sizes."""
    def line(cells):
        parts = []
        for (_, _, width, kind), cell in zip(_TABLE_FIELDS, cells):
            parts.append(cell.ljust(width) if kind == "str" else cell.rjust(width))
        return "  ".join(parts).rstrip()

    out = ["#" + line([h for _, h, _, _ in _TABLE_FIELDS])[1:]]
    previous = None
    for row in rows:
        if previous is not None and row["size"] != previous:
            out.append("")
        previous = row["size"]
        out.append(line(_cells(row)))
    return "\n".join(out)


def pivot(rows: list[dict[str, Any]]) -> tuple[list[int], list[str], dict[tuple[int, str], float]]:
    """(sizes, methods, {(size, method): time_us}) for the summary grid (rows of one collective)."""
    collective = collective_of(rows[0]) if rows else "all_reduce"
    sizes = sorted({r["size"] for r in rows})
    methods = sorted({r["method"] for r in rows}, key=lambda m: method_rank(m, collective))
    times = {(r["size"], r["method"]): r["time_us"] for r in rows if r.get("time_us")}
    return sizes, methods, times


def format_pivot(rows: list[dict[str, Any]]) -> str:
    """Size x method grid of microseconds per call; '*' marks the fastest lossless method."""
    sizes, methods, times = pivot(rows)
    width = max([8] + [len(m) for m in methods])
    out = ["time_us".rjust(6) + "".join(m.rjust(width + 2) for m in methods)]
    for size in sizes:
        best = _best_lossless(size, methods, times)
        cells = []
        for m in methods:
            t = times.get((size, m))
            text = "-" if t is None else _fmt(t, "time") + ("*" if m == best else "")
            cells.append(text.rjust(width + 2))
        out.append(human_size(size).rjust(6) + "".join(cells))
    return "\n".join(out)


def _best_lossless(size: int, methods: list[str], times: dict) -> str | None:
    exact = [(times[(size, m)], m) for m in methods if (size, m) in times and not is_lossy(m)]
    return min(exact)[1] if exact else None


def print_results(rows: list[dict[str, Any]], notes: Iterable[str] = (), console=None) -> None:
    """Print the full table and the summary grid of each collective, with rich when it is
    installed. All-reduce rows alone print as they always have."""
    groups = split_by_collective(rows)
    notes = list(notes)
    try:
        from rich.table import Table
    except ImportError:
        for collective, mine in groups or [("all_reduce", [])]:
            if collective != "all_reduce":
                print(f"# {COLLECTIVE_TITLES.get(collective, collective)}")
            print(format_table(mine), "", format_pivot(mine), sep="\n")
        if notes:
            print(*notes, sep="\n")
        return
    console = console or make_console()
    if not rows:
        console.print("[bold red]no results[/]: every method was skipped or failed")
    for note in notes if not rows else ():
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if not rows:
        return
    for collective, mine in groups:
        title = COLLECTIVE_TITLES.get(collective, collective)
        table = Table(title=f"{title} (CUDA-graph median per call)", header_style="bold")
        for _, header, _, kind in _TABLE_FIELDS:
            table.add_column(header, justify="left" if kind == "str" else "right", no_wrap=True)
        for i, row in enumerate(mine):
            last_of_size = i + 1 == len(mine) or mine[i + 1]["size"] != row["size"]
            cells = _cells(row)
            speedup = row.get("vs_nccl")
            if speedup:
                cells[7] = f"[{'green' if speedup > 1.0 else 'red'}]{cells[7]}[/]"
            if row.get("identical") is False:
                cells[9] = f"[bold red]{cells[9]}[/]"
            table.add_row(*cells, end_section=last_of_size,
                          style="dim" if is_lossy(row["method"], row) else None)
        console.print(table)
        sizes, methods, times = pivot(mine)
        prefix = "" if collective == "all_reduce" else f"{title}: "
        grid = Table(title=f"{prefix}time_us per call (bold: fastest lossless; dim columns are lossy)")
        grid.add_column("size", justify="right")
        for m in methods:
            grid.add_column(m, justify="right", style="dim" if is_lossy(m) else None)
        for size in sizes:
            best = _best_lossless(size, methods, times)
            cells = []
            for m in methods:
                t = times.get((size, m))
                text = "-" if t is None else _fmt(t, "time")
                cells.append(f"[bold green]{text}[/]" if m == best else text)
            grid.add_row(human_size(size), *cells)
        console.print(grid)
    for note in notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def make_console():
    """A rich console; when output is captured (not a terminal) it is wide enough for the grid."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=220)


# --------------------------------------------------------------------------- CSV

_CSV_FORMATS = {"time_us": "{:.3f}", "algbw_GBps": "{:.3f}", "busbw_GBps": "{:.3f}",
                "vs_nccl": "{:.4f}", "rel_err": "{:.4e}"}
# Columns and method names of other CSVs (the peers kit's h200-x2.csv) mapped onto ours.
_CSV_ALIASES = {"size_bytes": "size", "speedup_vs_nccl": "vs_nccl", "busbw_gbs": "busbw_GBps", "algbw_gbs": "algbw_GBps"}
# Names the CSV is written with (the ones the project's issues fix); read_csv maps them back.
_CSV_HEADER = {"size": "size_bytes", "vs_nccl": "speedup_vs_nccl", "busbw_GBps": "busbw_gbs", "algbw_GBps": "algbw_gbs"}
_METHOD_ALIASES = {"symm_one_shot": "symm_mem_one_shot", "symm_two_shot": "symm_mem_two_shot"}


def write_csv(rows: list[dict[str, Any]], path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        header = [_CSV_HEADER.get(col, col) for col in CSV_COLUMNS]
        writer = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({_CSV_HEADER.get(col, col): _csv_cell(col, row.get(col)) for col in CSV_COLUMNS})
    return path


def _csv_cell(col: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    fmt = _CSV_FORMATS.get(col)
    return fmt.format(value) if fmt else str(value)


def read_csv(path: Path | str) -> list[dict[str, Any]]:
    """Rows back from `write_csv` (or a CSV with the peers kit's column names)."""
    rows = []
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, Any] = {}
            for key, text in raw.items():
                key = _CSV_ALIASES.get(key, key)
                row[key] = _parse_cell(key, text)
            if row.get("size") is None or not row.get("method"):
                continue
            row.setdefault("dtype", "bf16")
            row["collective"] = collective_of(row)  # CSVs from before the column: all-reduce
            row["method"] = _METHOD_ALIASES.get(row["method"], row["method"])
            rows.append(row)
    return rows


def _parse_cell(key: str, text: str | None) -> Any:
    if text is None or text == "":
        return None
    if key in ("size", "count", "world_size"):
        return int(float(text))
    if key in ("identical", "lossy"):
        return text.strip().lower() in ("yes", "true", "1")
    if key in ("time_us", "algbw_GBps", "busbw_GBps", "vs_nccl", "rel_err"):
        return float(text)
    return text


# --------------------------------------------------------------------------- plots (plots.py)

_PLOT_NAMES = ("plot", "best_lossless_vs_peers", "QR_BEST_COLOR")


def __getattr__(name: str):
    """`plot` and `best_lossless_vs_peers` live in plots.py (matplotlib's side); they stay reachable here."""
    if name in _PLOT_NAMES:
        from . import plots
        return getattr(plots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
