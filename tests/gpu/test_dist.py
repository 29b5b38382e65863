"""Multi-GPU tests: every scenario of scenarios.py runs on 2 GPUs (and on 4/8 when present)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = harness.selected(["passthrough_reference", "codecs_vs_twin", "codec_edge_values", "fp4_every_fp16_value", "graph_replays",
             "side_by_side_and_nccl", "handles_api", "bad_inputs", "peer_timeout", "call_mismatch",
             "two_groups", "create_close_cycles", "soak"])
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("scenarios", SCENARIOS, WORLD)


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    harness.check_scenario(results, scenario)
