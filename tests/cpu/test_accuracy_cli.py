"""`quickreduce accuracy` on a small problem: the numbers are finite and in the expected ranges."""
import csv
import math

import pytest

from quickreduce.cli import accuracy

SMALL = ["--world-sizes", "2", "--numel", "8192", "--seed", "3"]
# loose upper bounds on rel-L2 per codec (design notes section 4 levels, with margin)
BOUNDS = {"fp16": 1e-2, "bf16": 1e-2, "fp8": 6e-2, "int8": 3e-2, "int6": 8e-2, "int4": 0.3, "fp4": 0.3,
          "int6h": 8e-2, "int4h": 0.3}


def _run(tmp_path, capsys, *extra):
    path = tmp_path / "acc.csv"
    assert accuracy.main([*SMALL, "--csv", str(path), *extra]) == 0
    out = capsys.readouterr().out
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("rel_l2", "predicted_rel_l2", "max_abs"):
            r[k] = float(r[k])
    return rows, out


def _check(rows, out):
    assert len(rows) == len(accuracy.DATASETS) * len(accuracy.DTYPES) * len(accuracy.CODECS)
    assert "rel L2" in out and "predicted" in out
    for r in rows:
        what = f"{r['data']} {r['dtype']} {r['codec']}"
        assert all(math.isfinite(r[k]) for k in ("rel_l2", "predicted_rel_l2", "max_abs")), what
        assert 0 < r["rel_l2"] < BOUNDS[r["codec"]], what
        # the round-trip prediction is approximate (errors are correlated on outlier data)
        assert 0.5 < r["predicted_rel_l2"] / r["rel_l2"] < 2.0, what
        assert r["world_size"] == "2" and r["numel"] == "8192"
    passthrough = [r for r in rows if r["codec"] == r["dtype"]]
    assert {r["codec"] for r in passthrough} == {"bf16", "fp16"}


def test_accuracy_cli_twin(tmp_path, capsys):
    try:
        import quickreduce._C  # noqa: F401  (the default device needs the built twin)
    except ImportError as e:
        pytest.fail(f"quickreduce._C cannot be imported: {e}")
    rows, out = _run(tmp_path, capsys, "--markdown")
    _check(rows, out)
    assert "| data | dtype | W | passthrough | fp8 |" in out
    assert all(r["device"] == "cpu" for r in rows)


def test_accuracy_cli_oracle_matches_twin(tmp_path, capsys):
    """The twin is bit-exact with the oracle, so both devices report identical errors."""
    rows, out = _run(tmp_path, capsys, "--device", "oracle")
    _check(rows, out)
    try:
        import quickreduce._C  # noqa: F401
    except ImportError as e:
        pytest.fail(f"quickreduce._C cannot be imported: {e}")
    twin, _ = _run(tmp_path, capsys)
    for a, b in zip(rows, twin):
        assert (a["data"], a["dtype"], a["codec"]) == (b["data"], b["dtype"], b["codec"])
        assert a["rel_l2"] == b["rel_l2"] and a["max_abs"] == b["max_abs"], a


def test_accuracy_cli_collective_writes_its_csv(tmp_path, capsys):
    """--collective with --csv writes every row it prints (docs/accuracy.md's command for results/cpu/)."""
    path = tmp_path / "a2a.csv"
    assert accuracy.main(["--collective", "all_to_all", *SMALL, "--dtypes", "bf16", "--codecs", "fp8,int4",
                          "--csv", str(path)]) == 0
    capsys.readouterr()
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(accuracy.DATASETS) * 2
    assert {r["collective"] for r in rows} == {"all_to_all"} and {r["codec"] for r in rows} == {"fp8", "int4"}
    assert all(0 < float(r["rel_l2"]) < BOUNDS[r["codec"]] for r in rows)
