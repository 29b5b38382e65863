"""`codec="auto:<codec>"` never runs a codec less accurate than <codec> on any of the project's data
kinds (Gaussian, heavy-tailed, outlier channels): not in the shipped tables, not through `choose`."""
import json
from pathlib import Path

import numpy as np
import pytest

from quickreduce import tuning

TABLES = sorted(p for p in tuning.TUNED_DIR.glob("*.json") if p != tuning.ACCURACY_FILE)
ACCURACY = json.loads(tuning.ACCURACY_FILE.read_text())
CELLS = ACCURACY["rel_l2"]
LOSSY = ("fp8", "int8", "int6", "int6h", "int4", "int4h", "fp4")


def at_least_as_accurate(codec: str, bound: str) -> list[str]:
    """The cells where `codec` is less accurate than `bound` (empty: at least as accurate everywhere)."""
    if codec in tuning.EXACT_CODECS or codec == bound:
        return []
    return [f"{cell}: {codec} {errors.get(codec)} > {bound} {errors[bound]}" for cell, errors in CELLS.items()
            if bound in errors and (codec not in errors or errors[codec] > errors[bound])]


def test_the_accuracy_data_covers_every_data_kind_collective_and_dtype():
    assert set(ACCURACY["data_kinds"]) == {"gaussian", "student_t", "llm"}
    assert "quickreduce accuracy --accuracy-json" in ACCURACY["measured_by"]
    for collective in ("all_reduce",) + tuning.SEGMENT_COLLECTIVES:
        for kind in ACCURACY["data_kinds"]:
            for dtype in ("bf16", "fp16") + (() if collective == "all_reduce" else ("fp32",)):
                for w in (2, 4, 8):
                    assert set(CELLS[f"{collective}/{kind}/{dtype}/w{w}"]) == set(LOSSY)


def test_the_accuracy_data_is_what_the_twin_measures():
    """One cell per collective, measured again as `quickreduce accuracy --accuracy-json` did."""
    from quickreduce.cli import accuracy

    for collective in ("all_reduce", "all_to_all"):
        want = CELLS[f"{collective}/llm/bf16/w2"]
        got = {}
        for codec in ("fp8", "int8", "int6"):
            if collective == "all_reduce":
                from quickreduce import _C
                xs = [accuracy.make_input("llm", "bf16", r, ACCURACY["numel_per_rank"], ACCURACY["seed"]) for r in (0, 1)]
                got[codec] = accuracy.metrics(np.asarray(_C.twin_all_reduce(xs, "bf16", codec)),
                                              accuracy.reference(xs, "bf16"), "bf16")[0]
            else:
                got[codec] = accuracy.collective_row(collective, "llm", "bf16", codec, 2, ACCURACY["numel_per_rank"],
                                                     ACCURACY["seed"])["rel_l2"]
            assert got[codec] == pytest.approx(want[codec], rel=1e-5), (collective, codec)


def test_fp8_is_more_accurate_than_int6_and_int8_with_outlier_channels():
    """Why a Gaussian-only ranking was wrong: the data say so."""
    for cell, errors in CELLS.items():
        if "/llm/" in cell:
            assert errors["fp8"] < errors["int6"] and errors["fp8"] < errors["int8"], cell


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_shipped_tables_choose_no_less_accurate_codec(path):
    data = json.loads(path.read_text())
    table = tuning.table_from_dict(data)
    problems = []
    for dtype, entries in data["dtypes"].items():
        for entry in entries:
            size = entry["max_bytes"] if entry["max_bytes"] is not None else 1 << 40
            for bound, (algo, codec) in entry["lossy"].items():  # the table as shipped
                problems += [f"{path.name} all_reduce {dtype} <= {size}: auto:{bound} -> {codec}: {why}"
                             for why in at_least_as_accurate(codec, bound)]
            for bound in LOSSY:  # and what a call resolves to
                algo, codec = tuning.choose(table, size, dtype, f"auto:{bound}")
                problems += [f"{path.name} choose all_reduce {dtype} {size} auto:{bound} -> {codec}: {why}"
                             for why in at_least_as_accurate(codec, bound)]
    for collective, per_dtype in data.get("collectives", {}).items():
        for dtype, entries in per_dtype.items():
            for entry in entries:
                size = entry["max_bytes"] if entry["max_bytes"] is not None else 1 << 40
                for bound, codec in entry["lossy"].items():
                    problems += [f"{path.name} {collective} {dtype} <= {size}: auto:{bound} -> {codec}: {why}"
                                 for why in at_least_as_accurate(codec, bound)]
                for bound in LOSSY:
                    codec = tuning.choose_collective(table, collective, size, dtype, f"auto:{bound}")
                    problems += [f"{path.name} choose {collective} {dtype} {size} auto:{bound} -> {codec}: {why}"
                                 for why in at_least_as_accurate(codec, bound)]
    assert not problems, "\n".join(problems[:20]) + f"\n({len(problems)} in all)"


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_auto_fp8_never_runs_int6(path):
    table = tuning.table_from_dict(json.loads(path.read_text()))
    for size in (1 << 20, 16 << 20, 64 << 20, 1 << 30):
        assert tuning.choose(table, size, "bf16", "auto:fp8")[1] in ("fp8", "bf16", "lossless")
        for collective in tuning.SEGMENT_COLLECTIVES:
            assert tuning.choose_collective(table, collective, size, "bf16", "auto:fp8") in ("fp8", "bf16")


