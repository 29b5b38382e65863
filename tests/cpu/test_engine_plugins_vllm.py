"""The vLLM plugin against vLLM's own code (0.33.0), on the CPU, at two gloo ranks.

vLLM is installed ``--no-deps`` with the light packages its modules import (.ci/run). Without a GPU
its ``current_platform`` is not CUDA, so the plugin must do nothing; to reach the routing, the tests
stand a minimal CUDA ``Platform`` in for vLLM's (``register``'s patch) and build the plugin's
``CudaCommunicator`` subclass directly with ``device=cpu`` (vLLM's own all-reduce path then is
``torch.distributed`` over gloo: ``VLLM_DISABLE_PYNCCL=1``). quickreduce's Communicator is the stand-in of
test_engine_plugins.py (the real planning API, gloo's sum).

Skipped where vLLM is not installed, except under ``QR_REQUIRE_ENGINES=1`` (CI), where that fails.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch
import torch.distributed as dist

from test_engine_plugins import (SWEEP, KiB, LogLines, MiB, StandInCommunicator, assert_scenario, check,
                                 ensure_entry_points, expected_calls, prepare_with_split_table,
                                 require_engine, run_samples, spawn_ranks)

ENGINE = "vllm"
require_engine(ENGINE)

GROUP = "vllm.general_plugins"


prepare = prepare_with_split_table  # each rank's set-up (the harness calls prepare)


def scenario_entry_point(rank, W, out_dir):
    source = ensure_entry_points(out_dir, GROUP)
    from vllm.plugins import load_plugins_by_group

    import quickreduce.integrations.vllm as plugin
    found = load_plugins_by_group(GROUP)
    check(found.get("quickreduce") is plugin.register, f"vLLM found {found}")
    os.environ["VLLM_PLUGINS"] = "some_other_plugin"
    try:
        check("quickreduce" not in load_plugins_by_group(GROUP), "VLLM_PLUGINS does not filter it")
    finally:
        del os.environ["VLLM_PLUGINS"]
    required = os.environ.get("QR_REQUIRE_ENGINES") == "1"
    return {"source": "FAIL the installed quickreduce declares no vLLM entry point"
            if required and source != "installed" else None}


def scenario_off(rank, W, out_dir):
    import quickreduce.integrations.vllm as plugin
    os.environ.pop("QUICKREDUCE_VLLM", None)
    for _ in range(2):
        plugin.register()
    check(not plugin.is_registered(), "registered while off")
    check("vllm.platforms.cuda" not in sys.modules, "imported vllm.platforms.cuda")
    return {}


def scenario_not_cuda(rank, W, out_dir):
    import quickreduce.integrations.vllm as plugin
    lines = LogLines(plugin.logger.name)
    os.environ["QUICKREDUCE_VLLM"] = "1"
    plugin.register()
    from vllm.platforms import current_platform
    check(not current_platform.is_cuda(), f"this machine's platform is {current_platform}")
    check(not plugin.is_registered(), "registered on a platform that is not CUDA")
    check("vllm.platforms.cuda" not in sys.modules, "imported vllm.platforms.cuda where there is no GPU")
    said = lines.take()
    check(len(said) == 1 and "not CUDA" in said[0], f"log: {said}")
    return {"platform": type(current_platform).__name__}


def _fake_cuda_platform(communicator: str):
    from vllm.platforms.interface import Platform, PlatformEnum

    class FakeCudaPlatform(Platform):
        _enum = PlatformEnum.CUDA
        device_name = device_type = "cuda"

        @classmethod
        def get_device_communicator_cls(cls) -> str:
            return communicator

    return FakeCudaPlatform()


def scenario_register_idempotent(rank, W, out_dir):
    import vllm.platforms
    from vllm.utils.import_utils import resolve_obj_by_qualname

    import quickreduce.integrations.vllm as plugin
    from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
    lines = LogLines(plugin.logger.name)
    os.environ["QUICKREDUCE_VLLM"] = "1"
    saved = vllm.platforms._current_platform
    try:
        fake = vllm.platforms._current_platform = _fake_cuda_platform(plugin.CUDA_COMMUNICATOR)
        plugin.register()
        first = type(fake).__dict__["get_device_communicator_cls"]
        plugin.register()
        plugin.register()
        check(type(fake).__dict__["get_device_communicator_cls"] is first, "register() patched twice")
        name = fake.get_device_communicator_cls()
        check(name == plugin.COMMUNICATOR, f"communicator {name}")
        cls = resolve_obj_by_qualname(name)
        check(issubclass(cls, CudaCommunicator), f"{cls} is not a CudaCommunicator")
        plugin.unregister()
        check(fake.get_device_communicator_cls() == plugin.CUDA_COMMUNICATOR and not plugin.is_registered(), "unregister")
        other = vllm.platforms._current_platform = _fake_cuda_platform("some.other.Communicator")
        lines.take()
        plugin.register()
        said = lines.take("WARNING")
        check(not plugin.is_registered() and other.get_device_communicator_cls() == "some.other.Communicator"
              and len(said) == 1 and "leaves it alone" in said[0], f"another communicator: {said}")
    finally:
        plugin.unregister()
        vllm.platforms._current_platform = saved
        os.environ.pop("QUICKREDUCE_VLLM", None)
    return {}


def _communicator(name="tp:0"):
    from quickreduce.integrations.vllm_communicator import QuickreduceCudaCommunicator
    cpu_group = dist.new_group([0, 1], backend="gloo")
    device_group = dist.new_group([0, 1], backend="gloo")
    return QuickreduceCudaCommunicator(cpu_group, device=torch.device("cpu"), device_group=device_group,
                                       unique_name=name)


def scenario_routes(rank, W, out_dir):
    import quickreduce.integrations.vllm as plugin
    lines = LogLines(plugin.logger.name)
    comm = _communicator()
    qr = comm.quickreduce
    check(qr is not None, f"not attached: {lines.lines}")
    info = lines.take("INFO")
    check(len(info) == (1 if rank == 0 else 0) and all("vLLM group tp:0" in i for i in info), f"log: {info}")
    check(qr.comm.max_size == 32 * MiB, f"workspace for {qr.comm.max_size} bytes")
    qr.comm.calls.clear()
    out = run_samples(comm.all_reduce, rank, W)
    calls = [list(c[:2]) for c in qr.comm.calls]
    out["split by size"] = None if calls == expected_calls() else f"FAIL quickreduce took {calls}, expected {expected_calls()}"
    out["decisions"] = {f"{d}/{n}": qr.route(n, d) for d in (torch.bfloat16, torch.float16) for n in SWEEP}
    other = _communicator("pp:0")
    out["pp group"] = None if other.quickreduce is None else "FAIL a pp group set quickreduce up"
    other.destroy()
    comm.destroy()
    StandInCommunicator.created.clear()
    return out


def scenario_misconfigured(rank, W, out_dir):
    import quickreduce.integrations.vllm as plugin
    lines = LogLines(plugin.logger.name)
    os.environ["QR_TEST_FAIL_CREATE"] = "1"
    try:
        comm = _communicator()
    finally:
        del os.environ["QR_TEST_FAIL_CREATE"]
    said = lines.take("WARNING")
    out = {"refused": None if comm.quickreduce is None and len(said) == (1 if rank == 0 else 0)
           else f"FAIL quickreduce={comm.quickreduce} log={said}"}
    out["closed"] = None if all(c.closed for c in StandInCommunicator.created) else "FAIL a workspace left open"
    out.update(run_samples(comm.all_reduce, rank, W))  # vLLM's own path, every size
    comm.destroy()
    StandInCommunicator.created.clear()
    return out


def scenario_batch_invariant(rank, W, out_dir):
    import quickreduce.integrations.vllm as plugin
    lines = LogLines(plugin.logger.name)
    os.environ.update({"VLLM_BATCH_INVARIANT": "1", "QUICKREDUCE_QUANTIZATION": "auto:int4"})
    try:
        comm = _communicator()
    finally:
        os.environ["QUICKREDUCE_QUANTIZATION"] = "FP"
        del os.environ["VLLM_BATCH_INVARIANT"]
    said = lines.take("WARNING")
    ok = comm.quickreduce is None and all("batch-invariant" in s for s in said) and len(said) == (1 if rank == 0 else 0)
    comm.destroy()
    StandInCommunicator.created.clear()
    return {"refused": None if ok else f"FAIL {said}"}


def scenario_teardown_and_restart(rank, W, out_dir):
    out = {}
    for start in range(2):  # a second engine start in the same process
        comm = _communicator()
        qr = comm.quickreduce
        check(qr is not None, f"start {start}: not attached")
        stand_in = qr.comm
        out.update({f"{start}/{k}": v for k, v in run_samples(comm.all_reduce, rank, W).items()})
        comm.destroy()
        check(stand_in.closed and comm.quickreduce is None, f"start {start}: destroy() left quickreduce open")
        check(qr.takes(torch.ones(32 * KiB, dtype=torch.bfloat16)) is False, "a closed EngineAllReduce takes calls")
    StandInCommunicator.created.clear()
    return out


SCENARIOS = ["entry_point", "off", "not_cuda", "register_idempotent", "routes", "misconfigured", "batch_invariant",
             "teardown_and_restart"]


@pytest.fixture(scope="module")
def results():
    return spawn_ranks(__name__, SCENARIOS, env={"all": {"VLLM_DISABLE_PYNCCL": "1", "QUICKREDUCE_QUANTIZATION": "FP",
                                                         "VLLM_LOGGING_LEVEL": "INFO"}}, timeout=400)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_vllm_two_ranks(results, scenario):
    assert_scenario(results, scenario)
