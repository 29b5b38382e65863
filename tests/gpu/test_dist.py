"""Multi-GPU tests: every scenario of scenarios.py runs on 2 GPUs (and on 4/8 when present)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = ["passthrough_reference", "codecs_vs_twin", "codec_edge_values", "fp4_every_fp16_value", "graph_replays",
             "side_by_side_and_nccl", "handles_api", "bad_inputs", "peer_timeout", "call_mismatch",
             "two_groups", "create_close_cycles", "soak"]
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("scenarios", SCENARIOS, WORLD)


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    mine = {k: v for k, v in results.items() if k.startswith(scenario + "/") or k.startswith("<")}
    assert mine, f"scenario {scenario} produced no checks"
    for k, v in mine.items():
        if k.startswith(scenario + "/info/"):
            print(k, v)  # measured numbers, kept in the log (-s)
    checks = {k: v for k, v in mine.items() if not k.startswith(scenario + "/info/")}
    failures = {k: v for k, v in checks.items() if any(msg is not None for msg in v.values())}
    print(f"{scenario}: {len(checks)} checks, {len(failures)} failed")
    assert not failures, "\n".join(f"{k}: {v}" for k, v in list(failures.items())[:20])
