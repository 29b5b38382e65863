"""Plots of benchmark results (matplotlib, imported when a plot is drawn): `plot` draws three panels
per collective; `best_lossless_vs_peers` is quickreduce's fastest lossless method against the fastest
lossless peer per size. Rows are report.py's."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from .report import (COLLECTIVE_TITLES, COMPANION_PREFIX, baseline_method, human_size, is_lossy, is_quickreduce,
                     method_rank, split_by_collective)

# Colour families: quickreduce is blue (the lossy codecs: navy for 8 bits, mid blue for 6, teal for
# 4; int codecs solid, fp codecs dashed, rotated codecs dash-dotted, auto dotted), NCCL black, torch
# symm_mem grey, vLLM brown, TensorRT-LLM red/orange/pink, FlashInfer olive. The epilogue's
# qr_fused_<codec> / qr_unfused_<codec> rows take qr_<codec>'s colour, the unfused ones dotted.
QR_BEST_COLOR = "#1f77b4"
_COLORS = {
    "nccl": "black", "nccl_copy": "#555555", "nccl_symm": "#333333", "symm_mem_one_shot": "#7f7f7f", "symm_mem_two_shot": "#b0b0b0",
    "vllm_custom": "#8c564b", "trtllm_one_shot": "#d62728", "trtllm_one_shot_pdl": "#ff7f0e",
    "trtllm_two_shot": "#e377c2", "flashinfer_fp8": "#a6a31a",
    "qr_one_shot": "#6baed6", "qr_two_shot": "#9ecae1", "qr_rs_ag": "#c6dbef", "qr_lossless": "#3182bd", "qr_auto": QR_BEST_COLOR,
    "qr_int8": "#08306b", "qr_fp8": "#08306b", "qr_int6": "#4a7fd0", "qr_int4": "#10a5b5",
    "qr_fp4": "#10a5b5", "qr_auto_int4": "#10a5b5",
    "symm_mem": "#7f7f7f", "qr_passthrough": "#9ecae1",
    "qr_int6h": "#4a7fd0", "qr_int4h": "#10a5b5", "nccl_unfused": "black", "trtllm_fused": "#d62728",
}
_PEER_FALLBACK = ["#9467bd", "#bcbd22", "#c49c94", "#f7b6d2", "#dbdb8d", "#ff9896"]
_QR_FALLBACK = ["#3182bd", "#6baed6", "#2ca0c0", "#5a6ec8"]


def _method_style(method: str, lossy: bool, index: int) -> dict[str, Any]:
    """Colour, line and marker of one method's series (families as described above)."""
    qr = method.startswith("qr_")
    unfused = method.startswith(COMPANION_PREFIX)
    fallback = _QR_FALLBACK if qr else _PEER_FALLBACK
    color = _COLORS.get(re.sub(r"^qr_(un)?fused_", "qr_", method), fallback[index % len(fallback)])
    if not lossy:
        return dict(color=color, linestyle=":" if unfused else "-", marker="o", markersize=3.5,
                    linewidth=1.3)
    codec = method.split("_")[-1]
    linestyle = (":" if "auto" in method or unfused else "--" if codec.startswith("fp")
                 else "-." if codec.endswith("h") else "-")
    marker = {"8": "o", "6": "s", "4": "^"}.get(codec.rstrip("h")[-1:], "x")
    return dict(color=color, linestyle=linestyle, marker=marker, markersize=4,
                linewidth=2.0 if qr else 1.6)


