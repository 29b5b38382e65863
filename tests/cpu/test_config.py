"""The QUICKREDUCE_* environment knobs: defaults, accepted spellings, and a clear error naming the
variable for anything else."""
import pytest

from quickreduce import config


@pytest.mark.parametrize("fn, name, default", [(config.pdl, "QUICKREDUCE_PDL", True),
                                               (config.allow_shared_gpu, "QUICKREDUCE_ALLOW_SHARED_GPU", False)])
def test_switches(monkeypatch, fn, name, default):
    monkeypatch.delenv(name, raising=False)
    assert fn() is default
    monkeypatch.setenv(name, "")
    assert fn() is default
    for raw, want in (("1", True), ("yes", True), ("TRUE", True), ("0", False), ("no", False), (" false ", False)):
        monkeypatch.setenv(name, raw)
        assert fn() is want, raw
    monkeypatch.setenv(name, "maybe")
    with pytest.raises(ValueError, match=name):
        fn()


def test_numbers(monkeypatch):
    monkeypatch.delenv("QUICKREDUCE_MAX_SIZE_MB", raising=False)
    assert config.max_size_bytes() == config.DEFAULT_MAX_SIZE_MB << 20
    monkeypatch.setenv("QUICKREDUCE_MAX_SIZE_MB", "0.5")
    assert config.max_size_bytes() == 1 << 19
    monkeypatch.setenv("QUICKREDUCE_TIMEOUT_S", "2.5")
    assert config.timeout_s() == 2.5
    for raw in ("-1", "0", "ten"):
        monkeypatch.setenv("QUICKREDUCE_TIMEOUT_S", raw)
        with pytest.raises(ValueError, match="QUICKREDUCE_TIMEOUT_S"):
            config.timeout_s()


def test_quantization_names(monkeypatch):
    monkeypatch.delenv("QUICKREDUCE_QUANTIZATION", raising=False)
    assert config.default_codec() == "fp16"
    for raw, want in (("INT4", "int4"), ("fp8", "fp8"), ("NONE", "fp16"), ("auto:INT6", "auto:int6"), ("INT4H", "int4h"),
                      ("int6h", "int6h")):
        monkeypatch.setenv("QUICKREDUCE_QUANTIZATION", raw)
        assert config.default_codec() == want
    monkeypatch.setenv("QUICKREDUCE_QUANTIZATION", "int3")
    with pytest.raises(ValueError, match="QUICKREDUCE_QUANTIZATION"):
        config.default_codec()
