"""`quickreduce bench --epilogue add_rmsnorm` without GPUs: method names and selection, skip
reasons, the float64 reference and the torch sequence on CPU tensors, the CSV/table/plot handling of
the epilogue's rows (kept apart from the all-reduce rows that tune and the README table read), and
a whole sweep on CPU ranks (CUDA faked as in test_bench_cli.py, quickreduce's Communicator replaced by
a gloo stand-in so the qr_fused/qr_unfused adapters' own code runs)."""
import importlib.util
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

from quickreduce.cli import bench, epilogue, report, tune
from quickreduce.cli.methods import RunContext, SkipMethod, collective_skip_reason
from quickreduce.cli.registry import make_method
from quickreduce.cli.report import EPILOGUE, complete_rows, read_csv, write_csv
from test_bench_cli import _sweep_on_cpu  # the CPU sweep with CUDA faked

K, M = 1 << 10, 1 << 20
ROOT = Path(__file__).resolve().parents[2]


def _ctx(dtype=torch.bfloat16, hidden=64, rank=0):
    return RunContext(rank=rank, world_size=2, device=torch.device("cpu"), group=None, dtype=dtype,
                      dtype_name={torch.bfloat16: "bf16", torch.float16: "fp16",
                                  torch.float32: "fp32"}[dtype],
                      max_bytes=M, qr_max_bytes=M, peer_max_bytes=M, symm_pool_elems=0, hidden=hidden)


# --------------------------------------------------------------------------- names and selection

def test_epilogue_method_names():
    names = list(report.EPILOGUE_METHOD_LOSSY)
    assert names[:2] == ["nccl_unfused", "trtllm_fused"]
    codecs = ["passthrough", "lossless", "int8", "fp8", "int6", "int6h", "int4", "int4h", "fp4"]
    assert {f"qr_fused_{c}" for c in codecs} <= set(names)
    assert {"qr_unfused_passthrough", "qr_unfused_lossless", "qr_unfused_int4"} <= set(names)
    lossless = [n for n, lossy in report.EPILOGUE_METHOD_LOSSY.items() if not lossy]
    assert lossless == ["nccl_unfused", "trtllm_fused", "qr_fused_passthrough", "qr_fused_lossless",
                        "qr_unfused_passthrough", "qr_unfused_lossless"]
    assert report.baseline_method(EPILOGUE) == "nccl_unfused"
    assert report.baseline_method("all_reduce") == "nccl"
    assert report.is_quickreduce("qr_fused_int4") and not report.is_quickreduce("qr_unfused_int4")


def test_every_epilogue_method_has_an_adapter():
    for name, lossy in report.EPILOGUE_METHOD_LOSSY.items():
        method = make_method(name, EPILOGUE)
        assert (method.name, method.collective, method.lossy) == (name, EPILOGUE, lossy)
        assert method.shared_gpu_ok == name.startswith("qr_")
        assert method.inplace == (name == "nccl_unfused")
        if name.startswith("qr_"):
            codec = name.split("_")[-1]
            assert method.codec_request == (None if codec == "passthrough" else codec)
            assert method.api == ("all_reduce_add_rmsnorm" if "_fused_" in name else "all_reduce")
    with pytest.raises(KeyError):
        make_method("nccl", EPILOGUE)


