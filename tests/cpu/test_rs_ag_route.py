"""The reduce-scatter + all-gather route (algo "rs_ag") for 16-bit all-reduces: what the plan and the
tuning table say of it (no GPU: its bits are checked on GPUs in tests/gpu/scenarios.py, whose
passthrough_reference and graph_replays run it against the fp32 rank-order sum)."""
import json

import pytest
import torch

from quickreduce import tuning
from quickreduce.cli.tune import candidates
from quickreduce.comm import ALGOS, plan_all_reduce

MiB = 1 << 20
TABLE = {"format": 2, "gpu": "cpu", "world_size": 4,
         "dtypes": {"bf16": [{"max_bytes": 2 * MiB - 1, "lossless": "one_shot", "lossy": {}},
                             {"max_bytes": 8 * MiB - 1, "lossless": "rs_ag",
                              "lossy": {"int4": ["two_shot", "int4"]}},
                             {"max_bytes": None, "lossless": ["two_shot", "lossless"],
                              "lossy": {"int4": ["two_shot", "int4"]}}]}}


@pytest.fixture
def table(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TABLE))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(path))
    return tuning.load_table("cpu", 4)


def plan(nbytes, codec, table, algo="auto", max_size=None):
    return plan_all_reduce(nbytes, torch.bfloat16, codec, table=table, world_size=4, max_size=max_size,
                           one_shot_max_bytes=4 * MiB, algo=algo)


def test_rs_ag_is_an_algo_and_a_tune_candidate():
    assert "rs_ag" in ALGOS and "rs_ag" in tuning.ALGOS
    assert candidates(["int4"])["qr_rs_ag"] == ("rs_ag", None)


def test_auto_follows_a_table_that_picks_rs_ag(table):
    p = plan(4 * MiB, "auto", table)
    assert (p.takes, p.algo, p.codec, p.exact) == (True, "rs_ag", "fp16", True)
    # the exact codecs all run it there (the same bits); the lossless packing becomes the passthrough
    assert plan(4 * MiB, "lossless", table).algo == "rs_ag" and plan(4 * MiB, "lossless", table).codec == "fp16"
    assert plan(MiB, "auto", table).algo == "one_shot"
    assert plan(16 * MiB, "auto", table).algo == "two_shot"
    # auto:int4 below its codec's breakpoint runs the exact route; above it, the codec
    assert plan(4 * MiB, "auto:int4", table).codec == "int4"


def test_rs_ag_asked_for_is_exact_only(table):
    assert plan(4 * MiB, "fp16", table, algo="rs_ag").algo == "rs_ag"
    with pytest.raises(ValueError, match="rs_ag algorithm is exact only"):
        plan(4 * MiB, "int4", table, algo="rs_ag")


def test_rs_ag_counts_its_padding_against_max_size(table):
    # 1 MiB + 2 bytes of bf16 pads to W chunks of a multiple of 32 values: above a max_size of 1 MiB + 2
    p = plan(MiB + 2, "fp16", table, algo="rs_ag", max_size=MiB + 2)
    assert not p.takes and "padded" in p.reason
    assert plan(MiB, "fp16", table, algo="rs_ag", max_size=MiB).takes
