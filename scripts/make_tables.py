"""Writes every published results table (README.md and docs/*.md) from its CSV under results/.

A generated table sits between two markers in the markdown:

    <!-- table: KIND CSV [key=value ...] -->
    | ... |
    <!-- end table -->

and this script replaces what lies between them with the table made from CSV (a path from the
repository root). Kinds:

    summary   all-reduce, a few sizes: NCCL, the fastest exact peer, quickreduce's fastest exact
              method, qr_auto and the codecs (a `quickreduce bench` CSV)
    all-reduce  every all-reduce method at every size (a `quickreduce bench` CSV); methods=a,b,...
    family    one segment collective (collective=reduce_scatter|all_gather|all_to_all), every method
    epilogue  all_reduce_add_rmsnorm against the two-kernel forms and peers (hidden=N for tokens)
    e2e       `quickreduce e2e` speed: ms per prefill / decode step per provider
    moe       `quickreduce bench moe`: part=a2a, the dynamic all-to-all against the host-sized call per
              size; part=layer model=NAME, the MoE layer per tokens and skew against NCCL and qr_host
    accuracy  `quickreduce accuracy --csv`: relative L2 error, measured (predicted), per data/dtype/W
    fidelity  `quickreduce e2e --fidelity --csv`: perplexity and agreement per W and reduction
    engines   tests/gpu/test_engines_gpu.py's timings (QR_ENGINE_TIMES): us per all-reduce through each
              engine's group, its own path and with the plugin per codec start
    bounds    a family CSV's exact and codec calls from min_size against what their bytes allow: the
              larger of the link time (bytes each GPU sends at link_gbs) and the HBM time (bytes each
              GPU reads and writes at hbm_gbs), per collective, codec and size

    python3 scripts/make_tables.py           # rewrite the tables in place
    python3 scripts/make_tables.py --check   # exit 1 and name each table that differs from its CSV

Only the standard library: it runs without quickreduce built (tests/cpu/test_published_tables.py).
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = re.compile(r"^<!-- table: (.+?) -->\s*$")
END = "<!-- end table -->"

SUMMARY_SIZES = ["8K", "128K", "1M", "4M", "16M", "64M", "256M", "1G"]
CODECS = ["qr_int8", "qr_fp8", "qr_int6", "qr_int6h", "qr_int4", "qr_int4h", "qr_fp4"]
EXACT = {"qr_one_shot": "one-shot", "qr_two_shot": "two-shot", "qr_rs_ag": "rs_ag", "qr_lossless": "lossless"}
PEER_NAMES = {"trtllm_one_shot_pdl": "TRT-LLM PDL", "trtllm_one_shot": "TRT-LLM", "trtllm_two_shot": "TRT-LLM 2-shot",
              "vllm_custom": "vLLM", "symm_mem_two_shot": "symm_mem 2-shot", "symm_mem_one_shot": "symm_mem 1-shot",
              "symm_mem": "symm_mem", "nccl_symm": "NCCL symm", "nccl": "NCCL"}
ALL_REDUCE_ORDER = ["nccl", "nccl_copy", "nccl_symm", "symm_mem_one_shot", "symm_mem_two_shot", "vllm_custom", "trtllm_one_shot",
                    "trtllm_one_shot_pdl", "trtllm_two_shot", "qr_one_shot", "qr_two_shot", "qr_rs_ag", "qr_lossless",
                    "qr_auto",
                    "flashinfer_fp8"] + CODECS + ["qr_auto_int4"]
NOT_A_PEER = {"nccl_copy", "flashinfer_fp8"}  # NCCL after a copy is auto's route, not a peer; FlashInfer's fp8 is lossy
DATASETS = ["gaussian", "student_t", "llm"]
ACCURACY_CODECS = ["passthrough", "fp8", "int8", "int6", "int6h", "int4", "int4h", "fp4"]
EXACT_NAMES = {"bf16", "fp16", "fp32", "passthrough"}


# --------------------------------------------------------------------------- reading

def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def human_size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def times(rows: list[dict[str, str]], collective: str) -> dict[tuple[int, str], float]:
    """(size, method) -> us per call, for one collective's rows that have a time (a failed method has none)."""
    out = {}
    for r in rows:
        if (r.get("collective") or "all_reduce") == collective and r.get("time_us"):
            out[(int(r["size_bytes"]), r["method"])] = float(r["time_us"])
    return out


