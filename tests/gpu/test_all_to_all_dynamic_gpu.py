"""Multi-GPU tests of the dynamic all-to-all (dynamic_scenarios.py), at QR_TEST_WORLD_SIZE ranks (2 by
default; QR_TEST_SHARED_GPU=1 runs them on one GPU)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = harness.selected(["dynamic_vs_host_sized", "dynamic_graph_replays", "dynamic_bad_counts",
                              "dynamic_compiled_moe"])
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("dynamic_scenarios", SCENARIOS, WORLD, timeout_s=1500)


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    harness.check_scenario(results, scenario)
