"""The published results: every table in README.md and docs/ is what scripts/make_tables.py makes from
its CSV under results/ (running the script leaves them unchanged), every file kept under results/ is
cited by the docs, and the product tree carries no development diary (numbered sessions, calls, runs)."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("make_tables", ROOT / "scripts" / "make_tables.py")
make_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_tables)

DOCS = make_tables.markdown_files(ROOT)


def markers():
    for path in DOCS:
        for line in path.read_text().split("\n"):
            match = make_tables.START.match(line)
            if match:
                yield path, match.group(1)


def test_tables_are_generated_from_their_csvs():
    before = {p: p.read_text() for p in DOCS}
    assert make_tables.main(["--check"]) == 0, "run python3 scripts/make_tables.py"
    assert {p: p.read_text() for p in DOCS} == before  # --check writes nothing


def test_every_table_reads_a_csv_under_results():
    specs = list(markers())
    assert len(specs) >= 3  # at least one results table per machine in the README
    for path, spec_text in specs:
        kind, csv_path, *_ = spec_text.split()
        assert kind in make_tables.KINDS, (path, spec_text)
        assert csv_path.startswith("results/") and (ROOT / csv_path).is_file(), (path, spec_text)


def test_the_readme_has_a_table_and_a_plot_per_machine():
    readme = (ROOT / "README.md").read_text()
    machines = sorted(p.name for p in (ROOT / "results").iterdir() if (p / "bench.csv").exists())
    assert machines
    for machine in machines:
        assert f"<!-- table: summary results/{machine}/bench.csv" in readme
        assert f"(results/{machine}/bench.png)" in readme
    assert len(readme.splitlines()) <= 220  # the issue: at most ~200 lines (a results table a machine kind)


def test_results_hold_only_cited_files():
    cited = "\n".join(p.read_text() for p in DOCS + [ROOT / "results" / "README.md"])
    for path in (ROOT / "results").rglob("*"):
        if path.is_file() and path.name != "README.md":
            assert str(path.relative_to(ROOT)) in cited, f"{path.relative_to(ROOT)} is cited by no doc"


def test_a_stale_table_is_found_and_rewritten(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "b.csv").write_text(
        "size_bytes,method,time_us,lossy,collective\n8192,nccl,12.5,no,all_reduce\n8192,qr_one_shot,2.25,no,all_reduce\n")
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- table: all-reduce results/b.csv -->\n| old |\n<!-- end table -->\nb\n")
    assert make_tables.main(["--check"], root=tmp_path) == 1
    assert make_tables.main([], root=tmp_path) == 0
    assert "| 8K | 12.5 | 2.25 |" in readme.read_text() and "| old |" not in readme.read_text()
    assert make_tables.main(["--check"], root=tmp_path) == 0
    readme.write_text("<!-- table: nosuchkind results/b.csv -->\n<!-- end table -->\n")
    with pytest.raises(ValueError, match="unknown table kind"):
        make_tables.main(["--check"], root=tmp_path)


MOE_CSV = """part,model,tokens,skew,method,codec,us,bytes,dynamic_us,host_sized_us,ratio
a2a,,,even,,,,8192,29.91,27.08,1.105
a2a,,,skewed,,,,8192,25.17,22.63,1.112
a2a,,,even,,,,2097152,38.13,35.91,1.062
layer,deepseek-v3,1,uniform,qr_graph,bf16,133.99,,,,
layer,deepseek-v3,1,uniform,qr_host,bf16,960.37,,,,
layer,deepseek-v3,1,uniform,nccl,bf16,1763.03,,,,
layer,deepseek-v3,4096,heavy,nccl,bf16,12455.9,,,,
layer,deepseek-v3,4096,heavy,qr_graph,bf16,13314.0,,,,
layer,deepseek-v3,4096,heavy,qr_graph:fp8,fp8,11733.04,,,,
layer,mixtral,1,uniform,qr_graph,bf16,118.59,,,,
"""


def test_moe_tables(tmp_path):
    (tmp_path / "moe.csv").write_text(MOE_CSV)
    rows = make_tables.read_rows(tmp_path / "moe.csv")
    a2a = make_tables.moe_table(rows, part="a2a")
    assert a2a[0] == ("| size a rank | even: dynamic | even: host-sized | even: ratio | skewed: dynamic | skewed: host-sized "
                      "| skewed: ratio |")
    assert a2a[2:] == ["| 8K | 29.9 | 27.1 | 1.105 | 25.2 | 22.6 | 1.112 |", "| 2M | 38.1 | 35.9 | 1.062 | - | - | - |"]
    layer = make_tables.moe_table(rows, part="layer", model="deepseek-v3")
    assert layer[0] == ("| tokens a rank | skew | qr_graph | qr_graph:fp8 | qr_host | nccl | nccl / qr_graph "
                        "| qr_host / qr_graph |")
    assert layer[2:] == ["| 1 | uniform | 134.0 | - | 960.4 | 1763 | 13.16x | 7.17x |",
                         "| 4096 | heavy | 13314 | 11733 | - | 12456 | 0.94x | - |"]
    every = make_tables.moe_table(rows, part="layer")  # no model: a model column, every model's rows
    assert every[0].startswith("| model | tokens a rank | skew |") and every[-1].startswith("| mixtral | 1 | uniform | 118.6 |")
    with pytest.raises(ValueError, match="part=a2a or part=layer"):
        make_tables.moe_table(rows, part="both")


# The history check: no numbered sessions, calls or runs in the product tree (lab/ keeps them).
HISTORY = re.compile(r"\bsessions? [0-9]|\bcalls? [0-9]+\b|\bruns? [0-9]+\b", re.IGNORECASE)
PRODUCT = ["README.md", "docs", "python", "csrc", "examples", "scripts"]


def test_no_development_diary_in_the_product_tree():
    hits = []
    for top in PRODUCT:
        base = ROOT / top
        files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
        for path in files:
            if path.suffix in (".so", ".png", ".pyc") or "__pycache__" in path.parts:
                continue
            for n, line in enumerate(path.read_text(errors="replace").split("\n"), 1):
                old_path = top != "python" and ("bench/NOTES" in line or "bench/results" in line)
                if HISTORY.search(line) or old_path:
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_doc_links_stay_in_the_repo_and_resolve():
    for path in DOCS:
        text = path.read_text()
        assert "http://" not in text and "https://" not in text, f"{path.name} links outside the repo"
        for target, _ in LINK.findall(text):
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)} links to missing {target}"


def test_bounds_table_states_each_call_against_its_bytes():
    # W = 2, 64 MiB all-gather: each GPU sends half the message, 32 MiB exact or 9 MiB in int4 (4.5 bits
    # a value); at 100 GB/s that is 335.5 and 94.4 us (HBM made free here), half of the times given.
    common = {"size_bytes": str(64 << 20), "collective": "all_gather", "world_size": "2", "dtype": "bf16"}
    rows = [dict(common, method="qr_passthrough", time_us="671.08864"), dict(common, method="qr_int4", time_us="188.74368")]
    table = make_tables.bounds_table(rows, link_gbs="100", hbm_gbs="1e9")
    assert table[0] == "| collective | codec | 64M |"
    assert table[2:] == ["| all-gather | passthrough | 671.1 / 335.5 (50%) |", "| all-gather | int4 | 188.7 / 94.4 (50%) |"]
    assert make_tables.codec_bits()["int4"] == 4.5 and make_tables.codec_bits()["fp8"] == 8.5
