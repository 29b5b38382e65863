"""`quickreduce bench/tune` without GPUs: sizes, bandwidth math, tables, CSV, plots, method
selection, graph plans, the process launcher (gloo), and one whole sweep on CPU ranks with the
CUDA calls faked, so its control flow, reference math and failure handling run before any GPU."""
import contextlib
import math
import time
import types

import pytest

from quickreduce.cli import bench, report, tune
from quickreduce.cli.report import (bandwidths, complete_rows, format_pivot, format_table,
                                    human_size, parse_size, parse_sizes, read_csv, write_csv)
from quickreduce.tuning import choose, load_table

K, M, G = 1 << 10, 1 << 20, 1 << 30


# --------------------------------------------------------------------------- sizes and math

def test_parse_size_units():
    assert parse_size("8K") == 8192
    assert parse_size("64M") == 64 * M
    assert parse_size("1G") == G
    assert parse_size("4096") == 4096
    assert parse_size("1.5K") == 1536
    assert parse_size("2MiB") == 2 * M
    for bad in ("", "8X", "-1K", "0", "1.3"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_parse_sizes_ranges_and_lists():
    assert parse_sizes("8K:1G") == [8 * K << i for i in range(18)]
    assert parse_sizes("8K:1M:4") == [8 * K, 32 * K, 128 * K, 512 * K]
    assert parse_sizes("1M,8K, 64K") == [8 * K, 64 * K, M]
    assert parse_sizes("8K:32K,1G,16K") == [8 * K, 16 * K, 32 * K, G]
    with pytest.raises(ValueError, match="multiples of 16"):
        parse_sizes("1000")
    for bad in ("1G:8K", "8K:1G:1", "8K:16K:2:3", ","):
        with pytest.raises(ValueError):
            parse_sizes(bad)


def test_human_size_and_device_tag():
    assert [human_size(s) for s in (8 * K, 3 * M, G, 1000, 1536)] == ["8K", "3M", "1G", "1000", "1536"]
    assert report.device_tag("NVIDIA H200", 2) == "h200-x2"


def test_bus_bandwidth_follows_nccl_tests():
    algbw, busbw = bandwidths(G, 3261.3, 2)
    assert algbw == pytest.approx(G / 3261.3e-6 / 1e9)
    assert busbw == pytest.approx(algbw)  # 2 ranks: factor 2(n-1)/n = 1
    assert bandwidths(G, 1000.0, 8)[1] == pytest.approx(bandwidths(G, 1000.0, 8)[0] * 1.75)
    assert report.bus_factor(4) == 1.5


def _rows():
    rows = []
    for size in (8 * K, 64 * M):
        for method, factor, err in (("nccl", 1.0, 1.8e-3), ("symm_mem_two_shot", 0.8, 1.8e-3),
                                    ("qr_two_shot", 0.7, 1.8e-3), ("qr_int4", 0.4, 0.138)):
            rows.append({"size": size, "method": method, "time_us": (10 + size / 3e5) * factor,
                         "rel_err": err, "identical": True, "lossy": method == "qr_int4",
                         "device": "NVIDIA H200", "dtype": "bf16"})
    return complete_rows(rows, 2)


def test_complete_rows_fills_nccl_tests_columns():
    rows = _rows()
    first = rows[0]
    assert (first["size"], first["method"], first["count"], first["type"]) == (8 * K, "nccl", 4 * K, "bfloat16")
    assert first["vs_nccl"] == 1.0 and first["world_size"] == 2
    qr = next(r for r in rows if r["method"] == "qr_int4" and r["size"] == 64 * M)
    assert qr["vs_nccl"] == pytest.approx(2.5)
    assert qr["busbw_GBps"] == pytest.approx(64 * M / (qr["time_us"] * 1e-6) / 1e9)


def test_text_table_and_pivot():
    text = format_table(_rows())
    header = text.splitlines()[0].split()
    assert header == ["#", "size", "count", "type", "method", "time_us", "algbw_GBps",
                      "busbw_GBps", "vs_nccl", "rel_err", "identical"]
    assert "" in text.splitlines()  # a blank line between sizes
    assert "2.50x" in text and "1.4e-01" in text and "yes" in text
    pivot = format_pivot(_rows())
    assert "8K" in pivot and "64M" in pivot
    # The fastest lossless method is starred, never the lossy qr_int4.
    line_64m = next(line for line in pivot.splitlines() if line.strip().startswith("64M"))
    assert line_64m.count("*") == 1 and pivot.splitlines()[0].split()[-1] == "qr_int4"


def test_rich_output_renders(capsys):
    pytest.importorskip("rich")
    from rich.console import Console

    console = Console(record=True, width=200)
    report.print_results(_rows(), ["peers skipped: no flashinfer"], console=console)
    text = console.export_text()
    assert "qr_int4" in text and "time_us per call" in text and "no flashinfer" in text


def test_csv_round_trip(tmp_path):
    rows = _rows()
    rows[1]["rel_err"] = None
    rows[2]["identical"] = False
    path = write_csv(rows, tmp_path / "sub" / "r.csv")
    header = path.read_text().splitlines()[0].split(",")
    assert header == [report._CSV_HEADER.get(c, c) for c in report.CSV_COLUMNS]
    assert {"size_bytes", "dtype", "world_size", "method", "time_us", "busbw_gbs", "speedup_vs_nccl", "rel_err"} <= set(header)
    back = read_csv(path)
    assert len(back) == len(rows)
    assert back[1]["rel_err"] is None and back[2]["identical"] is False and back[0]["identical"]
    assert back[0]["size"] == 8 * K and back[0]["time_us"] == pytest.approx(rows[0]["time_us"], abs=1e-3)
    assert back[-1]["lossy"] is True and back[0]["world_size"] == 2


def test_read_csv_of_the_peers_kit(tmp_path):
    path = tmp_path / "peers.csv"
    path.write_text("size_bytes,method,time_us,rel_err,speedup_vs_nccl\n"
                    "8192,nccl,11.95,1.81e-03,1.000\n8192,symm_mem_two_shot,6.33,1.81e-03,1.889\n")
    rows = read_csv(path)
    assert [r["method"] for r in rows] == ["nccl", "symm_mem_two_shot"]
    assert rows[1]["size"] == 8192 and rows[1]["vs_nccl"] == pytest.approx(1.889)


def test_plot_from_csv_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    csv_path = write_csv(_rows(), tmp_path / "r.csv")
    png = tmp_path / "plots" / "r.png"
    assert bench.main(["--from-csv", str(csv_path), "--plot", str(png)]) == 0
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert "qr_int4" in capsys.readouterr().out


def test_plot_many_sizes_and_unknown_methods(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [{"size": s, "method": m, "time_us": 5.0 + s / 1e5, "dtype": "fp16"}
            for s in parse_sizes("8K:1G") for m in ("nccl", "someone_else_int4")]
    assert report.plot(rows, tmp_path / "p.png", title="t").stat().st_size > 20_000
    with pytest.raises(ValueError, match="nothing to plot"):
        report.plot([{"size": 16, "method": "nccl", "time_us": None}], tmp_path / "q.png")


def test_best_lossless_vs_peers_and_sparse_plots(tmp_path):
    rows = [r for r in _rows() if not (r["method"] == "symm_mem_two_shot" and r["size"] == 64 * M)]
    rows += [{"size": 8 * K, "method": "qr_one_shot", "time_us": 5.0, "lossy": False, "dtype": "bf16"},
             {"size": 8 * K, "method": "qr_odd", "time_us": 0.5, "lossy": True, "dtype": "bf16"},
             {"size": M, "method": "nccl", "time_us": 30.0, "lossy": False, "dtype": "bf16"}]
    rows += [{"size": s, "method": "flashinfer_fp8", "time_us": 1.0, "lossy": True, "dtype": "bf16"}
             for s in (8 * K, 64 * M)]  # a lossy peer is never the best peer
    by_size = {c["size"]: c for c in report.best_lossless_vs_peers(rows)}
    assert sorted(by_size) == [8 * K, M, 64 * M]
    small, big = by_size[8 * K], by_size[64 * M]
    assert (small["qr_method"], small["peer_method"]) == ("qr_one_shot", "symm_mem_two_shot")
    assert small["speedup"] == pytest.approx(small["peer_time_us"] / 5.0)
    assert big["peer_method"] == "nccl" and big["speedup"] == pytest.approx(1 / 0.7)  # symm missing
    assert by_size[M]["qr_method"] is None and by_size[M]["speedup"] is None
    pytest.importorskip("matplotlib")
    for name, subset in (("all", rows), ("no_nccl", [r for r in rows if r["method"] != "nccl"]),
                         ("only_qr", [r for r in rows if r["method"].startswith("qr_")]),
                         ("one_size", [r for r in rows if r["size"] == 8 * K])):
        assert report.plot(subset, tmp_path / f"{name}.png").stat().st_size > 20_000


# --------------------------------------------------------------------------- options

def test_select_methods():
    assert bench.select_methods("all") == list(report.METHOD_LOSSY)
    assert bench.select_methods("qr_int4,nccl") == ["nccl", "qr_int4"]
    assert bench.select_methods("trtllm_*") == ["trtllm_one_shot", "trtllm_one_shot_pdl", "trtllm_two_shot"]
    kept = bench.select_methods("all", codecs="int4")
    assert "qr_int4" in kept and "qr_auto_int4" in kept and "qr_fp8" not in kept
    assert "flashinfer_fp8" in kept and "nccl" in kept
    with pytest.raises(ValueError, match="no method matches"):
        bench.select_methods("nccl,magic")


def test_parse_iters():
    assert bench.parse_iters("50,20,5") == (50, 20, 5)
    assert bench.parse_iters("7") == (7, 7, 7)
    for bad in ("1,2", "0", "a"):
        with pytest.raises(ValueError):
            bench.parse_iters(bad)


def test_list_methods(capsys):
    assert bench.main(["--list-methods"]) == 0
    assert "qr_auto_int4" in capsys.readouterr().out


def test_graph_plan():
    harness = pytest.importorskip("quickreduce.cli.harness")
    l2, budget = 60 * M, 6 * G
    assert harness.graph_plan(8 * K, False, (50, 20, 5), l2, budget) == (50, 50)
    assert harness.graph_plan(64 * M, False, (50, 20, 5), l2, budget) == (20, 4)  # >= 4x L2
    assert harness.graph_plan(G, False, (50, 20, 5), l2, budget) == (5, 1)
    assert harness.graph_plan(G, True, (50, 20, 5), l2, budget) == (5, 5)  # a buffer per call
    assert harness.graph_plan(G, True, (50, 20, 5), l2, 2 * G) == (2, 2)  # budget caps calls
    assert harness.graph_plan(M - 16, False, (50, 20, 5), l2, budget)[0] == 50


def test_every_listed_method_has_an_adapter():
    methods = pytest.importorskip("quickreduce.cli.methods")
    for name, lossy in report.METHOD_LOSSY.items():
        method = methods.make_method(name)
        assert method.name == name and method.lossy == lossy
    assert methods.make_method("nccl").inplace and methods.make_method("symm_mem_two_shot").inplace
    assert not methods.make_method("qr_two_shot").inplace
    with pytest.raises(KeyError):
        methods.make_method("nope")


def test_info_runs_without_gpus(capsys):
    from quickreduce.cli import info

    assert info.main([]) == 0
    out = capsys.readouterr().out
    assert "quickreduce" in out and "NCCL_NVLS_ENABLE" in out
    assert "8 MiB on 2 GPUs, 4 MiB on 4 GPUs" in out  # the one-shot limit per world size


def test_one_shot_limit_and_workspace_follow_world_size():
    from quickreduce import _C

    MiB = 1 << 20
    assert _C.one_shot_max_bytes(2) == 8 * MiB and _C.one_shot_max_bytes(8) == 4 * MiB

    def data_regions(world_size, max_size):  # the README's formula, flags and control aside
        return 3 * max_size + 3 * world_size * min(max_size, _C.one_shot_max_bytes(world_size))

    # Flags grow with max_size / 1024 slices x world size (the exchange's and the two-shot's).
    for world_size, max_size in ((2, MiB), (2, 16 * MiB), (4, 16 * MiB), (8, 128 * MiB)):
        extra = _C.workspace_bytes(world_size, max_size) - data_regions(world_size, max_size)
        assert 0 <= extra < 2 * MiB + max_size // 16, (world_size, max_size, extra)

def test_trtllm_shape():
    peers = pytest.importorskip("quickreduce.cli.peers")
    assert peers.trtllm_shape(4096, 2) == (4, 1024)  # 8 KB bf16: more tokens than ranks
    assert peers.trtllm_shape(4096, 8) == (16, 256)
    assert peers.trtllm_shape(32 * M, 2) == (8192, 4096)
    assert peers.trtllm_shape(100, 2) is None


def test_multicast_guard_refuses():
    peers = pytest.importorskip("quickreduce.cli.peers")
    fake = types.ModuleType("fake_driver")
    fake.cuMulticastCreate = lambda prop: (0, "handle")
    import sys

    sys.modules["cuda.bindings.driver"] = fake
    try:
        assert "cuda.bindings.driver" in peers.install_multicast_guard()
        with pytest.raises(peers.MulticastBlocked):
            fake.cuMulticastCreate(None)
    finally:
        del sys.modules["cuda.bindings.driver"]


def test_tune_rows_to_measurements():
    rows = _rows() + [{"size": 8 * K, "method": "qr_one_shot", "time_us": 3.0, "rel_err": 0.5,
                       "identical": True, "dtype": "bf16"},
                      {"size": 64 * M, "method": "qr_int8", "time_us": 1.0, "rel_err": 0.01,
                       "identical": False, "dtype": "bf16"}]
    measurements, warnings = tune.measurements_from_rows(rows, tune.candidates(["int4", "int8"]))
    assert {(m["algo"], m["codec"]) for m in measurements} == {
        ("nccl", "bf16"), ("two_shot", "bf16"), ("two_shot", "int4")}
    assert len(warnings) == 2  # the inexact one-shot and the rank-disagreeing int8
    lines = tune.describe({"codec_error_order": ["fp16", "int8", "int4"], "dtypes": {"bf16": [
        {"max_bytes": 1048575, "lossless": "one_shot", "lossy": {}},
        {"max_bytes": None, "lossless": "two_shot", "lossy": {"int4": ["two_shot", "int4"]}}]}})
    assert lines[0] == ["dtype", "sizes", "lossless", "<= int8", "<= int4"]
    assert lines[2] == ["bf16", "1M..inf", "two_shot", "(lossless)", "two_shot/int4"]


def test_choose_from_a_table_file(tmp_path, monkeypatch):
    from quickreduce import tuning

    path = tuning.save_table({"format": 1, "gpu": "h200", "world_size": 2, "dtypes": {"bf16": [
        {"max_bytes": M - 1, "lossless": "one_shot", "lossy": {}},
        {"max_bytes": None, "lossless": "two_shot", "lossy": {"int4": ["two_shot", "int4"]}}]}},
        tmp_path / "t.json")
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", str(path))
    table = load_table("NVIDIA H200", 2, driver="none")
    assert choose(table, 8 * K, "bf16") == ("one_shot", "bf16")
    assert choose(table, 256 * M, "bf16", "auto:int4") == ("two_shot", "int4")


# --------------------------------------------------------------------------- launcher

def _ok(rank, world_size, offset):
    import torch
    import torch.distributed as dist

    t = torch.tensor([rank + offset])
    dist.all_reduce(t)
    return {"rank": rank, "sum": int(t.item()), "world_size": world_size}


def _fail_on_rank_1(rank, world_size):
    import torch.distributed as dist

    if rank == 1:
        raise ValueError("boom on rank 1")
    dist.barrier()  # rank 0 waits forever for rank 1: the launcher must stop it


def _hang(rank, world_size):
    time.sleep(600)


def test_launcher_returns_rank0_result():
    from quickreduce.cli import launch

    assert launch.spawn(_ok, 2, 5, backend="gloo", timeout_s=120) == {"rank": 0, "sum": 11, "world_size": 2}


def test_launcher_reports_a_failing_rank():
    from quickreduce.cli import launch

    start = time.monotonic()
    with pytest.raises(launch.LaunchError, match="boom on rank 1"):
        launch.spawn(_fail_on_rank_1, 2, backend="gloo", timeout_s=120, grace_s=2)
    assert time.monotonic() - start < 60


def test_launcher_kills_hung_ranks():
    from quickreduce.cli import launch

    start = time.monotonic()
    with pytest.raises(launch.LaunchTimeout):
        launch.spawn(_hang, 2, backend="gloo", timeout_s=8)
    assert time.monotonic() - start < 60


# --------------------------------------------------------------------------- a whole sweep on CPU

class _FakeEvent:
    def __init__(self, enable_timing=False):
        self.t = 0.0

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3

    def synchronize(self):
        pass


class _FakeGraph:
    def replay(self):
        time.sleep(0.002)


def _sweep_on_cpu(rank, world_size, config):
    """run_sweep on a gloo rank: CUDA calls are stubbed, the method bodies run eagerly on CPU."""
    import torch
    import torch.distributed as dist

    from quickreduce.cli import harness, methods, peers

    cuda = torch.cuda
    cuda.synchronize = lambda *a, **k: None
    cuda.Event, cuda.CUDAGraph = _FakeEvent, _FakeGraph
    cuda.graph = lambda *a, **k: contextlib.nullcontext()
    cuda._sleep = lambda cycles: None
    cuda.is_current_stream_capturing = lambda: False
    cuda.get_device_properties = lambda d=None: types.SimpleNamespace(name="Fake GPU", L2_cache_size=M)
    harness.local_device = lambda: torch.device("cpu")

    class Broken(methods.Method):
        name = "broken"

        def run(self, inp, out):
            raise RuntimeError("kaboom")

    class Scaled(methods.Method):  # a "lossy" method: the right sum times 0.9
        name, lossy = "scaled", True

        def run(self, inp, out):
            out.copy_(inp)
            dist.all_reduce(out, group=self.ctx.group)
            return out.mul_(0.9)

    class Small(methods.Method):  # skips sizes above 64K
        name = "small"
        inplace = True

        def skip_reason(self, nbytes):
            return "too big" if nbytes > 64 * K else None

        def run(self, inp, out):
            dist.all_reduce(inp, group=self.ctx.group)
            return inp

    peers.PEER_METHODS.update(broken=Broken, scaled=Scaled, small=Small)
    return harness.run_sweep(rank, world_size, config)


def test_sweep_on_cpu_ranks(tmp_path):
    from quickreduce.cli import launch
    from quickreduce.cli.harness import SweepConfig

    partial = tmp_path / "partial.csv"
    config = SweepConfig(methods=["nccl", "symm_mem_two_shot", "qr_two_shot", "broken", "scaled", "small"],
                         sizes=[8 * K, 64 * K, M], dtypes=["bf16"], iters=(4, 3, 2), replays=3,
                         partial_csv=str(partial), verbose=False)
    result = launch.spawn(_sweep_on_cpu, 2, config, backend="gloo", timeout_s=240)
    rows = {(r["method"], r["size"]): r for r in result["rows"]}
    assert result["device"] == "Fake GPU" and result["world_size"] == 2
    assert set(rows) == {(m, s) for m in ("nccl", "scaled") for s in (8 * K, 64 * K, M)} | {
        ("small", 8 * K), ("small", 64 * K)}
    for (method, size), row in rows.items():
        assert row["identical"] is True and row["time_us"] > 0 and row["dtype"] == "bf16"
        if method == "scaled":
            assert row["rel_err"] == pytest.approx(0.1, rel=0.02)
        else:  # a bf16 sum of two randn inputs, rounded once: ~1.8e-3 (baselines.md)
            assert 5e-4 < row["rel_err"] < 4e-3
    assert rows[("nccl", M)]["calls"] == 3 and rows[("nccl", M)]["buffers"] == 3  # in place: B = K
    assert rows[("scaled", 8 * K)]["calls"] == 4
    notes = "\n".join(result["notes"])
    assert "broken: failed at 8K" in notes and "kaboom" in notes
    assert "symm_mem_two_shot: not run" in notes and "qr_two_shot: not run" in notes
    assert "small: skipped at 1M: too big" in notes
    assert len(read_csv(partial)) == len(rows)
    assert not any(math.isnan(r["time_us"]) for r in result["rows"])
