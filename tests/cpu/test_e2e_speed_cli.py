"""`quickreduce e2e` (speed) without GPUs: argument parsing, provider selection, the token-check
verdicts, tables/CSV/plot, and one whole speed run on gloo CPU ranks with the CUDA calls faked
(graphs replaced by eager decode steps), so the runner's control flow runs before any GPU."""

import pytest
import torch

from quickreduce.cli import e2e as cli
from quickreduce.e2e import report
from quickreduce.e2e.config import ModelConfig
from quickreduce.e2e.providers import DEFAULT_PROVIDERS, PROVIDERS, select_providers
from quickreduce.e2e.speed import SpeedConfig, judge_tokens

TINY = ModelConfig("tiny", hidden=64, heads=8, kv_heads=2, intermediate=96, vocab=97, layers=2, rope_theta=10_000.0)


# --------------------------------------------------------------------------- arguments

def test_parse_counts():
    assert cli.parse_counts("1k,4k,8192", "x") == [1024, 4096, 8192]
    assert cli.parse_counts("256, 1, 16,16", "x") == [1, 16, 256]
    for bad in ("", "0", "-1", "1.5k", "abc", "4m"):
        with pytest.raises(ValueError):
            cli.parse_counts(bad, "x")


def test_select_providers():
    assert select_providers("default") == DEFAULT_PROVIDERS
    assert select_providers("qr_int4,nccl") == ["nccl", "qr_int4"]  # table order
    assert select_providers("symm_mem_*") == ["symm_mem_one_shot", "symm_mem_two_shot"]
    assert "qr_int4h" in select_providers("all") and "qr_int4h" not in DEFAULT_PROVIDERS
    assert {"nccl", "symm_mem_one_shot", "trtllm_one_shot", "qr_lossless", "qr_auto", "qr_auto_int6", "qr_int8",
            "qr_int6", "qr_int4", "qr_fp4"} <= set(DEFAULT_PROVIDERS)
    with pytest.raises(ValueError, match="no provider matches 'mpi'"):
        select_providers("nccl,mpi")


def test_every_provider_has_an_adapter():
    from quickreduce.e2e.providers import make_provider_method

    for name in PROVIDERS:
        method = make_provider_method(name)
        assert method.name == name
    assert make_provider_method("qr_auto_int6").codec_request == "auto:int6"
    assert make_provider_method("qr_auto_int6").lossy and not make_provider_method("qr_auto").lossy


def _args(*argv):
    return cli.build_parser().parse_args(list(argv))


def test_speed_config_defaults_and_shared_gpu_defaults():
    cfg = cli.speed_config(_args("--layers", "2"), 4)
    assert (cfg.model.name, cfg.model.layers) == ("llama3-8b", 2)
    assert cfg.prefill_tokens == [1024, 4096, 8192] and cfg.decode_batches == [1, 16, 64, 256]
    assert cfg.providers == DEFAULT_PROVIDERS and cfg.check and cfg.timing
    assert cfg.max_message_numel() == 8192 * 4096
    shared = cli.speed_config(_args("--shared-gpu", "--model", "qwen3-32b-like", "--layers", "1",
                                    "--providers", "qr_*", "--check-only"), 2)
    assert shared.shared_gpu and not shared.timing and shared.prefill_tokens == [256] and shared.iters == 2
    assert shared.model.qk_norm and all(p.startswith("qr_") for p in shared.providers)
    custom = cli.speed_config(_args("--prefill", "2k", "--batches", "8,1", "--context", "64", "--iters", "3"), 2)
    assert (custom.prefill_tokens, custom.decode_batches, custom.context, custom.iters) == ([2048], [1, 8], 64, 3)