def lossy_methods(rows: list[dict[str, str]]) -> set[str]:
    return {r["method"] for r in rows if r.get("lossy") == "yes"}


def cell(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t:.0f}" if t >= 1000 else f"{t:.1f}" if t >= 10 else f"{t:.2f}"


def ordered(methods: set[str], order: list[str]) -> list[str]:
    return [m for m in order if m in methods] + sorted(methods - set(order))


def markdown(header: list[str], rows: list[list[str]], align: str = "---:") -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align for _ in header) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


# --------------------------------------------------------------------------- kinds

def summary_table(rows, sizes: str = ",".join(SUMMARY_SIZES)) -> list[str]:
    """A row a size: NCCL, the fastest exact peer, our fastest exact method, `auto`, the codecs."""
    t = times(rows, "all_reduce")
    lossy = lossy_methods(rows)
    codecs = [c for c in CODECS if any(m == c for _, m in t)]
    header = ["size", "NCCL", "best exact peer", "qr best exact", "qr_auto"] + codecs
    body = []
    for size in (parse_size(s) for s in sizes.split(",")):
        row = {m: v for (s, m), v in t.items() if s == size}
        if not row:
            continue
        peers = {m: v for m, v in row.items() if not m.startswith("qr_") and m not in NOT_A_PEER and m not in lossy}
        peer = min(peers, key=peers.get) if peers else None
        ours = [m for m in EXACT if m in row]
        best = min(ours, key=row.get) if ours else None
        body.append([human_size(size), cell(row.get("nccl")),
                     f"{cell(row[peer])} ({PEER_NAMES.get(peer, peer)})" if peer else "-",
                     f"{cell(row[best])} ({EXACT[best]})" if best else "-",
                     cell(row.get("qr_auto"))] + [cell(row.get(c)) for c in codecs])
    return markdown(header, body)


def all_reduce_table(rows, methods: str | None = None) -> list[str]:
    t = times(rows, "all_reduce")
    present = {m for _, m in t}
    columns = [m for m in methods.split(",") if m in present] if methods else ordered(present, ALL_REDUCE_ORDER)
    sizes = sorted({s for s, _ in t})
    return markdown(["size"] + columns, [[human_size(s)] + [cell(t.get((s, m))) for m in columns] for s in sizes])


def family_table(rows, collective: str) -> list[str]:
    t = times(rows, collective)
    order = ["nccl", "nccl_symm", "symm_mem", "qr_passthrough", "qr_lossless"] + CODECS
    columns = ordered({m for _, m in t}, order)
    sizes = sorted({s for s, _ in t})
    return markdown(["size"] + columns, [[human_size(s)] + [cell(t.get((s, m))) for m in columns] for s in sizes])


