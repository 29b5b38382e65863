"""Multi-GPU tests of the torch.distributed backend "quickreduce" (backend_scenarios.py): every rank's default
group is init_process_group("cpu:gloo,cuda:quickreduce"); dist.* collectives exact and identical on every
rank, async work and CUDA graphs, the fallbacks, the functional collectives eager and compiled, a DTensor
tensor-parallel MLP, errors. At QR_TEST_WORLD_SIZE ranks (2 by default); with QR_TEST_SHARED_GPU=1 on
one GPU (the fallback is then gloo). QR_TORCH_STEPS sets the number of CUDA-graph replays (1000)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = harness.selected(["collectives_exact", "works_streams_graphs", "fallbacks", "functional",
                              "dtensor_mlp", "errors"])
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))
ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}  # W processes compile at once: no pool of compile workers each


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("backend_scenarios", SCENARIOS, WORLD, env=ENV, timeout_s=1800,
                                 backend="cpu:gloo,cuda:quickreduce")


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    harness.check_scenario(results, scenario)
