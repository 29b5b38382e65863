"""Tables, CSV and plot of `quickreduce e2e` speed results; no GPU needed (rows are plain dicts).

A row is one (provider, phase, size): phase "prefill" (size = prompt tokens, one sequence) or
"decode" (size = batch, one token per sequence), time_ms per prefill or per decode step.
`complete_rows` adds tokens/s, the all-reduce share (against the `no_comm` row of the same
phase and size) and the speed-up over NCCL.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Iterable

from .providers import PROVIDERS

NO_COMM = "no_comm"
PHASES = ("prefill", "decode")
CSV_COLUMNS = ["phase", "size", "provider", "time_ms", "tokens_per_s", "comm_share", "vs_nccl", "lossy",
               "model", "layers", "world_size", "device", "dtype", "context", "shared_gpu"]
_ORDER = {name: i for i, name in enumerate([NO_COMM, *PROVIDERS])}


def complete_rows(rows: list[dict[str, Any]], **common: Any) -> list[dict[str, Any]]:
    """Rows sorted (phase, size, provider) with tokens_per_s, comm_share and vs_nccl filled in,
    plus the `common` columns (model, world_size, ...)."""
    base = {(r["phase"], r["size"], r["provider"]): r["time_ms"] for r in rows}
    out = []
    for r in rows:
        row = {**common, **r}
        ms = r["time_ms"]
        tokens = r["size"]  # prefill: the prompt's tokens; decode: one token per sequence
        row["tokens_per_s"] = tokens / (ms / 1e3) if ms > 0 else None
        no_comm = base.get((r["phase"], r["size"], NO_COMM))
        row["comm_share"] = (max(0.0, 1.0 - no_comm / ms) if no_comm is not None and ms > 0
                             and r["provider"] != NO_COMM else None)
        nccl = base.get((r["phase"], r["size"], "nccl"))
        row["vs_nccl"] = nccl / ms if nccl is not None and ms > 0 and r["provider"] != NO_COMM else None
        out.append(row)
    out.sort(key=lambda r: (PHASES.index(r["phase"]), r["size"], _ORDER.get(r["provider"], len(_ORDER))))
    return out


def _fmt(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kind == "ms":
        return f"{value:.3f}" if value < 100 else f"{value:.1f}"
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "share":
        return f"{100 * value:.1f}%"
    if kind == "speedup":
        return f"{value:.2f}x"
    return str(value)


_FIELDS = [("phase", "phase", 8, "str"), ("size", "tokens|batch", 12, "int"), ("provider", "provider", 18, "str"),
           ("time_ms", "time_ms", 9, "ms"), ("tokens_per_s", "tokens/s", 11, "rate"),
           ("comm_share", "allreduce", 9, "share"), ("vs_nccl", "vs_nccl", 7, "speedup")]


def format_table(rows: list[dict[str, Any]]) -> str:
    """nccl-tests-like plain text: one line per (phase, size, provider), a blank line between sizes.
    time_ms is per prefill (time to first token) or per decode step; allreduce is its share."""
    def line(cells: list[str]) -> str:
        parts = [c.ljust(w) if kind == "str" else c.rjust(w) for (_, _, w, kind), c in zip(_FIELDS, cells)]
        return "  " + "  ".join(parts).rstrip()

    out = ["#" + line([h for _, h, _, _ in _FIELDS])[1:]]  # nccl-tests marks its header with '#'
    previous = None
    for r in rows:
        key = (r["phase"], r["size"])
        if previous is not None and key != previous:
            out.append("")
        previous = key
        out.append(line([_fmt(r.get(col), kind) for col, _, _, kind in _FIELDS]))
    return "\n".join(out)


def format_grid(rows: list[dict[str, Any]], phase: str) -> str:
    """size x provider grid of time_ms for one phase; '*' marks the fastest exact provider."""
    mine = [r for r in rows if r["phase"] == phase]
    if not mine:
        return ""
    sizes = sorted({r["size"] for r in mine})
    providers = sorted({r["provider"] for r in mine}, key=lambda p: _ORDER.get(p, len(_ORDER)))
    times = {(r["size"], r["provider"]): r for r in mine}
    width = max(9, *(len(p) for p in providers)) + 2
    label = "tokens" if phase == "prefill" else "batch"
    out = [f"{phase} time_ms ('*' fastest exact provider)", label.rjust(6) + "".join(p.rjust(width) for p in providers)]
    for size in sizes:
        exact = [(times[(size, p)]["time_ms"], p) for p in providers
                 if (size, p) in times and p != NO_COMM and not times[(size, p)].get("lossy")]
        best = min(exact)[1] if exact else None
        cells = []
        for p in providers:
            r = times.get((size, p))
            text = "-" if r is None else _fmt(r["time_ms"], "ms") + ("*" if p == best else "")
            cells.append(text.rjust(width))
        out.append(str(size).rjust(6) + "".join(cells))
    return "\n".join(out)


def format_checks(checks: list[dict[str, Any]], rounding_text: str | None) -> str:
    if not checks:
        return ""
    out = ["token check (greedy tokens against the exact float64 reduction):"]
    for c in checks:
        verdict = {True: "ok  ", False: "FAIL", None: "info"}[c["ok"]]
        graph = "" if c["graph_equals_eager"] is None else \
            f", graph==eager {'yes' if c['graph_equals_eager'] else 'NO'}"
        same = c["tokens"] - c["differ_from_exact"]
        out.append(f"  {verdict} {c['provider']:<18} {same}/{c['tokens']} tokens as exact, "
                   f"fp32 rank-order {'yes' if c['equal_fp32_order'] else 'no'}{graph}: {c['why']}")
    if rounding_text:
        out.append("  exact run: " + rounding_text)
    return "\n".join(out)


def checks_passed(checks: Iterable[dict[str, Any]]) -> bool:
    return all(c["ok"] is not False for c in checks)


def write_csv(rows: list[dict[str, Any]], path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if r.get(k) is None else
                                 f"{r[k]:.6g}" if isinstance(r.get(k), float) else r[k]) for k in CSV_COLUMNS})
    return path


def read_csv(path: Path | str) -> list[dict[str, Any]]:
    numeric = {"size": int, "time_ms": float, "tokens_per_s": float, "comm_share": float, "vs_nccl": float,
               "layers": int, "world_size": int, "context": int}
    rows = []
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, Any] = {}
            for k, v in raw.items():
                if v in ("", None):
                    row[k] = None
                elif k in numeric:
                    row[k] = numeric[k](v)
                elif k in ("lossy", "shared_gpu"):
                    row[k] = v == "True"
                else:
                    row[k] = v
            rows.append(row)
    return rows


def plot(rows: list[dict[str, Any]], path: Path | str, title: str, note: str | None = None) -> Path:
    """Two panels: prefill time vs prompt tokens, decode step time vs batch (log-log), one line
    per provider (lossy ones dashed), the no-communication floor in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, phase, xlabel, ylabel in ((axes[0], "prefill", "prompt tokens (one sequence)", "time to first token, ms"),
                                      (axes[1], "decode", "batch (sequences)", "decode step, ms (CUDA graph)")):
        mine = [r for r in rows if r["phase"] == phase]
        providers = sorted({r["provider"] for r in mine}, key=lambda p: _ORDER.get(p, len(_ORDER)))
        for p in providers:
            pts = sorted((r["size"], r["time_ms"]) for r in mine if r["provider"] == p)
            lossy = any(r.get("lossy") for r in mine if r["provider"] == p)
            style = dict(color="0.6", linestyle=":", marker=None) if p == NO_COMM else \
                dict(linestyle="--" if lossy else "-", marker="o", markersize=3)
            ax.plot([x for x, _ in pts], [y for _, y in pts], label=p, **style)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(phase)
        ax.grid(True, which="both", alpha=0.3)
        if note:
            ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=11,
                    color="red", alpha=0.5, rotation=20, wrap=True)
    axes[1].legend(fontsize=8, loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
