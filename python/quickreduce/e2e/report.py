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


# Plot colours: exact providers in cool hues (NCCL, the reference, in neutral grey), lossy ones
# (quickreduce codecs) in warm hues and hatched; assigned in table order within each family.
_EXACT_COLOURS = ["#1f77b4", "#9ecae1", "#2ca02c", "#a1d99b", "#6a3d9a", "#bcabe0", "#17becf", "#9edae5",
                  "#393b79", "#637939"]
_LOSSY_COLOURS = ["#e6550d", "#d62728", "#fdae6b", "#8c564b", "#e377c2", "#bcbd22", "#ff9896", "#c49c94",
                  "#f7b6d2"]
_NCCL_COLOUR = "#525252"


def _panels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (phase, size) with a no_comm row: its no_comm time, each provider's extra time
    over it in % (negative when a run beat the no-communication one: noise) and the fastest exact one."""
    panels = []
    for phase in PHASES:
        mine = [r for r in rows if r["phase"] == phase]
        for size in sorted({r["size"] for r in mine}):
            times = {r["provider"]: r for r in mine if r["size"] == size}
            base = times.get(NO_COMM)
            if base is None or not base["time_ms"]:
                continue
            extra = {p: 100.0 * (r["time_ms"] / base["time_ms"] - 1.0) for p, r in times.items() if p != NO_COMM}
            exact = [(r["time_ms"], p) for p, r in times.items() if p != NO_COMM and not r.get("lossy")]
            panels.append({"phase": phase, "size": size, "no_comm_ms": base["time_ms"], "extra": extra,
                           "best_exact": min(exact)[1] if exact else None})
    return panels


def _size_label(phase: str, size: int) -> str:
    if phase == "prefill":
        return f"{size // 1024}k tokens" if size % 1024 == 0 else f"{size} tokens"
    return f"batch {size}"


def figure(rows: list[dict[str, Any]], title: str, note: str | None = None):
    """The speed plot as a matplotlib Figure: a row of panels per phase (prefill above, decode
    below), one panel per size; in each, one horizontal bar per provider (the same rows in every
    panel) for its step time over the no-communication run, in % on a linear axis, with its value;
    exact providers first in cool colours (NCCL grey), lossy ones below on a shaded band in warm
    hatched colours; a dashed line at NCCL's value and a black edge and star on the fastest exact
    provider. The no_comm time is in each panel's title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    panels = _panels(rows)
    lossy = {r["provider"]: bool(r.get("lossy")) for r in rows if r["provider"] != NO_COMM}
    names = sorted(lossy, key=lambda p: _ORDER.get(p, len(_ORDER)))
    exact_names = [p for p in names if not lossy[p]]
    lossy_names = [p for p in names if lossy[p]]
    colour = {p: _EXACT_COLOURS[i % len(_EXACT_COLOURS)] for i, p in enumerate(q for q in exact_names if q != "nccl")}
    colour.update({p: _LOSSY_COLOURS[i % len(_LOSSY_COLOURS)] for i, p in enumerate(lossy_names)})
    colour["nccl"] = _NCCL_COLOUR
    # y positions, top to bottom: exact providers, a gap, lossy providers
    ypos = {p: i for i, p in enumerate(exact_names)}
    ypos.update({p: len(exact_names) + 0.6 + i for i, p in enumerate(lossy_names)})
    ymax = max(ypos.values(), default=0)

    by_phase = [(ph, [pn for pn in panels if pn["phase"] == ph]) for ph in PHASES]
    by_phase = [(ph, pns) for ph, pns in by_phase if pns] or [("no data", [])]
    columns = max(len(pns) for _, pns in by_phase) or 1
    row_height = 1.3 + 0.3 * (ymax + 1)
    fig = plt.figure(figsize=(max(9.0, 1.7 + 2.6 * columns), row_height * len(by_phase) + 0.9),
                     layout="constrained")
    subfigs = fig.subfigures(len(by_phase), 1, hspace=0.03, squeeze=False)[:, 0]
    headings = {"prefill": "prefill: time to first token, one sequence",
                "decode": "decode: one step (CUDA graph), one token per sequence"}
    for sub, (phase, pns) in zip(subfigs, by_phase):
        axes = sub.subplots(1, columns, sharey=True, squeeze=False)[0]
        for ax in axes[len(pns):]:
            ax.set_axis_off()
        for ax, pn in zip(axes, pns):
            extra = pn["extra"]
            vals = list(extra.values())
            lo, hi = min(0.0, *vals), max(0.0, *vals)
            span = (hi - lo) or 1.0
            if lossy_names:
                ax.axhspan(len(exact_names) - 0.2, ymax + 0.7, color="#fff4e8", zorder=0, lw=0)
            for p, v in extra.items():
                best = p == pn["best_exact"]
                ax.barh(ypos[p], v, height=0.72, color=colour[p], edgecolor="black" if best else "none",
                        linewidth=1.4, hatch="///" if lossy[p] else None, zorder=2)
                # the value right of the bar (right of 0 for a negative one, whose bar runs left)
                ax.text(max(v, 0.0) + 0.015 * span, ypos[p], f"{v:+.1f}%" + (" \u2605" if best else ""),
                        ha="left", va="center", fontsize=8, fontweight="bold" if best else "normal", zorder=5,
                        bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=0.3))
            if "nccl" in extra:
                ax.axvline(extra["nccl"], color=_NCCL_COLOUR, linestyle="--", linewidth=1.1, zorder=4)
            ax.axvline(0.0, color="black", linewidth=0.8, zorder=4)
            ax.set_xlim(lo - 0.04 * span, hi + 0.3 * span)
            ax.set_ylim(ymax + 0.7, -0.7)
            ax.xaxis.set_major_formatter(lambda x, _: f"{x:g}%")
            ax.grid(True, axis="x", alpha=0.3, zorder=0)
            ax.tick_params(axis="y", length=0)
            ax.set_title(f"{_size_label(phase, pn['size'])}  (no comm: {pn['no_comm_ms']:.3g} ms)", fontsize=10)
            if note:
                ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=11,
                        color="red", alpha=0.5, rotation=30, wrap=True, zorder=6)
        axes[0].set_yticks([ypos[p] for p in names], names, fontsize=9)
        sub.suptitle(headings.get(phase, phase), fontsize=11, fontweight="bold")
        sub.supxlabel("step time over the no-communication run, % (the all-reduce's cost)", fontsize=9)
    handles = [Patch(facecolor="#9ecae1", label="exact providers"),
               Patch(facecolor="#fdae6b", hatch="///", label="lossy (quickreduce codecs)"),
               Line2D([], [], color=_NCCL_COLOUR, linestyle="--", label="NCCL (reference)"),
               Line2D([], [], color="none", marker="$\u2605$", markersize=9, markeredgecolor="black",
                      markerfacecolor="black", label="fastest exact provider")]
    if any(v < 0 for pn in panels for v in pn["extra"].values()):
        handles.append(Line2D([], [], color="none", label="bar below 0%: faster than the no-comm run (noise)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles) if columns >= 4 else 3, fontsize=9,
               frameon=False)
    fig.suptitle(f"{title}\nall-reduce cost per provider: shorter bar = faster, 0% = no communication",
                 fontsize=12)
    return fig


def plot(rows: list[dict[str, Any]], path: Path | str, title: str, note: str | None = None) -> Path:
    """Write `figure(rows, title, note)` as a PNG at `path`."""
    import matplotlib.pyplot as plt

    fig = figure(rows, title, note)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