def test_plans_with_the_epilogue():
    groups = bench.row_groups(["all_reduce"], ["add_rmsnorm", "add_rmsnorm"])
    assert groups == ["all_reduce", EPILOGUE]
    parse = bench.build_parser().parse_args
    config = bench.sweep_config(parse(["--epilogue", "add_rmsnorm"]))
    assert config.plan() == {"all_reduce": list(report.METHOD_LOSSY),
                             EPILOGUE: list(report.EPILOGUE_METHOD_LOSSY)}
    assert config.hidden == 4096
    config = bench.sweep_config(parse(["--epilogue", "add_rmsnorm", "--hidden", "8192",
                                       "--methods", "qr_fused_*,nccl_unfused"]))
    assert config.hidden == 8192 and config.plan()["all_reduce"] == []
    assert config.plan()[EPILOGUE][0] == "nccl_unfused"
    assert all(m.startswith("qr_fused_") for m in config.plan()[EPILOGUE][1:])
    # --codecs keeps the passthrough rows and the named codecs (int4h is not int4).
    config = bench.sweep_config(parse(["--epilogue", "add_rmsnorm", "--codecs", "int4",
                                       "--methods", "all"]))
    assert config.plan()[EPILOGUE] == ["nccl_unfused", "trtllm_fused", "qr_fused_passthrough",
                                       "qr_unfused_passthrough", "qr_fused_int4", "qr_unfused_int4"]
    assert "qr_int4" in config.plan()["all_reduce"]
    # Without --epilogue nothing changes.
    assert bench.sweep_config(parse([])).methods == list(report.METHOD_LOSSY)


def test_epilogue_argument_errors(capsys):
    assert bench.main(["--methods", "qr_fused_int4"]) == 2  # no --epilogue: no such method
    assert "no method matches 'qr_fused_int4'" in capsys.readouterr().err
    assert bench.main(["--epilogue", "add_rmsnorm", "--dtype", "fp32"]) == 2
    assert "bf16 or fp16" in capsys.readouterr().err
    assert bench.main(["--epilogue", "add_rmsnorm", "--hidden", "100"]) == 2
    assert "--hidden must be a positive multiple of 8" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.build_parser().parse_args(["--epilogue", "layernorm"])