def best_lossless_vs_peers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per size: quickreduce's fastest lossless method against the fastest lossless peer.

    Lossless means the row's `lossy` column (or `is_lossy`) says no; peers are methods not starting
    with 'qr_'; quickreduce's are those `is_quickreduce` names (the epilogue's qr_unfused_* rows are
    neither). One dict per size with 'size', 'qr_method', 'qr_time_us', 'peer_method',
    'peer_time_us' and 'speedup' (peer time / quickreduce time); the qr or peer keys are None (and
    so is 'speedup') at sizes where that side has no timed row. Rows of every dtype are mixed:
    pass one dtype's rows.
    """
    best: dict[tuple[int, bool], tuple[float, str]] = {}
    for row in rows:
        time_us = row.get("time_us")
        method = row["method"]
        if not time_us or is_lossy(method, row) or (method.startswith("qr_") and not is_quickreduce(method)):
            continue
        key = (row["size"], is_quickreduce(method))
        if key not in best or (time_us, row["method"]) < best[key]:
            best[key] = (time_us, row["method"])
    out = []
    for size in sorted({r["size"] for r in rows}):
        qr_time, qr_method = best.get((size, True), (None, None))
        peer_time, peer_method = best.get((size, False), (None, None))
        out.append({"size": size, "qr_method": qr_method, "qr_time_us": qr_time,
                    "peer_method": peer_method, "peer_time_us": peer_time,
                    "speedup": peer_time / qr_time if qr_time and peer_time else None})
    return out


def plot(rows: list[dict[str, Any]], path: Path | str, title: str | None = None,
         note: str | None = None) -> Path:
    """Three panels per collective, of one dtype (rows of a second dtype are ignored), message size
    on a log x axis; with several collectives, one row of three panels for each, in one PNG
    (`note`, e.g. that the ranks shared a GPU, is added to the title):

    1. lossless latency (log-log): quickreduce's fastest lossless method per size (bold blue)
       against every lossless peer;
    2. lossless speedup: the best peer's time over quickreduce's best time per size, one line
       around 1.0 whose markers take the colour of that size's best peer, named where it changes;
    3. lossy speedup over NCCL: each lossy method (the qr codecs, flashinfer_fp8), with
       quickreduce's lossless best as a thin reference (latency instead when there is no NCCL).
    Sizes where a method has no row have no point (lines break there). The epilogue's row of panels
    reads the same with its fused rows as quickreduce's, nccl_unfused in NCCL's place, and the
    qr_unfused_* rows (our all-reduce, then torch's add and RMSNorm) as dotted lines of their own.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("time_us")]
    if not rows:
        raise ValueError("nothing to plot: no timed rows")
    dtype = rows[0].get("dtype")
    rows = [r for r in rows if r.get("dtype") == dtype]
    groups = split_by_collective(rows)
    names = [COLLECTIVE_TITLES.get(c, c) for c, _ in groups]
    if title is None:
        devices = sorted({str(r.get("device")) for r in rows if r.get("device")})
        worlds = sorted({int(r["world_size"]) for r in rows if r.get("world_size")})
        title = (f"{', '.join(names)} on {' / '.join(devices) or 'unknown GPU'}"
                 f" x{'/'.join(map(str, worlds)) or '?'}, {dtype}"
                 " (CUDA-graph median per call)")
    if note:
        title = f"{title}\n{note}"
    fig, axes = plt.subplots(len(groups), 3, figsize=(20, 7.2 * len(groups)),
                             constrained_layout=True, squeeze=False)
    for (collective, mine), row_axes in zip(groups, axes):
        label = None if len(groups) == 1 else COLLECTIVE_TITLES.get(collective, collective)
        _plot_collective(row_axes, mine, collective, label)
    fig.suptitle(title, fontsize=13)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    _to_palette(path)
    return path


def _to_palette(path: Path) -> None:
    """Rewrite a PNG in 256 colours (line plots use a few dozen): a third of the bytes, the same picture."""
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as image:
        palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    palette.save(path, optimize=True)


def _plot_collective(axes, rows: list[dict[str, Any]], collective: str, label: str | None) -> None:
    """plot()'s three panels for the rows of one collective and dtype; `label` (when several
    collectives share the figure) heads each panel's title."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax_time, ax_gain, ax_lossy = axes
    call = COLLECTIVE_TITLES.get(collective, collective)

    def titled(text: str) -> str:
        if label is None:
            return text
        return f"{label}: {text}" if len(label) + len(text) < 72 else f"{label}:\n{text}"  # fits a panel

    sizes = sorted({r["size"] for r in rows})
    times: dict[str, dict[int, float]] = {}
    lossy: dict[str, bool] = {}
    for row in rows:
        times.setdefault(row["method"], {})[row["size"]] = row["time_us"]
        lossy.setdefault(row["method"], is_lossy(row["method"], row))
    methods = sorted(times, key=lambda m: method_rank(m, collective))
    qr_lossless = [m for m in methods if is_quickreduce(m) and not lossy[m]]
    companions = [m for m in methods if m.startswith("qr_") and not is_quickreduce(m) and not lossy[m]]
    peers = [m for m in methods if not m.startswith("qr_") and not lossy[m]]
    lossy_methods = sorted((m for m in methods if lossy[m]), key=lambda m: not m.startswith("qr_"))
    baseline = baseline_method(collective)
    base = "NCCL" if baseline == "nccl" else baseline
    nccl = times.get(baseline, {})
    compare = best_lossless_vs_peers(rows)
    qr_best = {c["size"]: c["qr_time_us"] for c in compare if c["qr_time_us"]}

    def series(values: dict[int, float]) -> list[float]:
        return [values.get(s, math.nan) for s in sizes]  # NaN: no point, the line breaks

    # 1. lossless latency
    if qr_best:
        names = ", ".join(qr_lossless)
        ax_time.plot(sizes, series(qr_best), color=QR_BEST_COLOR, linewidth=3.2, marker="o",
                     markersize=5, zorder=5, label=f"quickreduce, fastest of\n{names}")
    for i, method in enumerate(companions + peers):
        ax_time.plot(sizes, series(times[method]), label=method, **_method_style(method, False, i))
    ax_time.set_yscale("log")
    ax_time.set_ylabel(f"time per {call} (µs, log scale; lower is better)")
    ax_time.set_title(titled("lossless: latency"))
    if not peers and not qr_best and not companions:
        _note(ax_time, "no lossless methods in these rows")

    # 2. lossless speedup of quickreduce's best over the best peer
    points = [c for c in compare if c["speedup"]]
    ax_gain.axhline(1.0, color="black", linewidth=0.9, zorder=1)
    if points:
        ax_gain.plot(sizes, series({c["size"]: c["speedup"] for c in points}),
                     color=QR_BEST_COLOR, linewidth=2.6, zorder=3)
        winners = list(dict.fromkeys(c["peer_method"] for c in points))  # first seen first
        for method in winners:
            mine = [c for c in points if c["peer_method"] == method]
            color = _method_style(method, False, peers.index(method))["color"]  # as in panel 1
            ax_gain.scatter([c["size"] for c in mine], [c["speedup"] for c in mine], s=46,
                            color=color, edgecolors=QR_BEST_COLOR, linewidths=1.2, zorder=4,
                            label=f"best peer: {method}")
        previous = None
        for i, c in enumerate(points):  # name the best peer where it changes
            if c["peer_method"] != previous:
                right = i > 0 and i >= 0.75 * len(points)
                ax_gain.annotate(c["peer_method"], (c["size"], c["speedup"]),
                                 xytext=(4 if right else -4, 9), textcoords="offset points",
                                 ha="right" if right else "left", fontsize=7.5, color="#222222",
                                 zorder=6, bbox=dict(boxstyle="round,pad=0.15", fc="white",
                                                     ec="none", alpha=0.8))
            previous = c["peer_method"]
        low = min(c["speedup"] for c in points)
        high = max(c["speedup"] for c in points)
        pad = max(0.05, 0.12 * (max(high, 1.0) - min(low, 1.0)))
        ax_gain.set_ylim(min(low, 1.0) - pad, max(high, 1.0) + pad)
        ax_gain.axhspan(1.0, ax_gain.get_ylim()[1], color="#2ca02c", alpha=0.06, zorder=0)
        ax_gain.axhspan(ax_gain.get_ylim()[0], 1.0, color="#d62728", alpha=0.06, zorder=0)
        ax_gain.text(0.99, 0.98, "quickreduce faster ↑", transform=ax_gain.transAxes,
                     ha="right", va="top", fontsize=8, color="#2c7a2c")
        ax_gain.text(0.99, 0.02, "best peer faster ↓", transform=ax_gain.transAxes,
                     ha="right", va="bottom", fontsize=8, color="#a02020")
    else:
        missing = "quickreduce lossless" if not qr_best else "lossless peer"
        _note(ax_gain, f"no size with both a quickreduce lossless and a lossless peer row\n"
                       f"(no {missing} rows)")
    ax_gain.set_ylabel("speedup = best peer time / quickreduce time (×)")
    ax_gain.set_title(titled("lossless: quickreduce's best vs the best peer at each size"))

    # 3. lossy codecs
    if nccl:
        ax_lossy.axhline(1.0, color="black", linewidth=1.1, zorder=1)
        reference = {s: nccl[s] / t for s, t in qr_best.items() if s in nccl}
        for i, method in enumerate(lossy_methods):
            speed = {s: nccl[s] / t for s, t in times[method].items() if s in nccl}
            if speed:
                ax_lossy.plot(sizes, series(speed), label=method, **_method_style(method, True, i))
        if reference and lossy_methods:
            ax_lossy.plot(sizes, series(reference), color="#9aa9bd", linewidth=1.4,
                          linestyle="-.", zorder=2, label="quickreduce lossless (best), for reference")
        ax_lossy.set_ylabel(f"speedup over {base} (×, higher is better)")
        ax_lossy.set_title(titled(f"lossy codecs: speedup over {base} ({base} = 1)"))
    else:
        for i, method in enumerate(lossy_methods):
            ax_lossy.plot(sizes, series(times[method]), label=method, **_method_style(method, True, i))
        ax_lossy.set_yscale("log")
        ax_lossy.set_ylabel(f"time per {call} (µs, log scale; lower is better)")
        ax_lossy.set_title(titled(f"lossy codecs: latency (no {base} rows to compare with)"))
    if not lossy_methods:
        ax_lossy.set_title(titled("lossy codecs"))
        _note(ax_lossy, "no lossy methods in these rows")

    tick_sizes = _tick_sizes(sizes)
    for ax in (ax_time, ax_gain, ax_lossy):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, minor=True)
        ax.set_xticks(tick_sizes)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: human_size(int(round(x)))))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 1.4)  # the same range on every panel, empty or not
        ax.set_xlabel("message size (bytes, log scale)")
        ax.grid(True, which="major", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.11),
                      ncol=2, fontsize=8.5, frameon=False)


def _note(ax, text: str) -> None:
    """Say why a panel is empty (and show no y scale on it)."""
    ax.set_yticks([])
    ax.set_yticks([], minor=True)
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=10,
            color="#666666")


def _tick_sizes(sizes: list[int]) -> list[int]:
    """Labelled x ticks: the first size, then each size at least a tenth of the log range further
    (every size when there are ten or fewer)."""
    if len(sizes) <= 10:
        return list(sizes)
    gap = math.log2(sizes[-1] / sizes[0]) / 10
    ticks = [sizes[0]]
    for size in sizes[1:]:
        if math.log2(size / ticks[-1]) >= gap - 1e-9:
            ticks.append(size)
    return ticks
