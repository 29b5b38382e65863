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
    registry = pytest.importorskip("quickreduce.cli.registry")
    for name, lossy in report.METHOD_LOSSY.items():
        method = registry.make_method(name)
        assert method.name == name and method.lossy == lossy
    assert registry.make_method("nccl").inplace and registry.make_method("symm_mem_two_shot").inplace
    assert not registry.make_method("qr_two_shot").inplace
    with pytest.raises(KeyError):
        registry.make_method("nope")


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
        return 3 * max_size + 3 * world_size * (min(max_size, _C.one_shot_max_bytes(world_size))
                                                + 2 * min(max_size, 2 << 20))  # two packet channels

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
    # NCCL in place ("nccl") is no candidate: `auto` runs NCCL after a copy, timed as "nccl_copy"
    assert {(m["algo"], m["codec"]) for m in measurements} == {("two_shot", "bf16"), ("two_shot", "int4")}
    assert len(warnings) == 2  # the inexact one-shot and the rank-disagreeing int8
    copied = [dict(r, method="nccl_copy") for r in rows if r["method"] == "nccl"]
    measurements, _ = tune.measurements_from_rows(copied, tune.candidates(["int4"]))
    assert [(m["algo"], m["codec"]) for m in measurements] == [("nccl", "bf16")] * 2
    codecs = {"all_reduce": ["int4"], **{c: ["int4"] for c in tune.SEGMENT_COLLECTIVES}}
    _, notes = tune.all_measurements(rows, codecs)  # NCCL in place only: said, not silently dropped
    assert any("no nccl_copy rows" in n for n in notes)
    _, notes = tune.all_measurements(rows + copied, codecs)
    assert not any("nccl_copy" in n for n in notes)
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

    from quickreduce.cli import harness, methods, peers, registry

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

    class ScaledGather(methods.Method):  # a lossy all-gather: the right blocks times 0.9
        name, lossy, collective, shared_gpu_ok = "scaled", True, "all_gather", True

        def run(self, inp, out):
            dist.all_gather_into_tensor(out, inp, group=self.ctx.group)
            return out.mul_(0.9)

    class SkewedAllToAll(methods.Method):  # ranks that disagree would be invisible: blocks differ
        name, collective, shared_gpu_ok = "rank_copy", "all_to_all", True

        def run(self, inp, out):
            dist.all_to_all_single(out, inp, group=self.ctx.group)
            return out

    peers.PEER_METHODS.update(broken=Broken, scaled=Scaled, small=Small)
    exchange = registry.exchange_methods
    fakes = {"all_gather": {"scaled": ScaledGather}, "all_to_all": {"rank_copy": SkewedAllToAll}}
    registry.exchange_methods = lambda c: {**exchange(c), **fakes.get(c, {})}
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


def _sweep_with_gap_time(gap_us, rank, world_size, config):
    """_sweep_on_cpu with --gap's kernel-alone time fixed at `gap_us` (its graph still runs, with its
    collectives: a fake graph's time would say nothing), plus `late_fail`, whose asynchronous errors
    surface on rank 1 only, after its timed replays (as a peer timeout would)."""
    import torch.distributed as dist

    from quickreduce.cli import harness, methods, peers, registry

    class LateFail(methods.Method):
        name = "late_fail"

        def run(self, inp, out):
            out.copy_(inp)
            dist.all_reduce(out, group=self.ctx.group)
            return out

        def raise_async_errors(self):
            self.checks = getattr(self, "checks", 0) + 1
            if rank == 1 and self.checks == 2:  # the first check follows the eager call, the second the timing
                raise RuntimeError("peer timeout on rank 1")

    peers.PEER_METHODS.update(late_fail=LateFail)
    measure = harness._gap_alone_us
    harness._gap_alone_us = lambda *args: (measure(*args), gap_us)[1]
    return _sweep_on_cpu(rank, world_size, config)


def _sweep_with_no_gap_time(rank, world_size, config):
    return _sweep_with_gap_time(0.0, rank, world_size, config)


def _sweep_with_a_long_gap_time(rank, world_size, config):
    return _sweep_with_gap_time(1e9, rank, world_size, config)