def test_list_methods_and_csv_path_with_the_epilogue(capsys):
    assert bench.main(["--list-methods", "--epilogue", "add_rmsnorm"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# all_reduce" and f"# {EPILOGUE}" in out
    assert out[out.index(f"# {EPILOGUE}") + 1].split() == ["nccl_unfused", "lossless"]
    path = bench.default_csv_path("h200-x2", ["all_reduce"], False, ["add_rmsnorm"])
    assert path == bench.RESULTS_DIR / "h200-x2" / "bench-all_reduce-add_rmsnorm.csv"
    assert bench.default_csv_path("h100-x2", ["all_reduce"], True, ["add_rmsnorm"]).name == \
        "bench-all_reduce-add_rmsnorm-shared.csv"
    assert bench.default_csv_path("h200-x2", ["all_reduce"], False, None).name == "bench.csv"


# --------------------------------------------------------------------------- skip reasons

def test_skip_reasons():
    assert collective_skip_reason(EPILOGUE, 8 * K, 2, 2, 4096) is None  # one bf16 row
    assert collective_skip_reason(EPILOGUE, 24 * K, 8, 2, 4096) is None  # any number of rows
    assert "whole rows of 8192 values" in collective_skip_reason(EPILOGUE, 8 * K, 2, 2, 8192)
    assert "whole rows of 4096" in collective_skip_reason(EPILOGUE, 12 * K, 2, 2, 4096)
    assert collective_skip_reason(EPILOGUE, 16 * K, 2, 4, 4096) is None  # 4-byte values: 16K rows
    with pytest.raises(ValueError, match="hidden"):
        collective_skip_reason(EPILOGUE, 8 * K, 2)
    assert collective_skip_reason("all_reduce", 12 * K, 2, 2, 4096) is None  # others unchanged
    # fp32 has no epilogue: every adapter says so in setup.
    for name in ("nccl_unfused", "qr_fused_int4", "qr_unfused_passthrough", "trtllm_fused"):
        with pytest.raises(SkipMethod, match="fp16 or bf16"):
            make_method(name, EPILOGUE).setup(_ctx(torch.float32))


# --------------------------------------------------------------------------- reference math

def _numpy_reference(s, res, w, eps):
    r = s.astype(np.float64) + res.astype(np.float64)
    return r / np.sqrt((r * r).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)


def test_reference_is_float64_add_rmsnorm(monkeypatch):
    g = torch.Generator().manual_seed(3)
    tokens, hidden = 7, 96
    s = torch.randn(tokens * hidden, generator=g, dtype=torch.float64) * 3
    res = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    w = (1 + 0.25 * torch.randn(hidden, generator=g)).to(torch.bfloat16)
    want = _numpy_reference(s.view(tokens, hidden).numpy(), res.float().numpy(), w.float().numpy(), 1e-6)
    got = epilogue.reference(s.clone(), res, w, 1e-6)
    assert got.dtype == torch.float64 and got.shape == (tokens * hidden,)
    np.testing.assert_allclose(got.view(tokens, hidden).numpy(), want, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(epilogue, "REFERENCE_CHUNK", 2 * hidden)  # rows in chunks of 2: the same
    assert torch.equal(epilogue.reference(s.clone(), res, w, 1e-6), got)
    summed = s.clone()
    assert epilogue.reference(summed, res, w).data_ptr() == summed.data_ptr()  # in place
    with pytest.raises(TypeError, match="float64"):
        epilogue.reference(s.float(), res, w)
    with pytest.raises(ValueError, match="whole rows"):
        epilogue.reference(s[:-hidden].clone(), res, w)


def test_reference_agrees_with_the_oracle():
    """The float64 reference and the spec's bf16 arithmetic (quickreduce.oracle) differ by a few
    bf16 roundings: what the bench's rel_err column reads for an exact method."""
    from quickreduce import oracle

    g = torch.Generator().manual_seed(5)
    tokens, hidden = 5, 1024
    ranks = [torch.randn(tokens * hidden, generator=g).to(torch.bfloat16) for _ in range(2)]
    exact = sum(x.double() for x in ranks)
    res = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    w = (1 + 0.25 * torch.randn(hidden, generator=g)).to(torch.bfloat16)
    want = epilogue.reference(exact.clone(), res, w)

    def bits(t):
        return t.contiguous().view(torch.int16).numpy().view(np.uint16).reshape(-1, hidden)

    summed = exact.to(torch.bfloat16)  # the all-reduce's sum, rounded once
    out, _, _, _ = oracle.add_rmsnorm(bits(summed), bits(res), bits(w)[0], "bf16", epilogue.EPS)
    got = torch.from_numpy(oracle.to_f32(out, "bf16").astype(np.float64)).reshape(-1)
    rel = float((got - want).norm() / want.norm())
    assert 1e-4 < rel < 1e-2


def test_torch_sequence_and_rms_norm_fallback(monkeypatch):
    g = torch.Generator().manual_seed(7)
    s = torch.randn(3, 64, generator=g).to(torch.bfloat16)
    res = torch.randn(3, 64, generator=g).to(torch.bfloat16)
    w = (1 + 0.25 * torch.randn(64, generator=g)).to(torch.bfloat16)
    residual_out = torch.empty_like(s)
    normed = epilogue.torch_add_rmsnorm(s, res, w, residual_out)
    assert torch.equal(residual_out, s + res)
    want = epilogue.reference(s.double().reshape(-1).clone(), res, w).view(3, 64)
    assert float((normed.double() - want).norm() / want.norm()) < 1e-2
    in_place = s.clone()  # NCCL's row: the sum is overwritten by residual_out
    assert torch.equal(epilogue.torch_add_rmsnorm(in_place, res, w, in_place), normed)
    monkeypatch.delattr(torch.nn.functional, "rms_norm")  # torch < 2.4: Hugging Face's formula
    fallback = epilogue.rms_norm(residual_out, w)
    assert fallback.dtype == torch.bfloat16
    assert float((fallback.double() - normed.double()).abs().max()) <= 2 ** -6 * float(normed.abs().max())


def test_operands_are_the_same_on_every_rank():
    a, b = _ctx(rank=0), _ctx(rank=1)
    res_a, w_a = epilogue.operands(a, 4 * 64)
    res_b, w_b = epilogue.operands(b, 4 * 64)
    assert res_a.shape == (4, 64) and w_a.shape == (64,) and res_a.dtype == torch.bfloat16
    assert torch.equal(res_a, res_b) and torch.equal(w_a, w_b)
    assert epilogue.operands(a, 4 * 64)[0] is res_a  # kept for the size at hand
    res_c, w_c = epilogue.operands(a, 8 * 64)
    assert not torch.equal(res_c[:4], res_a) and torch.equal(w_c, w_a)  # residual by size, weight by hidden
    assert 0.8 < float(w_a.float().mean()) < 1.2


# --------------------------------------------------------------------------- CSV and report

def _rows():
    rows = []
    for size in (8 * K, 64 * M):
        for collective, method, factor, err in (
                ("all_reduce", "nccl", 1.0, 2e-3), ("all_reduce", "qr_two_shot", 0.6, 2e-3),
                ("all_reduce", "qr_int4", 0.4, 0.1),
                (EPILOGUE, "nccl_unfused", 1.2, 3e-3), (EPILOGUE, "trtllm_fused", 0.9, 3e-3),
                (EPILOGUE, "qr_fused_passthrough", 0.7, 3e-3),
                (EPILOGUE, "qr_unfused_passthrough", 0.5, 3e-3),  # faster, but not "quickreduce's"
                (EPILOGUE, "qr_fused_int4", 0.45, 0.1), (EPILOGUE, "qr_unfused_int4", 0.55, 0.1)):
            rows.append({"size": size, "method": method, "time_us": (10 + size / 3e5) * factor,
                         "rel_err": err, "identical": True, "lossy": "int4" in method,
                         "device": "NVIDIA H200", "dtype": "bf16", "collective": collective})
    return complete_rows(rows, 2)


def test_complete_rows_of_the_epilogue():
    rows = _rows()
    assert [r["collective"] for r in rows] == ["all_reduce"] * 6 + [EPILOGUE] * 12  # after the collectives
    by_key = {(r["collective"], r["method"], r["size"]): r for r in rows}
    fused = by_key[(EPILOGUE, "qr_fused_passthrough", 64 * M)]
    assert fused["vs_nccl"] == pytest.approx(1.2 / 0.7)  # against nccl_unfused
    assert fused["busbw_GBps"] == pytest.approx(fused["algbw_GBps"])  # the all-reduce's factor (W=2)
    assert fused["count"] == 32 * M and fused["type"] == "bfloat16"
    assert by_key[("all_reduce", "qr_int4", 64 * M)]["vs_nccl"] == pytest.approx(2.5)  # unchanged
    assert report.bus_factor(8, EPILOGUE) == report.bus_factor(8, "all_reduce")
    best = {c["size"]: c for c in report.best_lossless_vs_peers(
        [r for r in rows if r["collective"] == EPILOGUE])}
    assert best[8 * K]["qr_method"] == "qr_fused_passthrough"  # qr_unfused_* is neither side
    assert best[8 * K]["peer_method"] == "trtllm_fused"


def test_epilogue_rows_in_csv_tables_and_plot(tmp_path):
    rows = _rows()
    path = write_csv(rows, tmp_path / "e.csv")
    back = read_csv(path)
    assert [(r["collective"], r["method"]) for r in back] == [(r["collective"], r["method"]) for r in rows]
    assert all(r["identical"] is True for r in back)
    text = report.format_table([r for r in back if r["collective"] == EPILOGUE])
    assert "n/a" not in text and "qr_fused_int4" in text
    pytest.importorskip("rich")
    from rich.console import Console

    console = Console(record=True, width=260)
    report.print_results(back, ["a note"], console=console)
    out = console.export_text()
    assert "all-reduce (CUDA-graph" in out and "all-reduce + add + RMSNorm (CUDA-graph" in out
    assert "all-reduce + add + RMSNorm: time_us per call" in out
    pytest.importorskip("matplotlib")
    from PIL import Image

    with Image.open(report.plot(back, tmp_path / "e.png")) as image:
        width, height = image.size
    assert height > 0.6 * width  # two rows of panels: the all-reduce's and the epilogue's
    only_qr = [r for r in back if r["method"].startswith("qr_")]  # what a shared-GPU run has
    assert report.plot(only_qr, tmp_path / "q.png", note=bench.SHARED_GPU_BANNER).stat().st_size > 20_000


def test_tune_and_published_tables_ignore_the_epilogue(tmp_path):
    rows = _rows()
    plain = [r for r in rows if r["collective"] == "all_reduce"]
    candidates = tune.candidates(["int4"])
    assert tune.measurements_from_rows(rows, candidates) == tune.measurements_from_rows(plain, candidates)
    epilogue_only = [dict(r, method="nccl") for r in rows if r["collective"] == EPILOGUE]
    assert tune.measurements_from_rows(epilogue_only, candidates) == ([], [])
    both = write_csv(rows, tmp_path / "both.csv")
    assert tune.result_from_csv(str(both))["rows"]  # `tune --from-csv` reads such a CSV

    spec = importlib.util.spec_from_file_location("make_tables", ROOT / "scripts" / "make_tables.py")
    make_tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_tables)
    tables = {}
    for name, subset in (("plain", plain), ("both", rows)):
        root = tmp_path / name
        root.mkdir()
        write_csv(subset, root / "r.csv")
        (root / "README.md").write_text("intro\n<!-- table: all-reduce r.csv -->\n| 8K | 1 |\n<!-- end table -->\n"
                                        "<!-- table: summary r.csv sizes=8K,64M -->\n<!-- end table -->\nend\n")
        assert make_tables.main([], root=root) == 0
        tables[name] = (root / "README.md").read_text()
    assert tables["both"] == tables["plain"] and "| 64M |" in tables["plain"]


# --------------------------------------------------------------------------- a whole sweep on CPU

class _GlooComm:
    """quickreduce.Communicator's calls the epilogue adapters make, over gloo on CPU tensors."""

    def __init__(self, group=None, max_size=None):
        self.group = group

    def all_reduce(self, x, out=None, codec=None, algo="auto"):
        out.copy_(x)
        dist.all_reduce(out, group=self.group)
        return out

    def all_reduce_add_rmsnorm(self, x, residual, weight, eps=1e-6, codec=None, out=None,
                               residual_out=None):
        summed = self.all_reduce(x, out=out)
        out.copy_(epilogue.torch_add_rmsnorm(summed, residual, weight, residual_out, eps))
        return out, residual_out

    def check(self):
        pass

    def close(self):
        pass


def _sweep_with_gloo_comm(rank, world_size, config):
    import quickreduce

    quickreduce.Communicator = _GlooComm
    return _sweep_on_cpu(rank, world_size, config)


def test_epilogue_sweep_on_cpu_ranks(tmp_path):
    from quickreduce.cli import launch
    from quickreduce.cli.harness import SweepConfig

    plan = {"all_reduce": ["nccl"],
            EPILOGUE: ["nccl_unfused", "trtllm_fused", "qr_fused_passthrough", "qr_fused_int4",
                       "qr_unfused_passthrough"]}
    config = SweepConfig(methods=plan, sizes=[8 * K, 12 * K, 64 * K], dtypes=["bf16"],
                         iters=(3, 2, 2), replays=2, partial_csv=str(tmp_path / "p.csv"),
                         verbose=False, hidden=4096)
    result = launch.spawn(_sweep_with_gloo_comm, 2, config, backend="gloo", timeout_s=240)
    rows = {(r["collective"], r["method"], r["size"]): r for r in result["rows"]}
    ran = ["nccl_unfused", "qr_fused_passthrough", "qr_fused_int4", "qr_unfused_passthrough"]
    assert set(rows) == {("all_reduce", "nccl", s) for s in (8 * K, 12 * K, 64 * K)} | {
        (EPILOGUE, m, s) for m in ran for s in (8 * K, 64 * K)}
    for (collective, method, size), row in rows.items():
        assert row["time_us"] > 0 and row["identical"] is True
        # bf16 roundings of the sum, residual_out and the normed rows against float64
        assert 5e-4 < row["rel_err"] < 1e-2, (method, size, row["rel_err"])
    for size in (8 * K, 64 * K):  # the fused stand-in and the unfused rows compute the same
        assert rows[(EPILOGUE, "qr_fused_passthrough", size)]["rel_err"] == pytest.approx(
            rows[(EPILOGUE, "qr_unfused_passthrough", size)]["rel_err"])
    notes = "\n".join(result["notes"])
    assert f"{EPILOGUE}/trtllm_fused: not run (bf16)" in notes
    for method in ran:
        assert f"{EPILOGUE}/{method}: skipped at 12K: size is not whole rows of 4096 values" in notes
    assert {r["collective"] for r in read_csv(tmp_path / "p.csv")} == {"all_reduce", EPILOGUE}


def test_epilogue_sweep_on_a_shared_gpu():
    from quickreduce.cli import launch
    from quickreduce.cli.harness import SHARED_GPU_SKIP, SweepConfig

    config = SweepConfig(methods={EPILOGUE: ["nccl_unfused", "trtllm_fused", "qr_fused_lossless",
                                             "qr_unfused_int4"]},
                         sizes=[16 * K], dtypes=["fp16"], iters=(2, 2, 2), replays=1,
                         verbose=False, shared_gpu=True, hidden=1024)
    result = launch.spawn(_sweep_with_gloo_comm, 2, config, backend="gloo", timeout_s=240)
    assert [(r["method"], r["dtype"]) for r in result["rows"]] == [
        ("qr_fused_lossless", "fp16"), ("qr_unfused_int4", "fp16")]
    notes = "\n".join(result["notes"])
    for name in ("nccl_unfused", "trtllm_fused"):
        assert f"{EPILOGUE}/{name}: not run (fp16): {SHARED_GPU_SKIP}" in notes


def test_trtllm_fused_call_matches_flashinfer():
    """trtllm_fused's call, checked against the signature of FlashInfer's allreduce_fusion in the
    peer kit (../shared/peers, flashinfer-python 0.7.2.post1; read, not imported: it needs CUDA)."""
    import ast

    kit = ROOT.parent / "shared" / "peers" / "site" / "flashinfer" / "comm"
    if not (kit / "allreduce.py").exists():
        pytest.skip("no FlashInfer peer kit at ../shared/peers")
    tree = ast.parse((kit / "allreduce.py").read_text())
    fusion = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "allreduce_fusion")
    params = {a.arg for a in fusion.args.args + fusion.args.kwonlyargs}
    patterns = (kit / "trtllm_ar.py").read_text()
    assert "kARResidualRMSNorm = 1" in patterns

    calls = []
    fake_ar = types.SimpleNamespace(allreduce_fusion=lambda **kw: calls.append(kw) or kw["norm_out"])
    method = make_method("trtllm_fused", EPILOGUE)
    method.ctx, method.ar, method.workspace, method.pattern = _ctx(hidden=64), fake_ar, object(), 1
    inputs = method.alloc_inputs(2, 3 * 64)
    outputs = method.alloc_outputs(2, 3 * 64)
    result = method.run(inputs[1], outputs[1])
    (kw,) = calls
    assert set(kw) <= params, set(kw) - params
    assert kw["input"].shape == (3, 64) and kw["input"].data_ptr() == inputs[1].data_ptr()
    assert kw["norm_out"].data_ptr() == outputs[1, 0].data_ptr() == result.data_ptr()
    assert kw["residual_out"].data_ptr() == outputs[1, 1].data_ptr()
    assert kw["residual_in"] is method.residual and kw["rms_gamma"] is method.weight
    assert kw["output"].data_ptr() not in {t.data_ptr() for t in (outputs[0, 0], outputs[0, 1])}
