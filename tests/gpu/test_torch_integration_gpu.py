"""Multi-GPU tests of quickreduce inside torch (torch_scenarios.py): ReduceOp AVG/MAX/MIN, async_op,
the custom ops under CUDA-graph capture, torch.compile(fullgraph=True) with zero graph breaks and
mode="reduce-overhead"; at QR_TEST_WORLD_SIZE ranks (2 by default). QR_TORCH_STEPS sets the number of
CUDA-graph steps (1000)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SCENARIOS = harness.selected(["reduce_ops", "async_overlap", "op_graph_capture", "compiled_tp_block", "compiled_family", "op_overhead"])
WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))
ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}  # W processes compile at once: no pool of compile workers each


@pytest.fixture(scope="module")
def results():
    return harness.run_scenarios("torch_scenarios", SCENARIOS, WORLD, env=ENV, timeout_s=1800)


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(results, scenario):
    harness.check_scenario(results, scenario)
