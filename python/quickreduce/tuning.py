"""The table behind `algo="auto"` and `codec="auto[:bound]"`.

A table belongs to one GPU model and world size and holds, per dtype, a sorted list of size
breakpoints. Each breakpoint covers sizes up to `max_bytes` (inclusive; null = no limit) and names

- `lossless`: the fastest exact method there, one of "one_shot", "two_shot", "rs_ag" (reduce-scatter
  then all-gather), "nccl", or
  ["two_shot", "lossless"] (the two-shot with the lossless bf16 packing: the same bits, fewer bytes);
- `lossy`: for each codec bound, the fastest [algo, codec] at least as accurate as that codec
  (`admits`). A bound missing here means no lossy method beat the lossless one at these sizes.

    {"format": 2, "gpu": "h200", "world_size": 2, "measured": true, "note": "...",
     "codec_error_order": ["fp16", "int8", "int6h", "fp8", "int6", "int4h", "fp4", "int4"],
     "dtypes": {"bf16": [{"max_bytes": 1048575, "lossless": "one_shot", "lossy": {}},
                         {"max_bytes": null, "lossless": "two_shot",
                          "lossy": {"int4": ["two_shot", "int4"], ...}}]}}

Segment collectives (reduce_scatter, all_gather, all_to_all) may have their own section, per
collective and dtype: breakpoints over the bytes of the call's input tensor (what
`choose_collective` is given; all-gather's is 1/world_size of its output), each naming for each
codec bound the fastest codec at most that lossy. Their exact method is always the passthrough (it
has no NCCL fallback and `lossless` runs as the passthrough there), so an entry holds no exact
choice and a bound missing from it means the passthrough won:

     "collectives": {"reduce_scatter": {"bf16": [{"max_bytes": 3145727, "lossy": {}},
                                                 {"max_bytes": null, "lossy": {"int4": "int4h", ...}}]}}

What "at least as accurate" means is the same for every table and machine: `admits` reads the
relative errors in tuned/codec_accuracy.json (every collective, data kind, dtype and world size,
measured on the CPU twin, which is bit-exact with the kernels; `quickreduce accuracy --accuracy-json`
writes it), and a codec stands in for a bound only where its error is at most the bound's in every
one of them. `choose` and `choose_collective` check a table's choice against the same rule, so a
table built by an older rule (a user's cache) never runs a less accurate codec than the bound asked for.

`load_table` looks in: $QUICKREDUCE_TUNE_FILE, the user cache written by `quickreduce tune`
(~/.cache/quickreduce/tune-<gpu>-w<ws>-<driver>.json), the defaults shipped in
quickreduce/tuned/<gpu>-w<ws>.json, and last a conservative table built here.
This module needs neither torch nor the extension, so it is tested on CPU.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import statistics
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

from . import codecs

FORMAT_VERSION = 2  # 2: an entry's "lossless" may be ["two_shot", "lossless"]; 1 is still read
READABLE_FORMATS = (1, 2)
ALGOS = ("one_shot", "two_shot", "rs_ag", "nccl")
PASSTHROUGH = ("fp16", "bf16", "fp32")  # each names the exact passthrough in the tensor's own dtype
LOSSLESS_CODEC = "lossless"  # packs bf16 without changing a bit: an exact method, not a lossy one
EXACT_CODECS = PASSTHROUGH + (LOSSLESS_CODEC,)
# Most to least accurate by each codec's worst relative error over tuned/codec_accuracy.json (a
# linear order for display and for tables that name none). It is no rule of what a bound admits:
# accuracy is a partial order over data kinds (int8 is 4x more accurate than fp8 on Gaussian
# data, fp8 2x more accurate than int8 with outlier channels), see `admits`.
DEFAULT_CODEC_ERROR_ORDER = ("fp16", "int8", "int6h", "fp8", "int6", "int4h", "fp4", "int4")
TUNED_DIR = Path(__file__).resolve().parent / "tuned"
ACCURACY_FILE = TUNED_DIR / "codec_accuracy.json"

_DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
}
# The segment collectives a table may hold entries for (the all-reduce's are "dtypes").
SEGMENT_COLLECTIVES = ("reduce_scatter", "all_gather", "all_to_all")


@dataclass
class TuneTable:
    """A loaded, validated table plus where it came from."""

    gpu: str
    world_size: int
    dtypes: dict[str, list[dict[str, Any]]]
    source: str
    measured: bool = False
    note: str = ""
    codec_error_order: list[str] = field(default_factory=lambda: list(DEFAULT_CODEC_ERROR_ORDER))
    raw: dict[str, Any] = field(default_factory=dict)
    # {"reduce_scatter": {"bf16": [{"max_bytes": ..., "lossy": {"int6": "int4", ...}}, ...]}, ...}:
    # per segment collective and dtype, the fastest codec allowed by each bound (exact: passthrough).
    collectives: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)


# --------------------------------------------------------------------------- names and paths

def dtype_name(dtype: Any) -> str:
    """'bf16' or 'fp16' for a torch dtype or any of their usual spellings."""
    key = str(dtype).lower()
    if key not in _DTYPE_ALIASES:
        raise ValueError(f"unsupported dtype {dtype!r}: quickreduce handles bf16 and fp16")
    return _DTYPE_ALIASES[key]


def gpu_slug(gpu_name: str) -> str:
    """Short file-name-safe model name: 'NVIDIA H200' -> 'h200', 'NVIDIA RTX A6000' -> 'rtx-a6000'."""
    tokens = [t for t in re.findall(r"[a-z0-9]+", gpu_name.lower())
              if t not in ("nvidia", "geforce", "tesla")]
    if not tokens:
        return "unknown"
    if re.fullmatch(r"[a-z]{1,3}\d{2,4}[a-z]?", tokens[0]):  # h100, h200, a100, b200, gb200, l40s
        return tokens[0]
    return "-".join(tokens[:2])


def driver_version() -> str:
    """The NVIDIA kernel driver version ('580.159.04'), or 'unknown'."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", text)
        if match:
            return match.group(1)
    except OSError:
        pass
    try:
        import pynvml  # optional

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - any failure just means "unknown"
        return "unknown"


