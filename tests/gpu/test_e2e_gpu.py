"""`quickreduce e2e` on GPUs: the speed runner at QR_TEST_WORLD_SIZE ranks (2 by default) on the
llama3-8b preset cut to 2 layers, and its token check: quickreduce's exact providers generate the
tokens of an exact (float64) reduction at W=2, and at W=4 differ from them only where fp32
rank-order rounding differs from float64 (counted; one example printed). With QR_TEST_SHARED_GPU=1
every rank runs on GPU 0 (timings then mean nothing: only the tokens are checked). Skipped
without CUDA (conftest.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))


@pytest.fixture(scope="module")
def speed_result():
    from quickreduce.cli import launch
    from quickreduce.e2e.config import load_model_config
    from quickreduce.e2e.providers import select_providers
    from quickreduce.e2e.speed import SpeedConfig, run_speed

    cfg = SpeedConfig(model=load_model_config("llama3-8b", layers=2), providers=select_providers("default"),
                      prefill_tokens=[128], decode_batches=[1, 4], context=64, warmup=1, iters=1, decode_steps=1,
                      check_batch=2, check_prompt=16, check_new_tokens=16, shared_gpu=harness.shared_gpu(WORLD),
                      verbose=False)
    return launch.spawn(run_speed, WORLD, cfg, timeout_s=900, shared_gpu=cfg.shared_gpu)


@pytest.mark.gpu(WORLD)
def test_exact_providers_generate_the_exact_tokens(speed_result):
    from quickreduce.e2e import report

    checks = {c["provider"]: c for c in speed_result["checks"]}
    print(report.format_checks(speed_result["checks"], speed_result["rounding_text"]))
    for note in speed_result["notes"]:
        print("note:", note)
    assert {"exact (float64)", "qr_lossless", "qr_auto"} <= set(checks), speed_result["notes"]
    assert report.checks_passed(checks.values()), [c for c in checks.values() if c["ok"] is False]
    for name in ("qr_lossless", "qr_auto"):
        row = checks[name]
        assert row["ok"] is True and row["equal_fp32_order"] and row["graph_equals_eager"] and row["same_on_all_ranks"]
        if WORLD == 2:  # an fp32 sum of two bf16 values is exact: the tokens must be the exact run's
            assert row["differ_from_exact"] == 0
    if WORLD == 2:
        assert speed_result["rounding"]["differing"] == 0
    else:  # show how many elements round differently, and one of them
        print(f"W={WORLD}:", speed_result["rounding_text"])


@pytest.mark.gpu(WORLD)
def test_every_phase_was_timed(speed_result):
    rows = speed_result["rows"]
    providers = {r["provider"] for r in rows}
    assert {"no_comm", "qr_lossless", "qr_int4"} <= providers, speed_result["notes"]
    for provider in providers:
        mine = {(r["phase"], r["size"]) for r in rows if r["provider"] == provider}
        assert mine == {("prefill", 128), ("decode", 1), ("decode", 4)}, (provider, speed_result["notes"])
    assert all(r["time_ms"] > 0 for r in rows)


@pytest.mark.gpu(WORLD)
def test_fidelity_on_one_gpu():
    """The fidelity table's GPU path (W ranks on one GPU through a Communicator), when the model
    and transformers are installed: the passthrough equals the exact reduction at W=2."""
    pytest.importorskip("transformers")
    from quickreduce.e2e import fidelity

    try:
        fidelity.locate_bundled_model()
    except fidelity.FidelityError as exc:
        pytest.skip(str(exc))
    cfg = fidelity.FidelityConfig(world_sizes=[2], codecs=["bf16", "lossless", "int4"], text_tokens=128, window=64,
                                  prompts=2, prompt_tokens=16, new_tokens=4, device="cuda")
    rows = {r["reduction"]: r for r in fidelity.run_fidelity(cfg, log=print)["rows"]}
    assert rows["bf16"]["ppl_rel_change"] == 0 and rows["lossless"]["ppl_rel_change"] == 0
    assert rows["bf16"]["top1_agreement"] == 1.0 and rows["bf16"]["greedy_identical"] == 2
    assert rows["int4"]["kl_mean"] > 0
