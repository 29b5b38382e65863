"""The `auto` tuning table: lookup order, validation, choose(), and building tables from timings."""
import json
import warnings

import pytest

from quickreduce import tuning
from quickreduce.tuning import choose, load_table, table_from_dict, table_from_measurements

MiB = 1 << 20


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """No test may read (or write) the real user cache or an inherited QUICKREDUCE_TUNE_FILE."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("QUICKREDUCE_TUNE_FILE", raising=False)


def _table(entries, gpu="h200", world_size=2, **extra):
    return {"format": 1, "gpu": gpu, "world_size": world_size, "dtypes": {"bf16": entries}, **extra}


@pytest.mark.parametrize("name, slug", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA B200", "b200"), ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("NVIDIA RTX A6000", "rtx-a6000"),
    ("", "unknown"),
])
def test_gpu_slug(name, slug):
    assert tuning.gpu_slug(name) == slug


def test_dtype_names():
    assert tuning.dtype_name("torch.bfloat16") == "bf16"
    assert tuning.dtype_name("float16") == "fp16"
    assert tuning.dtype_name("float32") == "fp32"  # the segment collectives' and fp32 all-reduce's
    with pytest.raises(ValueError):
        tuning.dtype_name("float64")


def test_builtin_h200_w2_is_the_measured_table():
    # `quickreduce tune` on 2x H200, 2026-11-28 (results/h200-x2/tune.csv): the one-shot wins up
    # to 8 MiB (its limit on 2 GPUs), the lossless packing above (16 MiB: 54.5 us, the plain
    # two-shot 55.5);
    # codecs pay off from ~8 MiB. Each bound runs its own codec: no faster codec is at least as
    # accurate on every data kind (int6 is faster than fp8 but 7x less accurate with outlier
    # channels; int4 and fp4 each lose to the other on some data).
    table = load_table("NVIDIA H200", 2, driver="test")
    assert table.source.startswith("built-in")
    assert table.measured and "measured" in table.note
    assert choose(table, 8 << 10, "bf16") == ("one_shot", "bf16")
    assert choose(table, 2 * MiB, "torch.float16") == ("one_shot", "fp16")
    assert choose(table, 8 * MiB, "bf16") == ("one_shot", "bf16")
    assert choose(table, 16 * MiB, "bf16") == ("two_shot", "lossless")
    assert choose(table, 32 * MiB, "bf16") == ("two_shot", "lossless")
    assert choose(table, 1 << 30, "bf16") == ("two_shot", "lossless")
    assert choose(table, 2 * MiB, "bf16", "auto:int4") == ("one_shot", "bf16")
    assert choose(table, 8 * MiB, "bf16", "auto:int4") == ("two_shot", "int4")
    assert choose(table, 64 * MiB, "fp16", "fp8") == ("two_shot", "fp8")
    assert choose(table, 64 * MiB, "fp16", "fp4") == ("two_shot", "fp4")


def test_builtin_h200_w4_is_the_measured_table():
    # `quickreduce tune --gpus 4` on 4x H200, 2026-11-28 (results/h200-x4/tune.csv): the one-shot to
    # ~724 KiB, the one-kernel rs_ag to ~5.7 MiB, the plain two-shot to ~22.6 MiB, the lossless packing
    # above; NCCL nowhere; from ~1.4 MiB the lossy bounds take the codec two-shot.
    table = load_table("NVIDIA H200", 4, driver="test")
    assert table.source.startswith("built-in") and table.world_size == 4 and table.measured
    assert choose(table, 8 << 10, "bf16") == ("one_shot", "bf16")
    assert choose(table, 512 << 10, "bf16") == ("one_shot", "bf16")
    assert choose(table, 2 * MiB, "bf16") == ("rs_ag", "bf16")
    assert choose(table, 4 * MiB, "bf16") == ("rs_ag", "bf16")
    assert choose(table, 8 * MiB, "bf16") == ("two_shot", "bf16")
    assert choose(table, 16 * MiB, "bf16") == ("two_shot", "bf16")
    assert choose(table, 64 * MiB, "bf16") == ("two_shot", "lossless")
    assert choose(table, 1 << 30, "bf16") == ("two_shot", "lossless")
    assert all(e["lossless"] != "nccl" for e in table.raw["dtypes"]["bf16"])
    assert choose(table, 1 * MiB, "bf16", "auto:int4") == ("rs_ag", "bf16")
    assert choose(table, 4 * MiB, "bf16", "auto:int4") in (("two_shot", "int4"), ("two_shot", "fp4"))
    assert choose(table, 1 << 30, "bf16", "auto:int4") in (("two_shot", "int4"), ("two_shot", "fp4"))


def test_lossless_bounds_and_unknown_bound():
    table = load_table("NVIDIA H200", 2, driver="test")
    for bound in (None, "fp16", "bf16", "auto", "lossless", "auto:fp16"):
        assert choose(table, 32 * MiB, "bf16", bound) == ("two_shot", "lossless")
        assert choose(table, 1 << 30, "bf16", bound) == ("two_shot", "lossless")
    with pytest.raises(ValueError, match="unknown codec bound"):
        choose(table, MiB, "bf16", "int3")


def test_fallback_for_untuned_hardware():
    table = load_table("NVIDIA Z9000", 8, driver="test")
    assert table.source.startswith("fallback")
    assert choose(table, 8 << 10, "bf16")[0] == "one_shot"
    assert choose(table, 16 * MiB, "bf16")[0] == "two_shot"
    assert choose(table, 1 << 30, "bf16") == ("nccl", "bf16")
    assert choose(table, 1 << 30, "bf16", "int4") == ("two_shot", "int4")
    # 4 GPUs untuned (an H100 x4, say): the measured 4x H200 table's shape, never NCCL
    four = load_table("NVIDIA Z9000", 4, driver="test")
    assert four.source.startswith("fallback")
    assert choose(four, 1 * MiB, "bf16") == ("one_shot", "bf16")
    assert choose(four, 16 * MiB, "bf16") == ("two_shot", "bf16")
    assert choose(four, 16 * MiB, "bf16", "auto:int4") == ("two_shot", "int4")
    assert choose(four, 1 << 30, "bf16") == ("two_shot", "lossless")
    # 2 GPUs: what the measured H100 and H200 tables agree on (one-shot to 4 MiB, then the lossless
    # two-shot, never NCCL; codecs from 4 MiB).
    table = load_table("NVIDIA Z9000", 2, driver="test")
    assert table.source.startswith("fallback")
    assert choose(table, 4 << 20, "bf16") == ("one_shot", "bf16")
    assert choose(table, 4 << 20, "bf16", "int4") == ("one_shot", "bf16")
    assert choose(table, 16 * MiB, "bf16") == ("two_shot", "lossless")
    assert choose(table, 1 << 30, "bf16") == ("two_shot", "lossless")
    assert choose(table, 1 << 30, "fp16")[0] == "two_shot"
    assert choose(table, 1 << 30, "bf16", "int4") == ("two_shot", "int4")


def test_lookup_order_env_then_cache_then_builtin(tmp_path, monkeypatch):
    entries = [{"max_bytes": None, "lossless": "nccl", "lossy": {}}]
    cached = tuning.cache_path("NVIDIA H200", 2, driver="555.1")
    assert cached.name == "tune-h200-w2-555.1.json"
    tuning.save_table(_table(entries, measured=True), cached)
    table = load_table("NVIDIA H200", 2, driver="555.1")
    assert table.source == f"cache: {cached}" and choose(table, MiB, "bf16") == ("nccl", "bf16")
    # Another driver has no cache entry: the built-in table again.
    assert load_table("NVIDIA H200", 2, driver="556.0").source.startswith("built-in")

    explicit = tmp_path / "mine.json"
    tuning.save_table(_table([{"max_bytes": None, "lossless": "one_shot", "lossy": {}}]), explicit)
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(explicit))
    assert choose(load_table("NVIDIA H200", 2, driver="555.1"), MiB, "bf16")[0] == "one_shot"


def test_explicit_file_for_other_hardware_is_used_with_a_warning(tmp_path, monkeypatch):
    path = tmp_path / "other.json"
    tuning.save_table(_table([{"max_bytes": None, "lossless": "nccl", "lossy": {}}], gpu="a100",
                             world_size=8), path)
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(path))
    with pytest.warns(UserWarning, match="tuned for a100 x8"):
        table = load_table("NVIDIA H200", 2, driver="test")
    assert table.gpu == "a100"


def test_malformed_files_are_skipped_with_a_warning(tmp_path, monkeypatch):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(path))
    with pytest.warns(UserWarning, match="ignoring tuning file"):
        table = load_table("NVIDIA H200", 2, driver="test")
    assert table.source.startswith("built-in")
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(tmp_path / "missing.json"))
    with pytest.warns(UserWarning, match="does not exist"):
        load_table("NVIDIA H200", 2, driver="test")


@pytest.mark.parametrize("entries, message", [
    ([], "empty"),
    ([{"max_bytes": 100, "lossless": "one_shot", "lossy": {}}], "last breakpoint"),
    ([{"max_bytes": None, "lossless": "one_shot", "lossy": {}},
      {"max_bytes": None, "lossless": "two_shot", "lossy": {}}], "only the last"),
    ([{"max_bytes": 200, "lossless": "one_shot", "lossy": {}},
      {"max_bytes": 100, "lossless": "two_shot", "lossy": {}},
      {"max_bytes": None, "lossless": "nccl", "lossy": {}}], "sorted"),
    ([{"max_bytes": None, "lossless": "three_shot", "lossy": {}}], "unknown lossless"),
    ([{"max_bytes": None, "lossless": "nccl", "lossy": {"int4": ["magic", "int4"]}}], "bad lossy"),
])
def test_validation_rejects(entries, message):
    with pytest.raises(ValueError, match=message):
        table_from_dict(_table(entries))


def test_table_from_measurements_picks_fastest_within_each_bound():
    errors = {"int8": 0.008, "fp8": 0.034, "int6": 0.031, "int4": 0.138, "fp4": 0.144}
    rows = []
    for size in (64 << 10, MiB, 64 * MiB):
        slow = size / 1e5  # a "transfer time" that grows with size
        rows += [
            {"dtype": "bf16", "size": size, "algo": "one_shot", "codec": "bf16",
             "time_us": 3 + slow * (1.0 if size < MiB else 3.0), "rel_err": 0.002},
            {"dtype": "bf16", "size": size, "algo": "two_shot", "codec": "bf16",
             "time_us": 5 + slow, "rel_err": 0.002},
            {"dtype": "bf16", "size": size, "algo": "nccl", "codec": "bf16",
             "time_us": 12 + slow * 1.2, "rel_err": 0.002},
        ]
        for codec, err in errors.items():
            factor = {"int8": 0.55, "fp8": 0.6, "int6": 0.45, "int4": 0.30, "fp4": 0.35}[codec]
            rows.append({"dtype": "bf16", "size": size, "algo": "two_shot", "codec": codec,
                         "time_us": 6 + slow * factor, "rel_err": err})
    data = table_from_measurements(rows, "NVIDIA H200", 2, driver="test", note="synthetic")
    # the order of the codecs' worst errors over the data kinds (tuned/codec_accuracy.json)
    assert data["measured"] and data["codec_error_order"] == ["fp16", "int8", "int6h", "fp8", "int6", "int4h", "fp4",
                                                              "int4"]
    table = table_from_dict(data)
    assert choose(table, 64 << 10, "bf16") == ("one_shot", "bf16")
    assert choose(table, 64 << 10, "bf16", "int4") == ("one_shot", "bf16")  # codec overhead loses
    assert choose(table, 64 * MiB, "bf16") == ("two_shot", "bf16")
    assert choose(table, 64 * MiB, "bf16", "int8") == ("two_shot", "int8")
    # int6 is faster here, but less accurate than fp8 with outlier channels: fp8's bound runs fp8.
    assert choose(table, 64 * MiB, "bf16", "fp8") == ("two_shot", "fp8")
    # int4 is faster than fp4 and as accurate on Gaussian data, but not on heavy tails.
    assert choose(table, 64 * MiB, "bf16", "fp4") == ("two_shot", "fp4")
    assert choose(table, 64 * MiB, "bf16", "int6") == ("two_shot", "int6")
    assert choose(table, 1 << 30, "bf16", "int4") == ("two_shot", "int4")
    # Breakpoints fall at geometric means between measured sizes.
    limits = [e["max_bytes"] for e in data["dtypes"]["bf16"]]
    assert limits[0] == 262144 and limits[-1] is None


def test_lossless_codec_is_an_exact_choice():
    """The two-shot with the lossless packing competes with the exact methods (its error is theirs),
    never fills a lossy bound, and its error does not enter the codec order."""
    rows = []
    for size, packed_us in ((1 * MiB, 9.0), (256 * MiB, 600.0)):
        rows += [
            {"dtype": "bf16", "size": size, "algo": "two_shot", "codec": "bf16", "time_us": 8.0 if size == MiB else 700.0,
             "rel_err": 0.002},
            {"dtype": "bf16", "size": size, "algo": "two_shot", "codec": "lossless", "time_us": packed_us, "rel_err": 0.002},
            {"dtype": "bf16", "size": size, "algo": "two_shot", "codec": "int8", "time_us": 400.0, "rel_err": 0.008},
        ]
    data = table_from_measurements(rows, "NVIDIA H200", 2, driver="test")
    assert "lossless" not in data["codec_errors"] and data["codec_error_order"] == list(tuning.DEFAULT_CODEC_ERROR_ORDER)
    entries = data["dtypes"]["bf16"]
    assert entries[0]["lossless"] == "two_shot" and entries[-1]["lossless"] == ["two_shot", "lossless"]
    table = table_from_dict(data)
    assert choose(table, MiB, "bf16") == ("two_shot", "bf16")
    assert choose(table, 256 * MiB, "bf16") == ("two_shot", "lossless")
    assert choose(table, 256 * MiB, "bf16", "auto:int8") == ("two_shot", "int8")
    with pytest.raises(ValueError, match="unknown lossless"):
        table_from_dict(_table([{"max_bytes": None, "lossless": ["two_shot", "int4"], "lossy": {}}]))


def test_identical_neighbours_are_merged_and_files_round_trip(tmp_path):
    rows = [{"dtype": "fp16", "size": s, "algo": "two_shot", "codec": "fp16", "time_us": 1.0,
             "rel_err": 0.001} for s in (1 << 10, 1 << 20, 1 << 30)]
    data = table_from_measurements(rows, "NVIDIA H200", 4, driver="test")
    assert data["dtypes"]["fp16"] == [{"max_bytes": None, "lossless": "two_shot", "lossy": {}}]
    path = tuning.save_table(data, tmp_path / "t.json")
    assert json.loads(path.read_text()) == data
    assert choose(table_from_dict(data), 5, "fp16") == ("two_shot", "fp16")


def test_save_refuses_invalid_tables(tmp_path):
    with pytest.raises(ValueError):
        tuning.save_table(_table([{"max_bytes": 5, "lossless": "one_shot", "lossy": {}}]),
                          tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_driver_version_is_a_string():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(tuning.driver_version(), str)


def test_tune_from_csv_rebuilds_the_shipped_table(tmp_path):
    # The shipped h200 table is `quickreduce tune --from-csv` of the shipped tune measurements; the
    # same command here must give the same choices (no GPU: the rows come from the CSV).
    from pathlib import Path

    from quickreduce.cli import tune

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "rebuilt.json"
    shipped = json.loads((root / "python/quickreduce/tuned/h200-w2.json").read_text())
    assert tune.main(["--from-csv", str(root / "results/h200-x2/tune.csv"), "--out", str(out),
                      "--no-cache", "--driver", shipped["driver"]]) == 0
    rebuilt = json.loads(out.read_text())
    assert (rebuilt["dtypes"], rebuilt["collectives"]) == (shipped["dtypes"], shipped["collectives"])
    assert rebuilt["world_size"] == 2 and rebuilt["driver"] == shipped["driver"]
    assert rebuilt["codec_errors"] == pytest.approx(shipped["codec_errors"])
    # and the 4-GPU one, segment collectives included
    assert tune.main(["--from-csv", str(root / "results/h200-x4/tune.csv"), "--out", str(out),
                      "--no-cache"]) == 0
    rebuilt = json.loads(out.read_text())
    shipped = json.loads((root / "python/quickreduce/tuned/h200-w4.json").read_text())
    assert (rebuilt["dtypes"], rebuilt["collectives"]) == (shipped["dtypes"], shipped["collectives"])
    assert rebuilt["world_size"] == 4


def test_tune_from_csv_refuses_mixed_world_sizes(tmp_path, capsys):
    from quickreduce.cli import tune

    csv_path = tmp_path / "mixed.csv"
    csv_path.write_text("size_bytes,method,time_us,rel_err,identical,device,world_size,dtype\n"
                        "8192,qr_one_shot,2.0,0.001,yes,NVIDIA H200,2,bf16\n"
                        "8192,qr_one_shot,3.0,0.001,yes,NVIDIA H200,4,bf16\n")
    assert tune.main(["--from-csv", str(csv_path), "--no-cache"]) == 2
    assert "one world size" in capsys.readouterr().err


def test_tune_driver_only_with_from_csv(capsys):
    from quickreduce.cli import tune

    assert tune.main(["--driver", "580.159.04", "--no-cache"]) == 2
    assert "--from-csv" in capsys.readouterr().err


def test_collective_codecs_from_the_table_and_without_it():
    base = {"format": 2, "gpu": "h200", "world_size": 2,
            "dtypes": {"bf16": [{"max_bytes": None, "lossless": "two_shot", "lossy": {}}]}}
    unmeasured = tuning.table_from_dict(base)
    # exact: the dtype's passthrough; a bound with nothing measured: the bound codec itself
    assert tuning.choose_collective(unmeasured, "all_gather", 1 << 20, "bf16") == "bf16"
    assert tuning.choose_collective(unmeasured, "all_to_all", 1 << 20, "fp32", "auto:int6") == "int6"
    measured = tuning.table_from_dict({**base, "collectives": {"reduce_scatter": {"fp32": [
        {"max_bytes": (1 << 20) - 1, "lossy": {}},
        {"max_bytes": None, "lossy": {"int4": "int6", "int6": "int4", "fp8": "fp8"}}]}}})
    assert tuning.choose_collective(measured, "reduce_scatter", 1 << 10, "fp32", "int6") == "fp32"  # exact won
    assert tuning.choose_collective(measured, "reduce_scatter", 64 << 20, "float32", "int4") == "int6"
    # a choice less accurate than its bound (a table by an older rule) runs the bound itself
    assert tuning.choose_collective(measured, "reduce_scatter", 64 << 20, "fp32", "int6") == "int6"
    assert tuning.choose_collective(measured, "reduce_scatter", 64 << 20, "fp32", "int8") == "fp32"
    with pytest.raises(ValueError, match="unknown collective"):
        tuning.choose_collective(measured, "broadcast", 1, "bf16")
    with pytest.raises(ValueError, match="unknown collective"):
        tuning.table_from_dict({**base, "collectives": {"broadcast": {}}})
    with pytest.raises(ValueError, match="max_bytes null"):
        tuning.table_from_dict({**base, "collectives": {"all_gather": {"bf16": [{"max_bytes": 5, "lossy": {}}]}}})


def test_auto_bound_stays_exact_where_the_segments_take_packets():
    """auto:<codec> runs the exact passthrough where 16-bit segments take the flag-in-data path (the codecs
    were no faster there), and the table's choice above that, for segments of more lanes than the
    channel has threads (where the coded path was faster) and for fp32 at every size where the table
    measured fp32."""
    import types

    import torch

    from quickreduce import collectives

    lossy_everywhere = tuning.table_from_dict({
        "format": 2, "gpu": "h100", "world_size": 2,
        "dtypes": {"bf16": [{"max_bytes": None, "lossless": "two_shot", "lossy": {}}]},
        "collectives": {name: {dt: [{"max_bytes": None, "lossy": {"int4": "int4"}}] for dt in ("bf16", "fp32")}
                        for name in ("reduce_scatter", "all_gather", "all_to_all")}})
    comm = types.SimpleNamespace(world_size=2, packet_segment_max_bytes=2 << 20, max_size=64 << 20,
                                 tune_table=lambda: lossy_everywhere, codec_for=lambda name: "auto:int4")

    def codec(collective, megabytes, even=True, dtype=torch.bfloat16, **changes):
        for key, value in changes.items():
            setattr(comm, key, value)
        x = torch.empty(int(megabytes * (1 << 20)) // dtype.itemsize, dtype=dtype)
        return collectives.resolve_codec(comm, collective, None, x, even)

    assert codec("reduce_scatter", 1) == "fp16"  # 512 KiB segments: packets, a lane a thread, exact
    assert codec("reduce_scatter", 4) == "int4"  # 2 MiB segments: packets past a lane a thread, the table's codec
    assert codec("reduce_scatter", 8) == "int4"  # 4 MiB segments: the slice path, the table's codec
    assert codec("all_gather", 0.5) == "fp16"  # an all-gather's segment is its whole input
    assert codec("all_gather", 2) == "int4"  # packets past a lane a thread
    assert codec("all_gather", 4) == "int4"
    assert codec("all_to_all", 1) == "fp16"
    assert codec("all_to_all", 4) == "int4"
    assert codec("all_to_all", 1, even=False) == "int4"  # split sizes given: no packets
    for name in ("reduce_scatter", "all_gather", "all_to_all"):  # fp32: the table's codec on packets too
        assert codec(name, 0.5, dtype=torch.float32) == "int4"
    no_fp32 = tuning.table_from_dict({**lossy_everywhere.raw, "collectives": {
        name: {"bf16": entries["bf16"]} for name, entries in lossy_everywhere.raw["collectives"].items()}})
    comm.tune_table = lambda: no_fp32  # a table without fp32 entries: exact on packets, as 16-bit
    assert codec("reduce_scatter", 0.5, dtype=torch.float32) == "fp16"
    assert codec("reduce_scatter", 8, dtype=torch.float32) == "int4"  # the slice path: the bound codec itself
    assert codec("reduce_scatter", 1, packet_segment_max_bytes=0) == "int4"  # packets switched off
    assert codec("reduce_scatter", 1, packet_segment_max_bytes=2 << 20, max_size=256 << 10) == "int4"
    # a limit above the kernel's 2 MiB does not make 4 MiB segments packets
    assert codec("reduce_scatter", 8, packet_segment_max_bytes=4 << 20, max_size=64 << 20) == "int4"


# --------------------------------------------------------------------------- per-collective entries

H100 = "NVIDIA H100 80GB HBM3"
RESULTS = __import__("pathlib").Path(__file__).resolve().parents[2] / "results" / "h100-x2"
# Errors as the family CSVs measure them (reduce-scatter, bf16, Gaussian data; what a bound admits
# comes from tuned/codec_accuracy.json, every data kind).
SEGMENT_ERRORS = {"int8": 0.004, "fp8": 0.017, "int6": 0.0156, "int4": 0.069, "int4h": 0.069, "fp4": 0.072}


def _segment_rows(collective, dtype, size, passthrough_us, codec_us, nccl_us=1.0, lossless_us=None):
    """Bench rows of one segment collective at one size: NCCL (fastest, never a candidate), the
    passthrough, qr_lossless (never a candidate either) and each codec at its time."""
    base = {"collective": collective, "dtype": dtype, "size": size, "device": H100, "world_size": 2,
            "identical": None if collective != "all_gather" else True}
    exact_err = 0.0018 if dtype == "bf16" and collective == "reduce_scatter" else 0.0
    rows = [dict(base, method="nccl", time_us=nccl_us, rel_err=exact_err),
            dict(base, method="qr_passthrough", time_us=passthrough_us, rel_err=exact_err),
            dict(base, method="qr_lossless", time_us=lossless_us or passthrough_us, rel_err=exact_err)]
    rows += [dict(base, method=f"qr_{codec}", time_us=us, rel_err=SEGMENT_ERRORS[codec])
             for codec, us in codec_us.items()]
    return rows


def _synthetic_rows():
    """Hand-made rows with known times. reduce_scatter bf16: at 64K every codec loses to the
    passthrough; at 4M only int4 and fp4 beat it; at 64M int6 beats int8 and fp8 (so their
    looser bounds take it), int4 is the fastest of all (int4h's bound may not take it), and
    qr_lossless is fastest of the exact rows (it must not hide that the codecs beat the passthrough).
    all_gather bf16 (sizes are its output: the call's input is half): codecs win only at 8M.
    reduce_scatter fp32: int8 is fastest at 64M, so every bound takes it."""
    slow = {c: 7.0 for c in SEGMENT_ERRORS}
    rows = _segment_rows("reduce_scatter", "bf16", 64 << 10, 5.0, slow)
    rows += _segment_rows("reduce_scatter", "bf16", 4 * MiB, 10.0, {
        "int8": 12.0, "fp8": 11.0, "int6": 11.0, "int4": 9.0, "fp4": 9.5, "int4h": 10.5})
    rows += _segment_rows("reduce_scatter", "bf16", 64 * MiB, 100.0, {
        "int8": 60.0, "fp8": 55.0, "int6": 45.0, "int4": 30.0, "fp4": 35.0, "int4h": 52.0}, lossless_us=50.0)
    rows += _segment_rows("all_gather", "bf16", 128 << 10, 5.0, slow)
    rows += _segment_rows("all_gather", "bf16", 8 * MiB, 40.0, {
        "int8": 30.0, "fp8": 30.0, "int6": 28.0, "int4": 20.0, "fp4": 21.0, "int4h": 25.0})
    rows += _segment_rows("reduce_scatter", "fp32", 64 * MiB, 200.0, {
        "int8": 100.0, "fp8": 150.0, "int6": 150.0, "int4": 150.0, "fp4": 150.0, "int4h": 150.0})
    # The table needs the all-reduce's part too: a minimal one.
    for size in (64 << 10, 64 * MiB):
        base = {"collective": "all_reduce", "dtype": "bf16", "size": size, "device": H100,
                "world_size": 2, "identical": True}
        rows += [dict(base, method="qr_one_shot", time_us=size / 1e5, rel_err=0.0018),
                 dict(base, method="qr_two_shot", time_us=size / 2e5, rel_err=0.0018),
                 dict(base, method="qr_int4", time_us=size / 4e5, rel_err=0.119)]
    return rows


def _tune_from_rows(tmp_path, monkeypatch, rows, *flags):
    """`quickreduce tune --from-csv` of `rows` written as a bench CSV; the table as load_table
    reads it back (through QUICKREDUCE_TUNE_FILE, with its validation)."""
    from quickreduce.cli import report, tune

    csv_path = report.write_csv(report.complete_rows(rows, 2), tmp_path / "rows.csv")
    out = tmp_path / "table.json"
    assert tune.main(["--from-csv", str(csv_path), "--out", str(out), "--no-cache", *flags]) == 0
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(out))
    table = load_table(H100, 2, driver="test")
    assert table.source.startswith("QUICKREDUCE_TUNE_FILE")
    return table, json.loads(out.read_text())


def test_admits_needs_no_larger_error_in_every_cell():
    accuracy = {"gaussian": {"int8": 0.005, "fp8": 0.024, "int6": 0.022, "int4": 0.097},
                "outliers": {"int8": 0.012, "fp8": 0.006, "int6": 0.044, "int4": 0.084}}
    assert not tuning.admits("fp8", "int6", accuracy) and not tuning.admits("fp8", "int8", accuracy)
    assert not tuning.admits("int8", "fp8", accuracy)  # more accurate on one kind is not enough
    assert tuning.admits("int6", "int8", accuracy) and tuning.admits("int4", "fp8", accuracy)
    assert tuning.admits("int4", "int6", accuracy) and not tuning.admits("int6", "int4", accuracy)
    assert not tuning.admits("int4", "int6h", accuracy)  # not measured: not known to be as accurate
    assert tuning.admits("int4", "int4", accuracy) and tuning.admits("int4", "bf16", accuracy)
    assert tuning.admits("int4", "lossless", accuracy) and not tuning.admits("bf16", "int8", accuracy)


def test_collective_entries_from_a_synthetic_csv(tmp_path, monkeypatch):
    table, data = _tune_from_rows(tmp_path, monkeypatch, _synthetic_rows())
    rs, ag = "reduce_scatter", "all_gather"
    assert set(table.collectives) == {rs, ag} and set(table.collectives[rs]) == {"bf16", "fp32"}
    assert data["collective_codec_errors"][rs] == pytest.approx(SEGMENT_ERRORS)
    for bound in SEGMENT_ERRORS:  # small: the passthrough wins every bound
        assert tuning.choose_collective(table, rs, 64 << 10, "bf16", f"auto:{bound}") == "bf16"
    # 4M: only int4 and fp4 beat the passthrough (int4h is slower than it); fp4's bound may not run int4
    assert tuning.choose_collective(table, rs, 4 * MiB, "bf16", "auto:int8") == "bf16"
    assert tuning.choose_collective(table, rs, 4 * MiB, "bf16", "auto:fp8") == "bf16"
    assert tuning.choose_collective(table, rs, 4 * MiB, "bf16", "auto:int4") == "int4"
    assert tuning.choose_collective(table, rs, 4 * MiB, "bf16", "auto:fp4") == "fp4"
    assert tuning.choose_collective(table, rs, 4 * MiB, "bf16", "auto:int4h") == "bf16"
    # 64M: int4h's bound takes the faster int6, at least as accurate on every data kind, not int4;
    # fp8's may not (int6 is less accurate with outlier channels)
    assert tuning.choose_collective(table, rs, 64 * MiB, "bf16", "auto:int8") == "int8"
    assert tuning.choose_collective(table, rs, 64 * MiB, "bf16", "auto:fp8") == "fp8"
    assert tuning.choose_collective(table, rs, 64 * MiB, "bf16", "auto:int6") == "int6"
    assert tuning.choose_collective(table, rs, 64 * MiB, "bf16", "auto:int4") == "int4"
    assert tuning.choose_collective(table, rs, 64 * MiB, "bf16", "auto:int4h") == "int6"
    # between measured sizes: up to their geometric mean the smaller one's choice, then the larger's
    assert tuning.choose_collective(table, rs, 500 << 10, "bf16", "int4") == "bf16"  # < 512K
    assert tuning.choose_collective(table, rs, 1 * MiB, "bf16", "int4") == "int4"
    assert tuning.choose_collective(table, rs, 15 * MiB, "bf16", "int8") == "bf16"  # < 16M
    assert tuning.choose_collective(table, rs, 17 * MiB, "bf16", "int8") == "int8"
    assert tuning.choose_collective(table, rs, 1 << 30, "bf16", "int4h") == "int6"  # above: the last
    # exact is the passthrough, whatever the table says
    assert tuning.choose_collective(table, rs, 64 * MiB, "bf16") == "bf16"
    assert tuning.choose_collective(table, rs, 64 * MiB, "bf16", "auto:lossless") == "bf16"
    # per dtype: fp32's own entries; an unmeasured dtype gets the bound codec itself
    assert tuning.choose_collective(table, rs, 64 * MiB, "fp32", "int4") == "int8"
    assert tuning.choose_collective(table, rs, 64 * MiB, "fp16", "int4") == "int4"
    # all-gather's sizes are its call's input, half the bench's (output) size: 64K and 4M
    assert tuning.choose_collective(table, ag, 4 * MiB, "bf16", "int4") == "int4"
    assert tuning.choose_collective(table, ag, 500 << 10, "bf16", "int4") == "bf16"
    assert tuning.choose_collective(table, ag, 600 << 10, "bf16", "int4") == "int4"
    # an unmeasured collective gets the bound codec itself
    assert tuning.choose_collective(table, "all_to_all", 64 * MiB, "bf16", "int4") == "int4"
    # no NCCL, lossless or passthrough anywhere in the section (NCCL was the fastest row)
    choices = {c for per_dtype in data["collectives"].values() for entries in per_dtype.values()
               for e in entries for c in e["lossy"].values()}
    assert choices and choices <= set(SEGMENT_ERRORS)


def test_collective_bounds_not_measured_give_the_bound_codec(tmp_path, monkeypatch):
    table, data = _tune_from_rows(tmp_path, monkeypatch, _synthetic_rows(), "--codecs", "int8,int4")
    assert set(data["collective_codec_errors"]["reduce_scatter"]) == {"int8", "int4"}
    assert tuning.choose_collective(table, "reduce_scatter", 64 * MiB, "bf16", "auto:int8") == "int8"
    assert tuning.choose_collective(table, "reduce_scatter", 64 * MiB, "bf16", "auto:int4") == "int4"
    for unmeasured in ("fp8", "int6", "int4h"):
        assert tuning.choose_collective(table, "reduce_scatter", 64 * MiB, "bf16", f"auto:{unmeasured}") == unmeasured
    assert tuning.choose_collective(table, "reduce_scatter", 64 << 10, "bf16", "auto:int4") == "bf16"


def test_collective_validation_rejects_nccl_and_misplaced_null():
    base = {"format": 2, "gpu": "h100", "world_size": 2,
            "dtypes": {"bf16": [{"max_bytes": None, "lossless": "two_shot", "lossy": {}}]}}
    for lossy in ({"int4": "nccl"}, {"int4": "bf16"}, {"int4": "lossless"}, {"int3": "int4"}):
        with pytest.raises(ValueError, match="bad lossy choice"):
            table_from_dict({**base, "collectives": {"all_gather": {"bf16": [{"max_bytes": None, "lossy": lossy}]}}})
    with pytest.raises(ValueError, match="only the last"):
        table_from_dict({**base, "collectives": {"all_gather": {"bf16": [
            {"max_bytes": None, "lossy": {}}, {"max_bytes": 5, "lossy": {}}, {"max_bytes": None, "lossy": {}}]}}})
    with pytest.raises(ValueError, match="collective_codec_errors"):
        table_from_dict({**base, "collective_codec_errors": {"all_gather": {"int4": 0.1}}})


def test_live_tune_times_the_collectives_with_the_bench_sweep(tmp_path, monkeypatch):
    """`tune --collectives` without a GPU: the sweeps it hands bench's runner (fake here, answering
    with the synthetic rows) and the table it writes from their rows."""
    from quickreduce.cli import report, tune

    sweeps = []

    def fake_run(config, gpus, timeout_s):
        sweeps.append((config, timeout_s))
        plan = config.plan()
        rows = [r for r in _synthetic_rows() if r["dtype"] in config.dtypes
                and r["method"] in plan.get(r["collective"], [])]
        return {"rows": rows, "notes": [], "device": H100, "world_size": 2}

    monkeypatch.setattr(tune, "run", fake_run)
    monkeypatch.setattr(tune, "usable_gpus", lambda requested, tool: 2)
    out = tmp_path / "live.json"
    assert tune.main(["--collectives", "reduce_scatter,all_gather", "--collectives", "all_to_all",
                      "--sizes", "64K,4M,64M", "--out", str(out), "--no-cache", "--timeout", "100"]) == 0
    # all-reduce in bf16 and fp16 as always; the segment collectives in fp32 too: two sweeps
    (reduce_sweep, first_timeout), (segment_sweep, second_timeout) = sweeps
    assert reduce_sweep.methods == ["nccl"] + list(tune.candidates(list(report.QR_CODECS)))
    assert "nccl_copy" in reduce_sweep.methods  # NCCL's candidate: as `auto` runs it, after a copy
    assert reduce_sweep.dtypes == ["bf16", "fp16"] and segment_sweep.dtypes == ["bf16", "fp16", "fp32"]
    plan = segment_sweep.plan()
    assert list(plan) == ["reduce_scatter", "all_gather", "all_to_all"]
    for collective, methods in plan.items():
        assert methods[0] == "qr_passthrough" and "nccl" not in methods and "qr_lossless" not in methods
        assert {"qr_int6h", "qr_int4h"} <= set(methods) <= set(report.COLLECTIVE_METHODS[collective])
    assert first_timeout <= 100 and second_timeout <= first_timeout  # one budget for both
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(out))
    table = load_table(H100, 2, driver="test")
    assert tuning.choose_collective(table, "reduce_scatter", 64 * MiB, "bf16", "auto:int4h") == "int6"

    # --dtypes the same for all: one sweep; fp32 needs a segment collective
    sweeps.clear()
    assert tune.main(["--collectives", "all_gather", "--dtypes", "bf16", "--sizes", "64K,4M,64M",
                      "--no-cache"]) == 0
    assert len(sweeps) == 1 and list(sweeps[0][0].plan()) == ["all_reduce", "all_gather"]
    assert tune.main(["--dtypes", "bf16,fp32", "--no-cache"]) == 2
    assert tune.main(["--dtypes", "fp32", "--collectives", "all_gather", "--no-cache"]) == 2


def _fastest_admitted_codecs(rows, collective, dtype, bench_size, bound, errors):
    """The codecs a bound may run at one measured size, by time: what the table's choice must lead."""
    times = {r["method"][3:]: r["time_us"] for r in rows if r["collective"] == collective
             and r["dtype"] == dtype and r["size"] == bench_size and r["method"].startswith("qr_")}
    allowed = {c: t for c, t in times.items() if c in errors and tuning.admits(bound, c)}
    return times["passthrough"], allowed


def test_tune_from_the_h100_csvs_builds_a_valid_table(tmp_path, monkeypatch):
    from quickreduce.cli import tune
    from quickreduce.cli.report import read_csv

    files = [RESULTS / f"{name}.csv" for name in ("bench", "family-bf16", "family-fp32")]
    out = tmp_path / "h100.json"
    assert tune.main(["--from-csv", ",".join(map(str, files[:2])), "--from-csv", str(files[2]),
                      "--out", str(out), "--no-cache"]) == 0
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(out))
    table = load_table(H100, 2, driver="test")  # validated, not skipped with a warning
    assert table.source.startswith("QUICKREDUCE_TUNE_FILE") and table.gpu == "h100"
    data = table.raw
    # The family CSVs leave the all-reduce's part as the all-reduce CSV alone makes it.
    alone = tmp_path / "alone.json"
    assert tune.main(["--from-csv", str(files[0]), "--out", str(alone), "--no-cache"]) == 0
    assert json.loads(alone.read_text())["dtypes"] == data["dtypes"]

    rows = [r for f in files[1:] for r in read_csv(f)]
    assert set(table.collectives) == set(tuning.SEGMENT_COLLECTIVES)
    for collective, per_dtype in table.collectives.items():
        assert set(per_dtype) == {"bf16", "fp32"}
        errors = data["collective_codec_errors"][collective]
        assert {"int8", "fp8", "int6", "int4", "fp4", "int6h", "int4h"} == set(errors)
        for dtype in per_dtype:
            measured_sizes = sorted({r["size"] for r in rows if r["collective"] == collective and r["dtype"] == dtype})
            for bench_size in measured_sizes:
                nbytes = bench_size // 2 if collective == "all_gather" else bench_size
                # exact: the passthrough, never NCCL
                assert tuning.choose_collective(table, collective, nbytes, dtype) == dtype
                for bound in errors:
                    chosen = tuning.choose_collective(table, collective, nbytes, dtype, f"auto:{bound}")
                    passthrough_us, allowed = _fastest_admitted_codecs(rows, collective, dtype, bench_size,
                                                                       bound, errors)
                    if chosen == dtype:  # the passthrough beat every codec the bound admits
                        assert all(passthrough_us <= t for t in allowed.values())
                    else:  # a measured codec the bound admits, the fastest of them, faster than exact
                        assert chosen in allowed and allowed[chosen] == min(allowed.values())
                        assert allowed[chosen] < passthrough_us
