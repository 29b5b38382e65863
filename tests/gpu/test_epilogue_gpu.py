"""The all-reduce's add + RMSNorm epilogue on GPUs (every scenario of epilogue_scenarios.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = harness.selected(["epilogue_vs_oracle", "epilogue_fp8", "epilogue_in_place_and_graphs", "epilogue_bad_inputs",
                                     "epilogue_fused_one_shot"])
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("epilogue_scenarios", SCENARIOS, WORLD)


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    harness.check_scenario(results, scenario)