def test_bad_arguments_are_clear(capsys):
    with pytest.raises(ValueError, match="32 attention heads do not split over 3 ranks"):
        cli.speed_config(_args("--gpus", "3"), 3)
    with pytest.raises(ValueError, match="--layers must be at least 1"):
        cli.speed_config(_args("--layers", "0"), 2)
    with pytest.raises(ValueError, match="contradict"):
        cli.speed_config(_args("--no-check", "--check-only"), 2)
    with pytest.raises(ValueError, match="--gpus must be at least 2"):
        cli.world_size_for(_args("--gpus", "1"))
    with pytest.raises(ValueError, match="iters must be at least 1"):
        SpeedConfig(model=TINY, providers=["nccl"], iters=0)
    assert cli.main(["--gpus", "2", "--model", "llama9"]) == 2
    assert "unknown model 'llama9'" in capsys.readouterr().err
    assert cli.main(["--gpus", "2", "--providers", "mpi"]) == 2
    assert "no provider matches 'mpi'" in capsys.readouterr().err


def test_shared_gpu_without_a_gpu_says_so(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: this checks the message without one")
    assert cli.main(["--shared-gpu", "--layers", "1", "--timeout", "60"]) == 1
    err = capsys.readouterr().err
    assert "TIMINGS ARE NOT SPEED" in err and "needs one visible GPU" in err


def test_list_providers(capsys):
    assert cli.main(["--list-providers"]) == 0
    out = capsys.readouterr().out
    assert "qr_auto_int6" in out and "(on request)" in out


# --------------------------------------------------------------------------- token verdicts

def _tokens(*rows):
    return torch.tensor(rows)


def test_judge_tokens():
    exact = _tokens([1, 2, 3, 4], [5, 6, 7, 8])
    other = _tokens([1, 2, 3, 4], [5, 6, 9, 9])
    row = judge_tokens("qr_lossless", 2, exact, exact, exact, exact, 0, True)
    assert row["ok"] is True and row["differ_from_exact"] == 0 and row["why"] == "identical to the exact run"
    # W=2: any difference from the exact run fails, even when it matches the fp32 rank-order run
    row = judge_tokens("qr_lossless", 2, other, other, exact, other, 0, True)
    assert row["ok"] is False and "W=2" in row["why"] and row["first_difference"] == "sequence 1, token 2"
    # W=4: a difference is fine where fp32 rank-order rounding differed, and only there
    assert judge_tokens("qr_auto", 4, other, other, exact, other, 3, True)["ok"] is True
    assert judge_tokens("qr_auto", 4, other, other, exact, other, 0, True)["ok"] is False
    # never fine: unlike the fp32 rank-order run, graph unlike eager, ranks unlike each other
    assert "fp32 rank-order" in judge_tokens("qr_auto", 4, other, other, exact, exact, 3, True)["why"]
    assert "CUDA-graph" in judge_tokens("qr_lossless", 2, exact, other, exact, exact, 0, True)["why"]
    assert judge_tokens("qr_lossless", 2, exact, exact, exact, exact, 0, False)["ok"] is False
    # other providers are reported, not judged
    row = judge_tokens("nccl", 4, other, other, exact, exact, 3, True)
    assert row["ok"] is None and "2 of 8 tokens differ" in row["why"]
    # the reference itself: at W=2 no element may round differently
    assert judge_tokens("exact (float64)", 2, exact, None, exact, exact, 1, True)["ok"] is False
    assert judge_tokens("exact (float64)", 4, exact, None, exact, other, 7, True)["ok"] is True


# --------------------------------------------------------------------------- results

def _rows():
    rows = []
    for provider, prefill, decode in (("no_comm", 10.0, 1.0), ("nccl", 20.0, 2.0), ("qr_lossless", 15.0, 1.5),
                                      ("qr_int4", 12.0, 1.2)):
        rows.append({"provider": provider, "phase": "prefill", "size": 1024, "time_ms": prefill,
                     "lossy": provider == "qr_int4"})
        rows.append({"provider": provider, "phase": "decode", "size": 16, "time_ms": decode,
                     "lossy": provider == "qr_int4"})
    return report.complete_rows(rows, model="tiny", layers=2, world_size=2, device="Fake GPU", dtype="bf16",
                                context=64, shared_gpu=False)


def test_complete_rows_and_tables():
    rows = _rows()
    by = {(r["phase"], r["provider"]): r for r in rows}
    assert [r["phase"] for r in rows[:4]] == ["prefill"] * 4 and rows[0]["provider"] == "no_comm"
    assert by[("prefill", "nccl")]["comm_share"] == pytest.approx(0.5)
    assert by[("prefill", "qr_lossless")]["vs_nccl"] == pytest.approx(20 / 15)
    assert by[("decode", "qr_int4")]["tokens_per_s"] == pytest.approx(16 / 1.2e-3)
    assert by[("prefill", "no_comm")]["comm_share"] is None and by[("prefill", "no_comm")]["vs_nccl"] is None
    table = report.format_table(rows)
    assert "50.0%" in table and "1.33x" in table and "tokens|batch" in table
    grid = report.format_grid(rows, "prefill")
    assert "15.000*" in grid and "12.000*" not in grid  # the fastest exact provider, not the lossy one


def test_csv_round_trip_plot_and_from_csv(tmp_path, capsys):
    rows = _rows()
    path = report.write_csv(rows, tmp_path / "e2e.csv")
    back = report.read_csv(path)
    assert len(back) == len(rows)
    assert back[2]["time_ms"] == pytest.approx(rows[2]["time_ms"]) and back[2]["lossy"] == rows[2]["lossy"]
    png = report.plot(rows, tmp_path / "e2e.png", "tiny", note="SHARED GPU")
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["--from-csv", str(path), "--plot", str(tmp_path / "again.png")]) == 0
    assert "qr_lossless" in capsys.readouterr().out and (tmp_path / "again.png").exists()