def epilogue_table(rows, hidden: str | None = None) -> list[str]:
    """The fused call and its two-kernel forms per size; the plain all-reduce's `qr_auto` beside them."""
    t = times(rows, "all_reduce_add_rmsnorm")
    plain = times(rows, "all_reduce")
    order = ["nccl_unfused", "trtllm_fused", "qr_unfused_passthrough", "qr_fused_passthrough", "qr_unfused_lossless",
             "qr_fused_lossless"] + [f"qr_fused_{c[3:]}" for c in CODECS] + ["qr_unfused_int4"]
    columns = ordered({m for _, m in t}, order)
    sizes = sorted({s for s, _ in t})
    header = ["size"] + (["tokens"] if hidden else []) + ["all-reduce alone (qr_auto)"] + columns
    body = []
    for s in sizes:
        tokens = [str(s // (2 * int(hidden)))] if hidden else []
        body.append([human_size(s)] + tokens + [cell(plain.get((s, "qr_auto")))] + [cell(t.get((s, m))) for m in columns])
    return markdown(header, body)


def e2e_table(rows) -> list[str]:
    """ms per prefill (tokens) or decode step (batch) per provider; the all-reduce's share in brackets."""
    providers = list(dict.fromkeys(r["provider"] for r in rows))
    keys = list(dict.fromkeys((r["phase"], int(r["size"])) for r in rows))
    keys.sort(key=lambda k: (k[0] != "prefill", k[1]))
    by = {(r["phase"], int(r["size"]), r["provider"]): r for r in rows}
    body = []
    for phase, size in keys:
        cells = []
        for p in providers:
            r = by.get((phase, size, p))
            if r is None or not r["time_ms"]:
                cells.append("-")
                continue
            share = f" ({100 * float(r['comm_share']):.1f}%)" if r.get("comm_share") and p != "no_comm" else ""
            cells.append(f"{float(r['time_ms']):.3f}{share}")
        body.append([phase, str(size)] + cells)
    return markdown(["phase", "tokens / batch"] + providers, body)


MOE_LAYER_METHODS = ["qr_graph", "qr_graph:fp8", "qr_graph:int4", "qr_host", "nccl"]
SKEWS = ["even", "skewed", "uniform", "mild", "heavy"]


def _skew_key(skew: str):
    return (SKEWS.index(skew) if skew in SKEWS else len(SKEWS), skew)


def moe_table(rows, part: str = "layer", model: str | None = None) -> list[str]:
    """`quickreduce bench moe --csv`. part=a2a: per size (bytes a rank) and skew, all_to_all_dynamic's and
    the host-sized all_to_all's us and their ratio. part=layer: per tokens a rank and router skew, the
    layer's us per method (model=NAME: one model; else a model column) and NCCL's and qr_host's time over
    qr_graph's."""
    if part == "a2a":
        rows = [r for r in rows if r["part"] == "a2a"]
        skews = sorted({r["skew"] for r in rows}, key=_skew_key)
        by = {(int(r["bytes"]), r["skew"]): r for r in rows}
        header = ["size a rank"]
        for s in skews:
            header += [f"{s}: dynamic", f"{s}: host-sized", f"{s}: ratio"]
        body = []
        for size in sorted({k[0] for k in by}):
            line = [human_size(size)]
            for s in skews:
                r = by.get((size, s))
                line += [cell(float(r["dynamic_us"])), cell(float(r["host_sized_us"])), f"{float(r['ratio']):.3f}"] \
                    if r else ["-", "-", "-"]
            body.append(line)
        return markdown(header, body)
    if part != "layer":
        raise ValueError(f"moe tables have part=a2a or part=layer, got part={part!r}")
    rows = [r for r in rows if r["part"] == "layer" and (model is None or r["model"] == model) and r.get("us")]
    t = {(r["model"], int(r["tokens"]), r["skew"], r["method"]): float(r["us"]) for r in rows}
    methods = ordered({k[3] for k in t}, MOE_LAYER_METHODS)
    keys = sorted({k[:3] for k in t}, key=lambda k: (k[0], k[1], _skew_key(k[2])))
    header = ([] if model else ["model"]) + ["tokens a rank", "skew"] + methods + ["nccl / qr_graph", "qr_host / qr_graph"]
    body = []
    for key in keys:
        graph = t.get((*key, "qr_graph"))

        def ratio(m):
            v = t.get((*key, m))
            return f"{v / graph:.2f}x" if v and graph else "-"

        body.append(([] if model else [key[0]]) + [str(key[1]), key[2]] + [cell(t.get((*key, m))) for m in methods]
                    + [ratio("nccl"), ratio("qr_host")])
    return markdown(header, body)


def _sci(value: str) -> str:
    return f"{float(value):.2e}"


def accuracy_table(rows, codecs: str = ",".join(ACCURACY_CODECS)) -> list[str]:
    """One line per (data, dtype, W); cells 'measured (predicted)' relative L2 error."""
    names = codecs.split(",")
    cells = {}
    for r in rows:
        codec = "passthrough" if r["codec"] in EXACT_NAMES else r["codec"]
        cells[(r["data"], r["dtype"], int(r["world_size"]), codec)] = r
    keys = sorted({k[:3] for k in cells}, key=lambda k: (DATASETS.index(k[0]) if k[0] in DATASETS else 99, k[1], k[2]))
    body = []
    for d, dtype, w in keys:
        vals = []
        for c in names:
            r = cells.get((d, dtype, w, c))
            vals.append(f"{_sci(r['rel_l2'])} ({_sci(r['predicted_rel_l2'])})" if r else "")
        body.append([d, dtype, str(w)] + vals)
    return markdown(["data", "dtype", "W"] + names, body, align="---")


def fidelity_table(rows) -> list[str]:
    """The format of quickreduce.e2e.fidelity.format_markdown, from its CSV."""
    head = ["W", "reduction", "perplexity", "ppl change", "top-1 agree", "KL (nats)", "greedy identical",
            "tokens before 1st diff", "reduction rel err", "synthetic rel err"]
    body = []

    def err(v: str) -> str:
        return "-" if v in ("", None) else "0" if float(v) == 0 else f"{float(v):.2e}"

    for r in rows:
        w = int(r["world_size"])
        if w == 1:
            body.append(["1", f"**{r['reduction']}**", f"{float(r['perplexity']):.4f}"] + [""] * 7)
            continue
        name = "**exact** (vs unsharded)" if r["reduction"] == "exact" else r["reduction"]
        change = float(r["ppl_rel_change"])
        body.append([str(w), name, f"{float(r['perplexity']):.4f}", "0" if change == 0 else f"{100 * change:+.3f}%",
                     f"{100 * float(r['top1_agreement']):.2f}%", f"{float(r['kl_mean']):.2e}",
                     f"{r['greedy_identical']}/{r['prompts']}", f"{100 * float(r['greedy_prefix_share']):.1f}%",
                     err(r.get("reduction_rel_err")), err(r.get("synthetic_rel_err"))])
    lines = markdown(head, body)
    lines[1] = "|---:|---|" + "---:|" * (len(head) - 2)
    return lines


ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
EXACT_ENGINE_CODECS = {"fp", "fp16", "bf16"}  # the FP start: the exact path


def _codec_bits(codec: str) -> int:
    """Bits a value of the codec in a name like 'auto:int8' (0 where none is named): wider first."""
    digits = "".join(ch for ch in codec.split(":")[-1] if ch.isdigit())
    return int(digits) if digits else 0


def engines_table(rows, dtype: str = "bf16") -> list[str]:
    """Per size: each engine's own all-reduce and the same call with the plugin, one column per codec
    start (FP, then the lossy bounds as the plugin planned them, e.g. auto:int8)."""
    rows = [r for r in rows if r["dtype"] == dtype]
    t = {(r["engine"], r["path"], r["codec"], int(r["size_bytes"])): float(r["us_per_call"]) for r in rows}
    columns = []
    for engine in [e for e in ENGINE_NAMES if any(k[0] == e for k in t)]:
        columns.append((f"{ENGINE_NAMES[engine]}'s path", (engine, "engine", "")))
        codecs = sorted({k[2] for k in t if k[0] == engine and k[1] == "quickreduce"},
                        key=lambda c: (c not in EXACT_ENGINE_CODECS, -_codec_bits(c), c))
        for codec in codecs:
            label = "FP" if codec in EXACT_ENGINE_CODECS else codec
            columns.append((f"{ENGINE_NAMES[engine]} + quickreduce ({label})", (engine, "quickreduce", codec)))
    sizes = sorted({k[3] for k in t})
    body = [[human_size(size)] + [cell(t.get((*key, size))) for _, key in columns] for size in sizes]
    return markdown(["size"] + [name for name, _ in columns], body)


def codec_bits(root: Path = ROOT) -> dict[str, float]:
    """Bits a value on the wire per codec name, from the codec registry (csrc/codecs/codec_list.hpp:
    bits_per_value_x4, the 16-bit scale per 32 values included)."""
    text = (root / "csrc" / "codecs" / "codec_list.hpp").read_text()
    return {name: int(bits4) / 4 for name, bits4 in re.findall(r'QR_CODEC\(\w+, "(\w+)", \d+, \w+, (\d+),', text)}


def bounds_table(rows, min_size: str = "64M", link_gbs: str = "370", hbm_gbs: str = "4000") -> list[str]:
    """Per collective and codec (the exact call first), at each size from min_size: "us / bound us (its
    share)". A GPU sends (W-1)/W of the message, each value in the codec's bits (exact: the dtype's;
    the family sends lossless as the passthrough); it reads its input and the payload that lands in
    its memory and writes that payload and its output (reduce-scatter: S + 2E + S/W, all-gather:
    S/W + 2E + S, all-to-all: 2S + 2E, for a message of S bytes and E bytes sent)."""
    bits = codec_bits()
    W = int(rows[0]["world_size"])
    value_bits = {"bf16": 16, "fp16": 16, "fp32": 32}[rows[0]["dtype"]]
    link, hbm = float(link_gbs) * 1e3, float(hbm_gbs) * 1e3  # bytes per us
    sizes = sorted({int(r["size_bytes"]) for r in rows if int(r["size_bytes"]) >= parse_size(min_size)})
    body = []
    for collective in ("reduce_scatter", "all_gather", "all_to_all"):
        t = times(rows, collective)
        if not t:
            continue
        for method in ["qr_passthrough"] + [c for c in CODECS if any(m == c for _, m in t)]:
            wire_bits = value_bits if method == "qr_passthrough" else bits[method[3:]]
            cells = []
            for S in sizes:
                sent = (W - 1) / W * S * wire_bits / value_bits
                moved = {"reduce_scatter": S + 2 * sent + S / W, "all_gather": S / W + 2 * sent + S,
                         "all_to_all": 2 * S + 2 * sent}[collective]
                bound = max(sent / link, moved / hbm)
                us = t.get((S, method))
                cells.append(f"{cell(us)} / {cell(bound)} ({100 * bound / us:.0f}%)" if us else "-")
            body.append([collective.replace("_", "-"), method[3:]] + cells)
    return markdown(["collective", "codec"] + [human_size(s) for s in sizes], body)


KINDS = {"summary": summary_table, "all-reduce": all_reduce_table, "family": family_table,
         "epilogue": epilogue_table, "e2e": e2e_table, "moe": moe_table, "accuracy": accuracy_table,
         "fidelity": fidelity_table, "engines": engines_table, "bounds": bounds_table}


# --------------------------------------------------------------------------- markdown files

def make_table(spec: str, root: Path) -> list[str]:
    kind, path, *options = spec.split()
    if kind not in KINDS:
        raise ValueError(f"unknown table kind {kind!r} (known: {', '.join(KINDS)})")
    kwargs = dict(option.split("=", 1) for option in options)
    return KINDS[kind](read_rows(root / path), **kwargs)


def render(text: str, root: Path, name: str = "") -> str:
    """The markdown with every marked table regenerated."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        match = START.match(lines[i])
        out.append(lines[i])
        i += 1
        if not match:
            continue
        end = next((j for j in range(i, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            raise ValueError(f"{name}: '{match.group(0)}' has no '{END}'")
        out += make_table(match.group(1), root)
        i = end
    return "\n".join(out)


def markdown_files(root: Path) -> list[Path]:
    return [p for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))] if p.exists()]


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs from its CSV")
    args = parser.parse_args(argv)
    stale = []
    for path in markdown_files(root):
        text = path.read_text()
        new = render(text, root, str(path.relative_to(root)))
        if new != text:
            stale.append(str(path.relative_to(root)))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print("tables out of date with their CSVs (run python3 scripts/make_tables.py): " + ", ".join(stale))
        return 1
    if not args.check:
        print("rewrote " + (", ".join(stale) if stale else "nothing (every table is up to date)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