def cache_path(gpu_name: str, world_size: int, driver: str | None = None) -> Path:
    """Where `quickreduce tune` stores its table for this GPU model, world size and driver."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    driver = driver or driver_version()
    return root / "quickreduce" / f"tune-{gpu_slug(gpu_name)}-w{world_size}-{driver}.json"


def builtin_path(gpu_name: str, world_size: int) -> Path:
    return TUNED_DIR / f"{gpu_slug(gpu_name)}-w{world_size}.json"


# --------------------------------------------------------------------------- loading

def load_table(gpu_name: str, world_size: int, driver: str | None = None) -> TuneTable:
    """The table to use for this GPU model and world size (see the module doc for the order).

    A file that is missing is skipped silently; one that is unreadable or malformed is skipped
    with a warning. The result is never None: the last resort is `fallback_table`.
    """
    candidates = []
    env_file = os.environ.get("QUICKREDUCE_TUNE_FILE")
    if env_file:
        candidates.append(("QUICKREDUCE_TUNE_FILE", Path(env_file)))
    candidates.append(("cache", cache_path(gpu_name, world_size, driver)))
    candidates.append(("built-in", builtin_path(gpu_name, world_size)))
    for kind, path in candidates:
        if not path.is_file():
            if kind == "QUICKREDUCE_TUNE_FILE":
                warnings.warn(f"QUICKREDUCE_TUNE_FILE={path} does not exist; ignoring it",
                              stacklevel=2)
            continue
        try:
            table = table_from_dict(json.loads(path.read_text()), source=f"{kind}: {path}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"quickreduce: ignoring tuning file {path}: {exc}", stacklevel=2)
            continue
        if table.world_size != world_size or table.gpu != gpu_slug(gpu_name):
            if kind != "QUICKREDUCE_TUNE_FILE":  # only an explicit file may be borrowed
                continue
            warnings.warn(f"quickreduce: {path} was tuned for {table.gpu} x{table.world_size}, "
                          f"using it on {gpu_slug(gpu_name)} x{world_size}", stacklevel=2)
        return table
    return fallback_table(gpu_name, world_size)


def table_from_dict(data: dict[str, Any], source: str = "<dict>") -> TuneTable:
    """Validate a decoded JSON table; raise ValueError on anything malformed."""
    if data.get("format") not in READABLE_FORMATS:
        raise ValueError(f"unsupported format {data.get('format')!r}, expected one of {READABLE_FORMATS}")
    dtypes = {}
    for name, entries in data["dtypes"].items():
        dtypes[dtype_name(name)] = _validated_entries(entries)
    if not dtypes:
        raise ValueError("table has no dtypes")
    order = list(data.get("codec_error_order") or DEFAULT_CODEC_ERROR_ORDER)
    collectives = {}
    for collective, per_dtype in (data.get("collectives") or {}).items():
        if collective not in SEGMENT_COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r}; known: {SEGMENT_COLLECTIVES}")
        collectives[collective] = {dtype_name(d): _validated_collective_entries(e, order)
                                   for d, e in per_dtype.items()}
    for collective, errors in (data.get("collective_codec_errors") or {}).items():
        if collective not in collectives or not all(isinstance(e, (int, float)) for e in errors.values()):
            raise ValueError(f"bad collective_codec_errors for {collective!r}: {errors!r}")
    return TuneTable(gpu=str(data["gpu"]), world_size=int(data["world_size"]), dtypes=dtypes,
                     source=source, measured=bool(data.get("measured", False)),
                     note=str(data.get("note", "")), codec_error_order=order, raw=data,
                     collectives=collectives)


def _validated_collective_entries(entries: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """A segment collective's breakpoints: each bound names a lossy codec (never NCCL or an exact
    codec: the collectives run quickreduce's codecs only, and exact is the passthrough anyway)."""
    known = set(order) | set(DEFAULT_CODEC_ERROR_ORDER)
    for entry in _validated_breakpoints(entries):
        for bound, codec in entry.get("lossy", {}).items():
            if bound not in known or codec not in known or codec in EXACT_CODECS:
                raise ValueError(f"bad lossy choice for {bound}: {codec!r}")
    return entries