def test_plot_figure_bars_per_phase_and_size():
    """One panel per (phase, size); a bar per provider of its % over no_comm, exact providers above
    lossy ones, the fastest exact one starred, NCCL's dashed reference line."""
    import matplotlib.pyplot as plt

    fig = report.figure(_rows(), "tiny", note="SHARED GPU")
    try:
        axes = [ax for ax in fig.get_axes() if ax.get_visible() and ax.axison]
        titles = [ax.get_title() for ax in axes]
        assert titles == ["1k tokens  (no comm: 10 ms)", "batch 16  (no comm: 1 ms)"]
        prefill, decode = axes
        assert [t.get_text() for t in prefill.get_yticklabels()] == ["nccl", "qr_lossless", "qr_int4"]
        assert "%" in prefill.xaxis.get_major_formatter()(50, 0)
        widths = sorted(round(b.get_width(), 6) for b in prefill.patches if b.get_height() == pytest.approx(0.72))
        assert widths == [20.0, 50.0, 100.0]  # qr_int4 +20%, qr_lossless +50%, nccl +100%
        for ax in (prefill, decode):
            texts = [t.get_text() for t in ax.texts]
            assert "+50.0% \u2605" in texts and "+20.0%" in texts and "+100.0%" in texts  # lossy not starred
            assert "SHARED GPU" in texts
            assert any(line.get_linestyle() == "--" and line.get_xdata()[0] == pytest.approx(100.0)
                       for line in ax.get_lines())
    finally:
        plt.close(fig)


def test_format_checks():
    checks = [judge_tokens("exact (float64)", 2, _tokens([1]), None, _tokens([1]), _tokens([1]), 0, True),
              judge_tokens("qr_lossless", 2, _tokens([2]), _tokens([2]), _tokens([1]), _tokens([2]), 0, True)]
    text = report.format_checks(checks, "0 of 10 reduced elements ...")
    assert "FAIL qr_lossless" in text and "ok   exact (float64)" in text and "exact run: 0 of 10" in text
    assert not report.checks_passed(checks) and report.checks_passed(checks[:1])


# --------------------------------------------------------------------------- a whole run on CPU ranks

from test_bench_cli import _FakeEvent  # noqa: E402  (tests/cpu is on sys.path)


class _EagerDecodeStep:
    """GraphedDecodeStep's interface, replayed eagerly (no CUDA graphs on the CPU)."""

    def __init__(self, model, cache, after_capture=None):
        self.model, self.cache = model, cache
        self.tokens = torch.zeros(cache.batch, dtype=torch.long)
        self.positions = torch.full((cache.batch,), cache.length - 1, dtype=torch.long)
        if after_capture is not None:
            after_capture()

    def __call__(self, tokens, positions):
        self.tokens.copy_(tokens)
        self.positions.copy_(positions)
        self.replay()
        return self.logits

    def replay(self):
        self.logits = self.model.decode(self.tokens, self.positions, self.cache)