def test_gap_sweep_on_cpu_ranks():
    """bench --gap: the gap kernel's time alone is taken before a method's calls, so a method that fails
    on one rank after its timing ends in a note, not in the ranks waiting in different collectives; a
    call no slower than the gap kernel alone is refused, never reported as a time <= 0."""
    from quickreduce.cli import launch
    from quickreduce.cli.harness import SweepConfig

    config = SweepConfig(methods=["late_fail", "nccl", "scaled"], sizes=[8 * K, 64 * K], dtypes=["bf16"],
                         iters=(4, 3, 2), replays=3, verbose=False, gap=True, warm_up_first_size=False)
    result = launch.spawn(_sweep_with_no_gap_time, 2, config, backend="gloo", timeout_s=120)
    notes = "\n".join(result["notes"])
    assert "late_fail: failed at 8K" in notes and "peer timeout on rank 1" in notes
    assert {(r["method"], r["size"]) for r in result["rows"]} == {
        (m, s) for m in ("nccl", "scaled") for s in (8 * K, 64 * K)}
    assert all(r["time_us"] > 0 for r in result["rows"])
    result = launch.spawn(_sweep_with_a_long_gap_time, 2, config, backend="gloo", timeout_s=120)
    notes = "\n".join(result["notes"])
    assert result["rows"] == [] and "nccl: failed at 8K" in notes and "nothing left to report" in notes


def test_sweep_of_every_collective_on_cpu_ranks(tmp_path):
    """NCCL's rows of the segment collectives run over gloo on CPU: the references per collective,
    the identical column (n/a where ranks hold different blocks) and exactness of data movers."""
    from quickreduce.cli import launch
    from quickreduce.cli.harness import SweepConfig

    plan = {"all_reduce": ["nccl"], "reduce_scatter": ["nccl", "symm_mem", "qr_int4"],
            "all_gather": ["nccl", "scaled", "qr_passthrough"], "all_to_all": ["nccl", "rank_copy"]}
    config = SweepConfig(methods=plan, sizes=[8 * K, 64 * K], dtypes=["bf16"], iters=(3, 2, 2),
                         replays=2, partial_csv=str(tmp_path / "p.csv"), verbose=False)
    result = launch.spawn(_sweep_on_cpu, 2, config, backend="gloo", timeout_s=240)
    rows = {(r["collective"], r["method"], r["size"]): r for r in result["rows"]}
    expected = {("all_reduce", "nccl"), ("reduce_scatter", "nccl"), ("all_gather", "nccl"),
                ("all_gather", "scaled"), ("all_to_all", "nccl"), ("all_to_all", "rank_copy")}
    assert set(rows) == {(c, m, s) for c, m in expected for s in (8 * K, 64 * K)}
    for (collective, method, size), row in rows.items():
        assert row["time_us"] > 0 and row["dtype"] == "bf16"
        if collective in ("reduce_scatter", "all_to_all"):
            assert row["identical"] is None  # every rank holds a different block
        else:
            assert row["identical"] is True
        if method == "scaled":
            assert row["rel_err"] == pytest.approx(0.1, rel=0.02)
        elif collective in ("all_gather", "all_to_all"):
            assert row["rel_err"] == 0.0  # data movers are exact
        else:  # a bf16 sum of two randn inputs, rounded once
            assert 5e-4 < row["rel_err"] < 4e-3
    notes = "\n".join(result["notes"])
    assert "reduce_scatter/symm_mem: not run" in notes and "reduce_scatter/qr_int4: not run" in notes
    assert "all_gather/qr_passthrough: not run" in notes
    table = complete_rows(result["rows"], 2)
    assert [r["collective"] for r in table] == sorted(
        (r["collective"] for r in table), key=report.COLLECTIVES.index)
    back = read_csv(tmp_path / "p.csv")
    assert {r["collective"] for r in back} == set(report.COLLECTIVES)


def test_shared_gpu_sweep_skips_what_needs_a_gpu_per_rank():
    from quickreduce.cli import launch
    from quickreduce.cli.harness import SHARED_GPU_SKIP, SweepConfig

    config = SweepConfig(methods={"all_reduce": ["nccl", "symm_mem_two_shot"],
                                  "all_gather": ["nccl", "scaled"]},
                         sizes=[8 * K], dtypes=["bf16"], iters=(2, 2, 2), replays=1,
                         verbose=False, shared_gpu=True)
    result = launch.spawn(_sweep_on_cpu, 2, config, backend="gloo", timeout_s=240)
    assert [(r["collective"], r["method"]) for r in result["rows"]] == [("all_gather", "scaled")]
    notes = "\n".join(result["notes"])
    for label in ("nccl", "symm_mem_two_shot", "all_gather/nccl"):
        assert f"{label}: not run (bf16): {SHARED_GPU_SKIP}" in notes
    assert result["shared_gpu"] is True


