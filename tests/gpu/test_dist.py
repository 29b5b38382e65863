"""Multi-GPU tests: every scenario of scenarios.py runs on 2 GPUs (and on 4/8 when present)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = ["passthrough_reference", "codecs_vs_twin", "codec_edge_values", "graph_replays",
             "side_by_side_and_nccl", "handles_api", "bad_inputs", "peer_timeout"]
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("scenarios", SCENARIOS, WORLD)


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    mine = {k: v for k, v in results.items() if k.startswith(scenario + "/") or k.startswith("<")}
    assert mine, f"scenario {scenario} produced no checks"
    failures = {k: v for k, v in mine.items() if any(msg is not None for msg in v.values())}
    print(f"{scenario}: {len(mine)} checks, {len(failures)} failed")
    assert not failures, "\n".join(f"{k}: {v}" for k, v in list(failures.items())[:20])