class _EagerPrefill:
    """GraphedPrefill's interface, replayed eagerly."""

    def __init__(self, model, prompt, after_capture=None):
        self.model, self.prompt = model, prompt
        if after_capture is not None:
            after_capture()

    def replay(self):
        self.logits = self.model.prefill(self.prompt)


def _speed_on_cpu(rank, world_size, cfg):
    """run_speed on a gloo rank: CUDA calls stubbed, three fake providers beside NCCL over gloo."""
    from quickreduce.cli import methods
    from quickreduce.e2e import model, speed
    from quickreduce.e2e.reducers import GatheredSum, rank_order_fp32_sum

    cuda = torch.cuda
    cuda.synchronize = lambda *a, **k: None
    cuda.Event = _FakeEvent
    cuda.is_current_stream_capturing = lambda: False
    cuda.get_device_name = lambda d=None: "Fake GPU"
    speed.local_device = lambda: torch.device("cpu")
    model.GraphedDecodeStep = speed.GraphedDecodeStep = _EagerDecodeStep
    model.GraphedPrefill = speed.GraphedPrefill = _EagerPrefill

    class FakeLossless(methods.Method):  # quickreduce's lossless contract: fp32 in rank order
        name = "qr_lossless"

        def run(self, inp, out):
            out.copy_(GatheredSum(self.ctx.group, rank_order_fp32_sum)(inp))
            return out

    class FakeLossy(FakeLossless):
        name, lossy = "qr_int4", True

        def run(self, inp, out):
            return super().run(inp, out).mul_(0.9)

    class Broken(methods.Method):
        name = "qr_int6"

        def run(self, inp, out):
            raise RuntimeError("kaboom")

    fakes = {"qr_lossless": FakeLossless, "qr_int4": FakeLossy, "qr_int6": Broken}
    real = speed.make_provider_method
    speed.make_provider_method = lambda name: fakes[name]() if name in fakes else real(name)
    return speed.run_speed(rank, world_size, cfg)


def test_speed_run_on_cpu_ranks():
    from quickreduce.cli import launch

    cfg = SpeedConfig(model=TINY, providers=["nccl", "qr_lossless", "qr_int6", "qr_int4"], prefill_tokens=[8, 16],
                      decode_batches=[1, 2], context=8, warmup=1, iters=2, decode_steps=2, check_batch=2,
                      check_prompt=4, check_new_tokens=5, verbose=False)
    result = launch.spawn(_speed_on_cpu, 2, cfg, backend="gloo", timeout_s=240)
    checks = {c["provider"]: c for c in result["checks"]}
    assert set(checks) == {"exact (float64)", "nccl", "qr_lossless", "qr_int4"}
    assert checks["exact (float64)"]["ok"] is True and checks["qr_lossless"]["ok"] is True
    assert checks["qr_lossless"]["differ_from_exact"] == 0 and checks["qr_lossless"]["graph_equals_eager"]
    assert checks["nccl"]["ok"] is None and checks["qr_int4"]["ok"] is None  # reported, not judged
    assert result["rounding"]["differing"] == 0 and result["rounding"]["calls"] > 0  # W=2: none may differ
    notes = "\n".join(result["notes"])
    assert "qr_int6: token check failed to run, dropped" in notes and "kaboom" in notes
    rows = report.complete_rows(result["rows"])
    seen = {(r["provider"], r["phase"], r["size"]) for r in rows}
    assert seen == {(p, ph, s) for p in ("no_comm", "nccl", "qr_lossless", "qr_int4")
                    for ph, s in (("prefill", 8), ("prefill", 16), ("decode", 1), ("decode", 2))}
    assert all(r["time_ms"] > 0 for r in rows)
    assert all(0 <= r["comm_share"] <= 1 for r in rows if r["provider"] != "no_comm")
    assert result["device"] == "Fake GPU" and result["world_size"] == 2
