"""How Communicator resolves (codec, algo) before a launch, on the CPU: the exact codecs
(passthrough and lossless) give the same bits, so `auto` picks the fastest exact method, and the
lossless packing is used only where it applies (bf16, two-shot)."""
from types import SimpleNamespace

import pytest
import torch

from quickreduce import tuning
from quickreduce.comm import Communicator

MiB = 1 << 20


@pytest.fixture
def comm(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("QUICKREDUCE_TUNE_FILE", raising=False)
    c = object.__new__(Communicator)  # no GPU: only what _plan reads
    c._c = SimpleNamespace(one_shot_max_bytes=8 * MiB)
    c._table = tuning.load_table("NVIDIA H200", 2, driver="test")  # the shipped, measured table
    c.group, c.device, c.world_size = None, 0, 2
    return c


def test_exact_codecs_take_the_fastest_exact_method(comm):
    for codec in ("bf16", "fp16", "lossless", "auto"):
        assert comm._plan(8 << 10, torch.bfloat16, codec, "auto") == ("one_shot", "fp16")
        assert comm._plan(1 << 30, torch.bfloat16, codec, "auto") == ("two_shot", "lossless")


def test_lossless_only_where_it_packs(comm):
    assert comm._plan(1 << 30, torch.float16, "lossless", "auto") == ("two_shot", "fp16")
    assert comm._plan(1 << 30, torch.float16, "auto", "auto") == ("two_shot", "fp16")
    assert comm._plan(MiB, torch.bfloat16, "lossless", "one_shot") == ("one_shot", "fp16")
    assert comm._plan(MiB, torch.bfloat16, "lossless", "two_shot") == ("two_shot", "lossless")
    assert comm._plan(1 << 30, torch.bfloat16, "auto", "one_shot") == ("one_shot", "fp16")


def test_one_shot_refuses_lossy_codecs(comm):
    with pytest.raises(ValueError, match="passthrough only"):
        comm._plan(MiB, torch.bfloat16, "int4", "one_shot")