def _validated_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for entry in _validated_breakpoints(entries):
        exact = entry["lossless"]
        if not (exact in ALGOS or (isinstance(exact, list) and len(exact) == 2 and exact[0] in ALGOS
                                   and exact[1] == LOSSLESS_CODEC)):
            raise ValueError(f"unknown lossless algo {exact!r}")
        for bound, choice in entry.get("lossy", {}).items():
            algo, codec = choice
            if algo not in ALGOS or not isinstance(codec, str):
                raise ValueError(f"bad lossy choice for {bound}: {choice!r}")
    return entries


def _validated_breakpoints(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sorted by max_bytes, the last (and only the last) with max_bytes null: every size finds one."""
    if not entries:
        raise ValueError("empty breakpoint list")
    previous = -1
    for i, entry in enumerate(entries):
        limit = entry["max_bytes"]
        if limit is None and i != len(entries) - 1:
            raise ValueError("only the last breakpoint may have max_bytes null")
        if limit is not None and int(limit) <= previous:
            raise ValueError("breakpoints must be sorted by max_bytes")
        previous = -1 if limit is None else int(limit)
    if entries[-1]["max_bytes"] is not None:
        raise ValueError("the last breakpoint must have max_bytes null (no upper limit)")
    return entries


def fallback_table(gpu_name: str, world_size: int) -> TuneTable:
    """For hardware nobody tuned. 2 GPUs: what the two measured machines (tuned/h100-w2.json,
    tuned/h200-w2.json) agree on, kept on the safe side of both: the one-shot up to 4 MiB (both tables keep
    it to ~11.9 MB), then the two-shot's lossless packing, which both measured ahead of NCCL at every
    size; codecs from 4 MiB (both tables start them at ~5.9 MB).
    4 GPUs: tuned/h200-w4.json's shape, kept on the safe side: the one-shot up to 2 MiB (it measured
    faster to ~2.8 MB), the plain two-shot to 64 MiB, the lossless packing above (1.04-1.15x NCCL from
    128 MB; NCCL would also cost `auto` a copy), codecs from 2 MiB.
    Other world sizes (3, 5-8; never measured): the one-shot only for small messages, NCCL for very
    large ones, codecs only where the transfer clearly dominates (from 1 MiB)."""
    codecs = [c for c in DEFAULT_CODEC_ERROR_ORDER if c not in PASSTHROUGH]
    with_codecs = {c: ["two_shot", c] for c in codecs}
    if world_size == 2:
        entries = [
            {"max_bytes": 4 << 20, "lossless": "one_shot", "lossy": {}},
            {"max_bytes": None, "lossless": ["two_shot", "lossless"], "lossy": with_codecs},
        ]
    elif world_size == 4:
        entries = [
            {"max_bytes": 2 << 20, "lossless": "one_shot", "lossy": {}},
            {"max_bytes": 64 << 20, "lossless": "two_shot", "lossy": with_codecs},
            {"max_bytes": None, "lossless": ["two_shot", "lossless"], "lossy": with_codecs},
        ]
    else:
        entries = [
            {"max_bytes": 256 << 10, "lossless": "one_shot", "lossy": {}},
            {"max_bytes": (1 << 20) - 1, "lossless": "two_shot", "lossy": {}},
            {"max_bytes": 64 << 20, "lossless": "two_shot", "lossy": with_codecs},
            {"max_bytes": None, "lossless": "nccl", "lossy": with_codecs},
        ]
    return TuneTable(gpu=gpu_slug(gpu_name), world_size=world_size,
                     dtypes={"bf16": entries, "fp16": entries}, source="fallback (hard-coded)",
                     note="conservative fallback, not measured")


# --------------------------------------------------------------------------- choosing

def choose(table: TuneTable, nbytes: int, dtype: Any, bound: str | None = None) -> tuple[str, str]:
    """(algo, codec) for an all-reduce of `nbytes` bytes of `dtype`.

    `bound` is None (or "fp16"/"bf16"/"lossless") for exact results, else a codec name ("int4")
    or "auto:int4": then the result may be any method at most as lossy as that codec.
    The codec returned for exact results is the dtype's own name (passthrough) or "lossless".
    """
    dt = dtype_name(dtype)
    bound = _normalized_bound(bound, table)
    entries = table.dtypes.get(dt) or next(iter(table.dtypes.values()))
    entry = next(e for e in entries if e["max_bytes"] is None or nbytes <= e["max_bytes"])
    if bound is not None and bound in entry.get("lossy", {}):
        algo, codec = entry["lossy"][bound]
        if not admits(bound, codec):  # a table made by an older rule: the bound itself is safe
            return "two_shot", bound
        return algo, (dt if codec in PASSTHROUGH else codec)
    return exact_choice(entry, dt)


def choose_collective(table: TuneTable, collective: str, nbytes: int, dtype: Any, bound: str | None = None) -> str:
    """The codec of a segment collective (reduce_scatter, all_gather, all_to_all) whose input tensor
    has `nbytes` bytes.

    Exact (`bound` None): the passthrough, named by the dtype. With a bound: the table's fastest
    codec at most that lossy for this collective, dtype and size (the passthrough where none beat
    it). Where the table measured nothing for it (no entries for the collective and dtype, or a
    bound codec missing from the collective's measured `collective_codec_errors`) the bound codec
    itself. Never NCCL: the collectives have no NCCL fallback.
    """
    if collective not in SEGMENT_COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; known: {SEGMENT_COLLECTIVES}")
    dt = dtype_name(dtype)
    bound = _normalized_bound(bound, table)
    if bound is None:
        return dt
    measured_codecs = table.raw.get("collective_codec_errors", {}).get(collective)
    if not measured_collective(table, collective, dt) or (measured_codecs is not None and bound not in measured_codecs):
        return bound
    entries = table.collectives[collective][dt]
    entry = next(e for e in entries if e["max_bytes"] is None or nbytes <= e["max_bytes"])
    codec = entry.get("lossy", {}).get(bound, dt)
    if codec not in PASSTHROUGH and not admits(bound, codec):  # a table made by an older rule
        return bound
    return dt if codec in PASSTHROUGH else codec


def measured_collective(table: TuneTable, collective: str, dtype: Any) -> bool:
    """Whether the table holds entries for this segment collective in this dtype."""
    return bool(table.collectives.get(collective, {}).get(dtype_name(dtype)))


def exact_choice(entry: dict[str, Any], dt: str) -> tuple[str, str]:
    """(algo, codec) of a breakpoint's exact method: a bare algo runs the passthrough."""
    exact = entry["lossless"]
    return (exact[0], exact[1]) if isinstance(exact, list) else (exact, dt)


def _normalized_bound(bound: str | None, table: TuneTable) -> str | None:
    if bound is None:
        return None
    given = bound.strip()
    if not given:
        return None
    try:
        _, bound = codecs.parse_codec_request(given)
    except ValueError:
        bound = given.lower()
    if bound is None or bound in EXACT_CODECS:
        return None
    if bound not in table.codec_error_order and bound not in DEFAULT_CODEC_ERROR_ORDER:
        raise ValueError(f"unknown codec bound {given!r}; known: {', '.join(DEFAULT_CODEC_ERROR_ORDER)}")
    return bound


# --------------------------------------------------------------------------- building (tune)

def codec_errors(measurements: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Median relative error per lossy codec over all sizes (one number per codec is steadier
    than per-size errors, which wobble at small sizes)."""
    per_codec: dict[str, list[float]] = {}
    for m in measurements:
        err = m.get("rel_err")
        if m["codec"] not in EXACT_CODECS and err is not None and math.isfinite(err):
            per_codec.setdefault(m["codec"], []).append(float(err))
    # 4 significant digits: more is noise, and the table stays readable
    return {codec: float(f"{statistics.median(errs):.4g}") for codec, errs in per_codec.items()}


@functools.lru_cache(maxsize=None)
def codec_accuracy(path: Path = ACCURACY_FILE) -> dict[str, dict[str, float]]:
    """{cell: {codec: relative L2 error}} from a codec accuracy file (default the shipped
    tuned/codec_accuracy.json); a cell is "<collective>/<data kind>/<dtype>/w<world size>"."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != 1 or not isinstance(data.get("rel_l2"), dict) or not data["rel_l2"]:
        raise ValueError(f"{path}: not a codec accuracy file (format 1 with rel_l2 cells)")
    return {cell: {codec: float(err) for codec, err in errors.items()} for cell, errors in data["rel_l2"].items()}


def admits(bound: str, codec: str, accuracy: dict[str, dict[str, float]] | None = None) -> bool:
    """Whether `auto:<bound>` ("no less accurate than `bound`") may run `codec`: an exact codec
    always; a lossy one where its relative error is at most the bound's in every cell of
    `accuracy` (default: `codec_accuracy()`, every collective, data kind (Gaussian, heavy-tailed,
    outlier channels), dtype and world size) that measured the bound, and it was measured wherever
    the bound was. So a bound admits itself and the codecs more accurate on every kind of data:
    `auto:fp8` never runs int6 or int8 (each less accurate than fp8 with outlier channels)."""
    if codec in EXACT_CODECS or codec == bound:
        return True
    if bound in EXACT_CODECS:
        return False
    cells = [errors for errors in (codec_accuracy() if accuracy is None else accuracy).values() if bound in errors]
    return bool(cells) and all(codec in errors and errors[codec] <= errors[bound] for errors in cells)


def error_order(accuracy: dict[str, dict[str, float]] | None = None) -> list[str]:
    """Codecs from most to least accurate by their worst relative error over `accuracy` (default
    `codec_accuracy()`): a linear order that agrees with `admits` (a codec it admits for a bound
    comes first), then codecs not measured there in the default order."""
    cells = list((codec_accuracy() if accuracy is None else accuracy).values())
    worst: dict[str, float] = {}
    for errors in cells:
        for codec, err in errors.items():
            if codec not in EXACT_CODECS:
                worst[codec] = max(worst.get(codec, 0.0), err)
    default_rank = {c: i for i, c in enumerate(DEFAULT_CODEC_ERROR_ORDER)}
    measured = sorted(worst, key=lambda c: (worst[c], default_rank.get(c, 99)))
    rest = [c for c in DEFAULT_CODEC_ERROR_ORDER if c not in worst and c not in EXACT_CODECS]
    return ["fp16"] + measured + rest


def table_from_measurements(measurements: list[dict[str, Any]], gpu_name: str, world_size: int,
                            *, driver: str | None = None, note: str = "") -> dict[str, Any]:
    """Build the JSON table from timed candidates.

    Each measurement: {"dtype", "size", "algo" (one_shot|two_shot|nccl), "codec" (passthrough
    name, "lossless" or a lossy codec), "time_us", "rel_err"}, and "collective" (default
    all_reduce; a segment collective's go to `collective_entries`). The all-reduce's rule, per
    dtype and measured size: the exact method is the fastest exact row; each bound (each lossy
    codec measured) gets the fastest of the exact rows and the lossy rows it `admits`, and is left
    out where an exact row is fastest. A size's breakpoint reaches up to the geometric mean of it
    and the next measured size; equal neighbours are merged.
    """
    reduce_rows = [m for m in measurements if m.get("collective", "all_reduce") == "all_reduce"]
    errors = codec_errors(reduce_rows)
    dtypes = {dt: _breakpoints(by_size, partial(_all_reduce_choices, errors=errors))
              for dt, by_size in _by_dtype_and_size(reduce_rows).items()}
    if not dtypes:
        raise ValueError("no usable all-reduce measurements (every candidate failed or was skipped)")
    data = {
        "format": FORMAT_VERSION, "gpu": gpu_slug(gpu_name), "gpu_name": gpu_name,
        "world_size": world_size, "driver": driver or driver_version(), "measured": True,
        "note": note, "codec_errors": errors, "codec_error_order": error_order(),
        "dtypes": dtypes,
    }
    collectives, collective_errors = collective_entries(
        [m for m in measurements if m.get("collective", "all_reduce") != "all_reduce"])
    if collectives:
        data["collective_codec_errors"] = collective_errors
        data["collectives"] = collectives
    return data


def collective_entries(measurements: list[dict[str, Any]]
                       ) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], dict[str, dict[str, float]]]:
    """The table's per-collective section and the codec errors it was chosen by.

    Each measurement: {"collective" (reduce_scatter|all_gather|all_to_all), "dtype", "size" (bytes
    of the call's input tensor), "codec" (the passthrough's name or a lossy codec), "time_us",
    "rel_err"}. The rule is the all-reduce's, per collective: its codec errors are the medians of
    its own rows (over sizes and dtypes); per dtype and measured size, each bound (each lossy codec
    measured on the collective) gets the fastest of the passthrough and the lossy codecs it
    `admits`, and is left out where the passthrough is fastest (`choose_collective` then runs the
    passthrough). The passthrough is the only exact candidate: a segment collective has no NCCL
    fallback, and `lossless` runs as the passthrough there. Breakpoints as the all-reduce's.
    """
    entries: dict[str, dict[str, list[dict[str, Any]]]] = {}
    errors_by_collective: dict[str, dict[str, float]] = {}
    unknown = {m["collective"] for m in measurements} - set(SEGMENT_COLLECTIVES)
    if unknown:
        raise ValueError(f"unknown collectives {sorted(unknown)}; known: {SEGMENT_COLLECTIVES}")
    for collective in SEGMENT_COLLECTIVES:
        rows = [m for m in measurements if m["collective"] == collective]
        errors = codec_errors(rows)
        per_dtype = {dt: _breakpoints(by_size, partial(_collective_choices, errors=errors))
                     for dt, by_size in _by_dtype_and_size(rows).items()}
        per_dtype = {dt: e for dt, e in per_dtype.items() if e}  # a dtype with no passthrough row
        if per_dtype:
            entries[collective] = per_dtype
            errors_by_collective[collective] = errors
    return entries, errors_by_collective


