"""Rewrites README.md's measured table from bench/results/h200-x2.csv (one column per method)."""
import sys
from pathlib import Path

from quickreduce.cli.report import human_size, read_csv

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["nccl", "symm_mem_two_shot", "vllm_custom", "trtllm_one_shot", "trtllm_one_shot_pdl",
           "qr_one_shot", "qr_two_shot", "qr_lossless", "qr_auto", "flashinfer_fp8", "qr_int8", "qr_fp8", "qr_int6",
           "qr_int4", "qr_int4h", "qr_fp4", "qr_auto_int4"]


def cell(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t:.0f}" if t >= 1000 else f"{t:.1f}" if t >= 10 else f"{t:.2f}"


def main(csv_path: str = str(ROOT / "bench/results/h200-x2.csv")) -> int:
    times = {(r["size"], r["method"]): r["time_us"] for r in read_csv(csv_path)
             if r.get("collective", "all_reduce") == "all_reduce"}  # the table is the all-reduce's
    sizes = sorted({size for size, _ in times})
    table = ["| bytes | " + " | ".join(COLUMNS) + " |", "|---:|" + "---:|" * len(COLUMNS)]
    table += [f"| {human_size(s)} | " + " | ".join(cell(times.get((s, c))) for c in COLUMNS) + " |" for s in sizes]
    readme = (ROOT / "README.md").read_text().split("\n")
    start = next(i for i, line in enumerate(readme) if line.startswith("| bytes | nccl"))
    end = start
    while end < len(readme) and readme[end].startswith("|"):
        end += 1
    readme[start:end] = table
    (ROOT / "README.md").write_text("\n".join(readme))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
