"""`quickreduce.codec_info`: answers for the codec asked about, and refuses with a list of what it takes."""
import re

import pytest

import quickreduce as qr


def _accepted(message: str) -> list[str]:
    listed = re.search(r"\[(.*)\]", message)
    assert listed, message
    return [name.strip(" '\"") for name in listed.group(1).split(",")]


@pytest.mark.parametrize("name", ["auto", "auto:fp8", "AUTO", "nope"])
def test_refusal_lists_only_what_it_accepts(name):
    with pytest.raises(ValueError) as err:
        qr.codec_info(name)
    accepted = _accepted(str(err.value))
    assert not any(a.startswith("auto") for a in accepted), err.value
    for each in accepted:  # everything the error offers is accepted
        assert qr.codec_info(each)["bits_per_value"] > 0


@pytest.mark.parametrize("name, bits", [("fp16", 16), ("bf16", 16), ("fp32", 32), ("FP32", 32), ("none", 16)])
def test_passthrough_names(name, bits):
    info = qr.codec_info(name)
    assert info["bits_per_value"] == bits and info["ratio"] == bits / 16
    assert info["name"] == ("fp16" if name == "none" else name.lower())
    assert info["profile"] == 1  # the passthrough codec


def test_lossy_codecs_unchanged():
    for name in qr.codec_names():
        info = qr.codec_info(name)
        assert info["name"] == name and info["ratio"] == pytest.approx(info["bits_per_value"] / 16)
    assert qr.codec_info("fp8")["bits_per_value"] == 8.5 and qr.codec_info("int4")["bits_per_value"] == 4.5


def test_parse_codec_request_is_the_one_auto_parser():
    from quickreduce.codecs import parse_codec_request
    assert parse_codec_request("auto") == (True, None)
    assert parse_codec_request("AUTO:Int4") == (True, "int4")
    assert parse_codec_request("auto:bf16") == (True, "fp16")
    assert parse_codec_request("lossless") == (False, "lossless")
    assert parse_codec_request("fp32") == (False, "fp16")
    for bad in ("auto:", "auto:int3", "int3"):
        with pytest.raises(ValueError):
            parse_codec_request(bad)
    with pytest.raises(TypeError):
        parse_codec_request(4)


def test_the_registry_says_each_codecs_kind_and_python_reads_it():
    """csrc/codecs/codec_list.hpp carries each codec's kind and the plain codec a rotated one transforms;
    the Python lists (bench rows, codec-speed, exact names) come from it, not from hand-typed copies."""
    from quickreduce import codecs, ops
    from quickreduce.cli import codec_speed, report

    kinds = {n: (qr.codec_info(n)["kind"], qr.codec_info(n)["rotated_of"]) for n in codecs.codec_names()}
    assert kinds == {"fp16": ("exact", ""), "fp8": ("scaled", ""), "int8": ("scaled", ""), "int6": ("scaled", ""),
                     "int4": ("scaled", ""), "fp4": ("scaled", ""), "lossless": ("exact", ""),
                     "int4h": ("scaled", "int4"), "int6h": ("scaled", "int6")}
    assert codecs.exact_codecs() == ["fp16", "lossless"]
    assert codecs.rotated_codecs() == {"int4h": "int4", "int6h": "int6"}
    assert report.QR_CODECS == tuple(codecs.scaled_codecs(rotated=False)) == ("fp8", "int8", "int6", "int4", "fp4")
    assert report.QR_ROW_CODECS == report.QR_CODECS + ("lossless",)
    assert report.QR_ROTATED_CODECS == ("int4h", "int6h")
    assert set(codec_speed.SCALED_CODECS) == set(report.QR_CODECS + report.QR_ROTATED_CODECS)
    assert codec_speed.ROTATED_PLAIN == codecs.rotated_codecs()
    assert set(ops.EXACT_CODECS) == {"fp16", "bf16", "fp32", "none", "lossless"}
