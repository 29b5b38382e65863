"""Multi-GPU tests of reduce-scatter, all-gather, all-to-all and the fp32 all-reduce
(collective_scenarios.py), at QR_TEST_WORLD_SIZE ranks (2 by default)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = harness.selected(["collectives_vs_twin", "large_segments_vs_twin", "uneven_all_to_all", "mixed_cta_all_to_all", "fp32_all_reduce", "collective_graph_replays", "small_segments",
             "coded_small_segments",
             "collective_bad_inputs", "collective_peer_timeout", "collective_mismatch", "collective_soak"])
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("collective_scenarios", SCENARIOS, WORLD)


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    harness.check_scenario(results, scenario)