# --------------------------------------------------------------------------- collectives

def test_bus_factor_per_collective_follows_nccl_tests():
    for world_size in (2, 4, 8):
        ring = (world_size - 1) / world_size
        assert report.bus_factor(world_size) == pytest.approx(2 * ring)
        assert report.bus_factor(world_size, "all_reduce") == pytest.approx(2 * ring)
        for collective in ("reduce_scatter", "all_gather", "all_to_all"):
            assert report.bus_factor(world_size, collective) == pytest.approx(ring)
    algbw, busbw = bandwidths(G, 1000.0, 8, "all_gather")
    assert algbw == pytest.approx(G / 1e-3 / 1e9) and busbw == pytest.approx(algbw * 7 / 8)
    with pytest.raises(ValueError, match="unknown collective"):
        report.bus_factor(2, "broadcast")


def test_nccl_count_and_collective_numels():
    from quickreduce.cli.methods import collective_numels, collective_skip_reason

    assert report.nccl_count(M, "bf16", 4) == M // 2  # all-reduce: the whole tensor
    assert report.nccl_count(M, "bf16", 4, "reduce_scatter") == M // 8  # one rank's block
    assert report.nccl_count(M, "fp32", 2, "all_to_all") == M // 8
    assert collective_numels("all_reduce", M, 2, 4) == (M // 2, M // 2)
    assert collective_numels("reduce_scatter", M, 2, 4) == (M // 2, M // 8)  # size = input
    assert collective_numels("all_gather", M, 2, 4) == (M // 8, M // 2)  # size = output
    assert collective_numels("all_to_all", M, 4, 8) == (M // 4, M // 4)
    assert collective_skip_reason("all_reduce", 8 * K, 3) is None
    assert collective_skip_reason("all_gather", 8 * K, 2) is None
    assert "16-byte" in collective_skip_reason("reduce_scatter", 8 * K, 3)  # 8K / 3
    assert "16-byte" in collective_skip_reason("all_to_all", 64, 8)  # 8-byte blocks
    with pytest.raises(ValueError):
        collective_numels("broadcast", M, 2, 2)


def _collective_rows():
    rows = []
    for collective in report.COLLECTIVES:
        for size in (8 * K, 64 * M):
            for method, factor, err, identical in (
                    ("nccl", 1.0, 1e-3, True), ("symm_mem", 0.9, 1e-3, True),
                    ("qr_passthrough", 0.8, 0.0, True), ("qr_int4", 0.5, 0.1, True)):
                if collective in ("reduce_scatter", "all_to_all"):
                    identical = None
                rows.append({"size": size, "method": method, "time_us": (10 + size / 3e5) * factor,
                             "rel_err": err, "identical": identical,
                             "lossy": method == "qr_int4", "device": "NVIDIA H200",
                             "dtype": "fp32", "collective": collective})
    return complete_rows(rows, 4)


def test_complete_rows_per_collective():
    rows = _collective_rows()
    assert [r["collective"] for r in rows[:8]] == ["all_reduce"] * 8  # display order
    by_key = {(r["collective"], r["method"], r["size"]): r for r in rows}
    gather = by_key[("all_gather", "qr_int4", 64 * M)]
    assert gather["vs_nccl"] == pytest.approx(2.0)  # against the same collective's NCCL
    assert gather["busbw_GBps"] == pytest.approx(gather["algbw_GBps"] * 3 / 4)
    assert gather["count"] == 64 * M // 4 // 4 and gather["type"] == "float"
    reduce = by_key[("all_reduce", "qr_int4", 64 * M)]
    assert reduce["busbw_GBps"] == pytest.approx(reduce["algbw_GBps"] * 1.5)
    assert reduce["count"] == 64 * M // 4
    old = complete_rows([{"size": 8 * K, "method": "nccl", "time_us": 9.0, "dtype": "bf16"}], 2)
    assert old[0]["collective"] == "all_reduce"  # rows from before the column


def test_tables_of_several_collectives(capsys):
    rows = _collective_rows()
    scatter = [r for r in rows if r["collective"] == "reduce_scatter"]
    text = format_table(scatter)
    assert text.splitlines()[0].split()[-1] == "identical"
    assert all(line.rstrip().endswith("n/a") for line in text.splitlines()[1:] if line.strip())
    gather = format_table([r for r in rows if r["collective"] == "all_gather"])
    assert "n/a" not in gather and "yes" in gather
    assert format_pivot(scatter).splitlines()[0].split()[1:] == [
        "nccl", "symm_mem", "qr_passthrough", "qr_int4"]
    pytest.importorskip("rich")
    from rich.console import Console

    console = Console(record=True, width=220)
    report.print_results(rows, ["a note"], console=console)
    out = console.export_text()
    for title in ("all-reduce (CUDA-graph", "reduce-scatter (CUDA-graph", "all-gather (CUDA-graph",
                  "all-to-all (CUDA-graph", "all-to-all: time_us per call"):
        assert title in out
    assert out.count("a note") == 1


def test_csv_collective_column_and_old_readers(tmp_path):
    rows = _collective_rows()
    path = write_csv(rows, tmp_path / "c.csv")
    header = path.read_text().splitlines()[0].split(",")
    assert header[-1] == "collective"
    # The columns that were there before keep their names and places.
    assert header[:14] == ["size_bytes", "count", "type", "method", "time_us", "algbw_gbs",
                           "busbw_gbs", "speedup_vs_nccl", "rel_err", "identical", "lossy",
                           "device", "world_size", "dtype"]
    back = read_csv(path)
    assert [r["collective"] for r in back] == [r["collective"] for r in rows]
    assert sum(r["identical"] is None for r in back) == 16  # reduce-scatter, all-to-all: n/a
    # A CSV from before the column reads as all-reduce rows.
    old = tmp_path / "old.csv"
    old.write_text("size_bytes,method,time_us,dtype\n8192,nccl,11.9,bf16\n")
    assert read_csv(old)[0]["collective"] == "all_reduce"
    # `quickreduce tune --from-csv` takes the all-reduce rows only (NCCL in place is no candidate).
    measurements, _ = tune.measurements_from_rows(back, tune.candidates(["int4"]))
    assert sorted((m["algo"], m["codec"]) for m in measurements) == [("two_shot", "int4"), ("two_shot", "int4")]
    others = [r for r in back if r["collective"] != "all_reduce"]
    assert tune.measurements_from_rows(others, tune.candidates(["int4"])) == ([], [])


def test_published_bench_csv_reads_as_all_reduce_rows():
    """scripts/make_tables.py keys times by (size, method): an all-reduce CSV (bench's default
    output, collective column or not) still gives it one value per cell."""
    import csv as csv_module

    path = report.Path(__file__).resolve().parents[2] / "results" / "h200-x2" / "bench.csv"
    rows = read_csv(path)
    assert rows and {r["collective"] for r in rows} == {"all_reduce"}
    keys = [(r["size"], r["method"]) for r in rows]
    assert len(keys) == len(set(keys))
    with open(path, newline="") as f:
        assert "size_bytes" in next(csv_module.reader(f))


def test_plot_of_several_collectives(tmp_path):
    pytest.importorskip("matplotlib")
    png = report.plot(_collective_rows(), tmp_path / "c.png")
    from PIL import Image

    with Image.open(png) as image:
        width, height = image.size
    assert height > 1.4 * width  # four rows of three panels, one row per collective
    only_qr = [r for r in _collective_rows() if r["method"].startswith("qr_")]  # a shared-GPU run
    assert report.plot(only_qr, tmp_path / "q.png", note=bench.SHARED_GPU_BANNER).stat().st_size > 20_000


def test_parse_collectives_and_plans():
    assert bench.parse_collectives(None) == ["all_reduce"]
    assert bench.parse_collectives(["all_to_all,reduce_scatter", "all_reduce"]) == [
        "all_reduce", "reduce_scatter", "all_to_all"]
    assert bench.parse_collectives(["all_gather", "all_gather"]) == ["all_gather"]
    for bad in (["broadcast"], ["all_reduce,allgather"], [","]):
        with pytest.raises(ValueError, match="unknown collective"):
            bench.parse_collectives(bad)
    plan = bench.select_plan("nccl,qr_*", None, ["all_reduce", "all_gather"])
    assert plan["all_gather"] == ["nccl", "qr_passthrough", "qr_lossless", "qr_fp8", "qr_int8",
                                  "qr_int6", "qr_int4", "qr_fp4", "qr_int4h", "qr_int6h", "qr_auto_int4"]
    assert "qr_one_shot" in plan["all_reduce"] and "symm_mem" not in plan["all_gather"]
    plan = bench.select_plan("symm_mem_two_shot,symm_mem", None, ["all_reduce", "reduce_scatter"])
    assert plan == {"all_reduce": ["symm_mem_two_shot"], "reduce_scatter": ["symm_mem"]}
    with pytest.raises(ValueError, match="no method matches 'symm_mem_two_shot'"):
        bench.select_plan("symm_mem_two_shot", None, ["all_gather"])
    plan = bench.select_plan("all", "int4", ["all_to_all"])
    assert plan["all_to_all"] == ["nccl", "nccl_symm", "symm_mem", "qr_passthrough", "qr_int4", "qr_auto_int4"]


def test_bench_arguments(tmp_path):
    parse = bench.build_parser().parse_args
    config = bench.sweep_config(parse([]))
    assert config.methods == list(report.METHOD_LOSSY) and config.plan() == {
        "all_reduce": list(report.METHOD_LOSSY)}  # today's run, unchanged
    assert (config.iters, config.warmup, config.replays) == ((50, 20, 5), 2, 7)
    assert config.sizes == parse_sizes("8K:1G") and not config.shared_gpu and not config.gap
    assert bench.sweep_config(parse(["--gap"])).gap  # a kernel between every two calls
    config = bench.sweep_config(parse(["--collective", "reduce_scatter,all_gather", "--dtype",
                                       "fp32", "--methods", "nccl,qr_int8"]))
    assert config.plan() == {"reduce_scatter": ["nccl", "qr_int8"],
                             "all_gather": ["nccl", "qr_int8"]}
    assert config.dtypes == ["fp32"]
    config = bench.sweep_config(parse(["--shared-gpu", "--collective", "all_to_all"]))
    assert config.shared_gpu and config.sizes == parse_sizes(bench.SHARED_SIZES)
    assert (config.iters, config.warmup, config.replays) == ((3, 2, 1), 1, 2)
    config = bench.sweep_config(parse(["--shared-gpu", "--iters", "4", "--replays", "3",
                                       "--sizes", "1M"]))
    assert (config.iters, config.replays, config.sizes) == ((4, 4, 4), 3, [M])
    with pytest.raises(SystemExit):
        parse(["--dtype", "fp64"])
    assert bench.main(["--collective", "gather"]) == 2
    assert bench.main(["--collective", "all_gather", "--methods", "trtllm_*"]) == 2
    assert bench.default_csv_path("h200-x2", ["all_reduce"], False) == bench.RESULTS_DIR / "h200-x2" / "bench.csv"
    assert bench.default_csv_path("h200-x2", ["all_reduce"], False, gap=True).name == "bench-gap.csv"
    assert bench.default_csv_path("h100-x2", ["all_reduce", "all_gather"], True).name == \
        "bench-all_reduce-all_gather-shared.csv"


def test_list_methods_per_collective(capsys):
    assert bench.main(["--list-methods", "--collective", "all_gather"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "# all_gather" and "qr_passthrough" in out
    assert "trtllm" not in out
    assert bench.main(["--list-methods"]) == 0
    out = capsys.readouterr().out
    assert "#" not in out and out.splitlines()[0].split() == ["nccl", "lossless"]


def test_every_collective_method_has_an_adapter():
    registry = pytest.importorskip("quickreduce.cli.registry")
    for collective, known in report.COLLECTIVE_METHODS.items():
        for name, lossy in known.items():
            method = registry.make_method(name, collective)
            assert (method.name, method.collective, method.lossy) == (name, collective, lossy)
            assert method.shared_gpu_ok == name.startswith("qr_")
            if collective in ("reduce_scatter", "all_gather", "all_to_all"):
                assert not method.inplace
    with pytest.raises(KeyError):
        registry.make_method("trtllm_one_shot", "all_gather")
    with pytest.raises(KeyError):
        registry.make_method("nccl", "broadcast")


def test_shared_gpu_without_a_gpu_says_so(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the shared-GPU run would start")
    from quickreduce.cli import launch

    with pytest.raises(launch.LaunchError, match="one visible GPU"):
        launch.spawn(_ok, 2, 0, shared_gpu=True, timeout_s=30)
    assert bench.main(["--shared-gpu", "--sizes", "8K", "--csv", "/nonexistent/x.csv"]) == 1
    err = capsys.readouterr().err
    assert "SHARED GPU: TIMINGS ARE MEANINGLESS, RESULTS ARE CHECKED" in err
    assert "2 ranks on one shared GPU" in err