def _by_dtype_and_size(measurements: list[dict[str, Any]]) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """dtype -> size -> the measurements with a finite time there."""
    grouped: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for m in measurements:
        if m.get("time_us") is None or not math.isfinite(m["time_us"]):
            continue
        grouped.setdefault(dtype_name(m["dtype"]), {}).setdefault(int(m["size"]), []).append(m)
    return grouped


def _fastest_per_bound(rows: list[dict[str, Any]], errors: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Bound -> the fastest of the exact rows and the lossy rows it admits, for the bounds where that
    is a lossy row (on a tie the exact row wins)."""
    exact = [r for r in rows if r["codec"] in EXACT_CODECS]
    fastest = {}
    for bound in errors:
        allowed = exact + [r for r in rows if r["codec"] in errors and admits(bound, r["codec"])]
        best = min(allowed, key=lambda r: r["time_us"])
        if best["codec"] not in EXACT_CODECS:
            fastest[bound] = best
    return dict(sorted(fastest.items()))


def _all_reduce_choices(rows: list[dict[str, Any]], errors: dict[str, float]) -> dict[str, Any]:
    best_exact = min((r for r in rows if r["codec"] in EXACT_CODECS), key=lambda r: r["time_us"])
    exact_method = best_exact["algo"] if best_exact["codec"] in PASSTHROUGH else [best_exact["algo"], LOSSLESS_CODEC]
    return {"lossless": exact_method,
            "lossy": {bound: [r["algo"], r["codec"]] for bound, r in _fastest_per_bound(rows, errors).items()}}


def _collective_choices(rows: list[dict[str, Any]], errors: dict[str, float]) -> dict[str, Any]:
    return {"lossy": {bound: r["codec"] for bound, r in _fastest_per_bound(rows, errors).items()}}


def _breakpoints(by_size: dict[int, list[dict[str, Any]]],
                 choices: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> list[dict[str, Any]]:
    """One breakpoint per measured size with an exact row, `choices(rows)` its content, reaching up
    to the geometric mean of it and the next measured size; equal neighbours merged."""
    sizes = sorted(by_size)
    entries = []
    for i, size in enumerate(sizes):
        rows = by_size[size]
        if not any(r["codec"] in EXACT_CODECS for r in rows):
            continue  # a size without an exact measurement cannot anchor a breakpoint
        limit = math.isqrt(size * sizes[i + 1]) if i + 1 < len(sizes) else None
        entries.append({"max_bytes": limit, **choices(rows)})
    return _merged(entries)


def _merged(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop a breakpoint when the next one makes the same choices (it then covers both)."""
    def choices(entry: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in entry.items() if k != "max_bytes"}

    merged: list[dict[str, Any]] = []
    for entry in entries:
        if merged and choices(merged[-1]) == choices(entry):
            merged[-1] = entry
        else:
            merged.append(entry)
    if merged:
        merged[-1] = {**merged[-1], "max_bytes": None}
    return merged


def save_table(data: dict[str, Any], path: Path) -> Path:
    """Validate and write a table (atomically), creating the folder; return the path."""
    table_from_dict(data)  # never write what load_table would reject
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".part")
    partial.write_text(table_to_json(data))
    partial.replace(path)
    return path


def table_to_json(data: dict[str, Any]) -> str:
    """JSON text with one breakpoint per line, so a table reads (and diffs) as a table."""
    return "{\n" + ",\n".join(_json_lines(json.dumps(k), v, 1, k in ("dtypes", "collectives"))
                               for k, v in data.items()) + "\n}\n"


def _json_lines(key: str, value: Any, depth: int, nested: bool) -> str:
    """`key: value` indented by `depth`; a nested dict (dtypes, collectives) opens one level per
    line down to its breakpoint lists, which take one breakpoint per line."""
    pad = " " * depth
    if isinstance(value, list) and nested:
        return "\n".join([f"{pad}{key}: ["] + [f"{pad} {json.dumps(e)}" + ("," if i + 1 < len(value) else "")
                                                for i, e in enumerate(value)] + [f"{pad}]"])
    if isinstance(value, dict) and nested:
        inner = ",\n".join(_json_lines(json.dumps(k), v, depth + 1, True) for k, v in value.items())
        return f"{pad}{key}: {{\n{inner}\n{pad}}}"
    return f"{pad}{key}: {json.dumps(value)}"