def test_admits_is_the_worst_case_over_data_kinds():
    assert not tuning.admits("fp8", "int6") and not tuning.admits("fp8", "int8")  # outlier channels
    assert not tuning.admits("int8", "fp8")  # Gaussian
    assert tuning.admits("int6", "int8") and tuning.admits("int4", "fp8") and tuning.admits("fp4", "int4h")
    assert not tuning.admits("int4", "fp4") and not tuning.admits("fp4", "int4")
    assert not tuning.admits("int4h", "int4") and not tuning.admits("int6h", "int6")
    for bound in LOSSY:
        assert tuning.admits(bound, bound) and tuning.admits(bound, "bf16") and tuning.admits(bound, "lossless")
    # The default order agrees: whatever a bound admits comes no later than the bound.
    order = tuning.error_order()
    for bound in LOSSY:
        for codec in LOSSY:
            if tuning.admits(bound, codec):
                assert order.index(codec) <= order.index(bound), (bound, codec)


def test_a_table_made_by_the_old_rule_is_not_trusted():
    """A user's cached table from before (auto:fp8 -> int6) runs the bound itself."""
    data = {"format": 2, "gpu": "h200", "world_size": 2,
            "dtypes": {"bf16": [{"max_bytes": None, "lossless": "two_shot",
                                 "lossy": {"fp8": ["two_shot", "int6"], "int4": ["two_shot", "int8"]}}]},
            "collective_codec_errors": {"reduce_scatter": {"fp8": 0.02, "int6": 0.019}},
            "collectives": {"reduce_scatter": {"bf16": [{"max_bytes": None, "lossy": {"fp8": "int6"}}]}}}
    table = tuning.table_from_dict(data)
    assert tuning.choose(table, 1 << 30, "bf16", "auto:fp8") == ("two_shot", "fp8")
    assert tuning.choose(table, 1 << 30, "bf16", "auto:int4") == ("two_shot", "int8")  # admitted: kept
    assert tuning.choose_collective(table, "reduce_scatter", 1 << 30, "bf16", "auto:fp8") == "fp8"


def test_tables_are_rebuilt_by_the_new_rule():
    """Measured times where int6 is the fastest lossy codec: auto:fp8 takes fp8 (or exact), never int6."""
    rows = []
    for size in (16 << 20, 256 << 20):
        rows += [{"dtype": "bf16", "size": size, "algo": "two_shot", "codec": "bf16", "time_us": size / 1e4,
                  "rel_err": 0.002}]
        for codec, factor in (("int8", 0.55), ("fp8", 0.6), ("int6", 0.45), ("int4", 0.3), ("fp4", 0.35)):
            rows.append({"dtype": "bf16", "size": size, "algo": "two_shot", "codec": codec,
                         "time_us": size / 1e4 * factor, "rel_err": 0.01})
    data = tuning.table_from_measurements(rows, "NVIDIA H200", 2, driver="test")
    lossy = data["dtypes"]["bf16"][-1]["lossy"]
    assert lossy["fp8"] == ["two_shot", "fp8"] and lossy["int6"] == ["two_shot", "int6"]
    assert lossy["int8"] == ["two_shot", "int8"] and lossy["int4"] == ["two_shot", "int4"]
    assert lossy["fp4"] == ["two_shot", "fp4"]  # int4 is faster, but less accurate than fp4 on heavy tails


def test_accuracy_json_is_what_admits_reads(tmp_path):
    """`quickreduce accuracy --accuracy-json` (small here) writes the file `admits` reads."""
    from quickreduce.cli import accuracy

    path = tmp_path / "acc.json"
    assert accuracy.main(["--accuracy-json", str(path), "--world-sizes", "2", "--numel", "4096"]) == 0
    cells = tuning.codec_accuracy(path)
    assert len(cells) == len(ACCURACY["data_kinds"]) * (2 + 3 * len(tuning.SEGMENT_COLLECTIVES))
    assert all(set(errors) == set(LOSSY) for errors in cells.values())
    assert json.loads(path.read_text())["measured_by"].startswith("quickreduce accuracy --accuracy-json")
    assert not tuning.admits("fp8", "int6", cells)  # outlier channels show it at this size already
