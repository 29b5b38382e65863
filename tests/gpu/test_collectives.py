"""Multi-GPU tests of reduce-scatter, all-gather, all-to-all and the fp32 all-reduce
(collective_scenarios.py), at QR_TEST_WORLD_SIZE ranks (2 by default)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = ["collectives_vs_twin", "uneven_all_to_all", "fp32_all_reduce", "collective_graph_replays",
             "collective_bad_inputs", "collective_peer_timeout", "collective_mismatch", "collective_soak"]
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("collective_scenarios", SCENARIOS, WORLD)


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    mine = {k: v for k, v in results.items() if k.startswith(scenario + "/") or k.startswith("<")}
    assert mine, f"scenario {scenario} produced no checks"
    for k, v in mine.items():
        if k.startswith(scenario + "/info/"):
            print(k, v)
    checks = {k: v for k, v in mine.items() if not k.startswith(scenario + "/info/")}
    failures = {k: v for k, v in checks.items() if any(msg is not None for msg in v.values())}
    print(f"{scenario}: {len(checks)} checks, {len(failures)} failed")
    assert not failures, "\n".join(f"{k}: {v}" for k, v in list(failures.items())[:20])
