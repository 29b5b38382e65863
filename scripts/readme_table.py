"""Rewrites README.md's measured tables from their CSVs: the 2x H200 table (bench/results/h200-x2.csv, one
column per method) and the 4x H200 summary (bench/results/h200-x4.csv: NCCL, the best peer, our best exact
method, `auto` and the codecs at a few sizes)."""
import sys
from pathlib import Path

from quickreduce.cli.report import human_size, read_csv

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["nccl", "symm_mem_two_shot", "vllm_custom", "trtllm_one_shot", "trtllm_one_shot_pdl",
           "qr_one_shot", "qr_two_shot", "qr_lossless", "qr_auto", "flashinfer_fp8", "qr_int8", "qr_fp8", "qr_int6",
           "qr_int4", "qr_int4h", "qr_fp4", "qr_auto_int4"]
SUMMARY_SIZES = [8 << 10, 128 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
SUMMARY_CODECS = ["qr_int8", "qr_fp8", "qr_int6", "qr_int4", "qr_int4h", "qr_fp4"]
EXACT = {"qr_one_shot": "one-shot", "qr_two_shot": "two-shot", "qr_lossless": "lossless"}
PEER_NAMES = {"trtllm_one_shot_pdl": "TRT-LLM PDL", "trtllm_one_shot": "TRT-LLM", "vllm_custom": "vLLM",
              "symm_mem_two_shot": "symm_mem 2-shot", "symm_mem_one_shot": "symm_mem 1-shot", "nccl": "NCCL"}


def cell(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t:.0f}" if t >= 1000 else f"{t:.1f}" if t >= 10 else f"{t:.2f}"


def all_reduce_times(csv_path: Path) -> dict[tuple[int, str], float]:
    return {(r["size"], r["method"]): r["time_us"] for r in read_csv(csv_path)
            if r.get("collective", "all_reduce") == "all_reduce" and r["time_us"]}  # the all-reduce's


def wide_table(times: dict[tuple[int, str], float]) -> list[str]:
    sizes = sorted({size for size, _ in times})
    table = ["| bytes | " + " | ".join(COLUMNS) + " |", "|---:|" + "---:|" * len(COLUMNS)]
    return table + [f"| {human_size(s)} | " + " | ".join(cell(times.get((s, c))) for c in COLUMNS) + " |"
                    for s in sizes]


def summary_table(times: dict[tuple[int, str], float]) -> list[str]:
    """A row a size: NCCL, the fastest exact peer, our fastest exact method, `auto`, the codecs."""
    header = ["size", "NCCL", "best peer", "qr best exact", "qr_auto"] + SUMMARY_CODECS
    table = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for size in SUMMARY_SIZES:
        row = {m: t for (s, m), t in times.items() if s == size}
        peers = {m: t for m, t in row.items() if not m.startswith("qr_") and m not in ("flashinfer_fp8", "nccl_copy")}
        peer = min(peers, key=peers.get)
        ours = min((m for m in EXACT if m in row), key=row.get)
        cells = [human_size(size), cell(row.get("nccl")), f"{cell(row[peer])} ({PEER_NAMES.get(peer, peer)})",
                 f"{cell(row[ours])} ({EXACT[ours]})", cell(row.get("qr_auto"))] + [cell(row.get(c)) for c in SUMMARY_CODECS]
        table.append("| " + " | ".join(cells) + " |")
    return table


def replace_table(readme: list[str], header_start: str, table: list[str]) -> None:
    start = next(i for i, line in enumerate(readme) if line.startswith(header_start))
    end = start
    while end < len(readme) and readme[end].startswith("|"):
        end += 1
    readme[start:end] = table


def main(csv_path: str | None = None, x4_csv_path: str | None = None) -> int:
    readme = (ROOT / "README.md").read_text().split("\n")
    replace_table(readme, "| bytes | nccl",
                  wide_table(all_reduce_times(Path(csv_path or ROOT / "bench/results/h200-x2.csv"))))
    x4 = Path(x4_csv_path or ROOT / "bench/results/h200-x4.csv")
    if x4.exists() and any(line.startswith("| size | NCCL | best peer") for line in readme):
        replace_table(readme, "| size | NCCL | best peer", summary_table(all_reduce_times(x4)))
    (ROOT / "README.md").write_text("\n".join(readme))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
