"""The SGLang plugin against SGLang's own code (0.5.23), on the CPU, at two gloo ranks.

SGLang is installed ``--no-deps`` with the light packages its modules import (.ci/run). Without a GPU
SGLang does not run on CUDA, so the plugin must do nothing; to reach the routing, the tests answer
SGLang's ``is_cuda()`` with True while ``load_plugins()`` runs (its real entry-point discovery and
``HookRegistry``), then build SGLang's real ``GroupCoordinator`` over gloo. Its ``all_reduce`` sends CPU
tensors straight to torch.distributed, so the tests call what its GPU branch calls:
``_resolve_outplace_all_reduce_method`` (hooked), then ``_all_reduce_out_place`` / ``_all_reduce_in_place``
(the bodies of SGLang's ``outplace_all_reduce``/``inplace_all_reduce`` ops, which are registered for CUDA
only), and ``_all_reduce_out_place(x, "auto")`` (the compiled path). quickreduce's Communicator is the
stand-in of test_engine_plugins.py.

Skipped where SGLang is not installed, except under ``QR_REQUIRE_ENGINES=1`` (CI), where that fails.
"""
from __future__ import annotations

import os

import pytest
import torch

from test_engine_plugins import (SWEEP, LogLines, MiB, StandInCommunicator, assert_scenario, check,
                                 ensure_entry_points, expected_calls, prepare_with_split_table,
                                 require_engine, run_samples, spawn_ranks)

ENGINE = "sglang"
require_engine(ENGINE)

GROUP = "sglang.srt.plugins"


prepare = prepare_with_split_table  # each rank's set-up (the harness calls prepare)


def _our_hooks():
    from sglang.srt.plugins.hook_registry import HookRegistry

    import quickreduce.integrations.sglang as plugin
    ours = (plugin.after_init, plugin.around_resolve, plugin.before_destroy)
    return sorted((target, kind.value) for target, hooks in HookRegistry._hooks.items()
                  for kind, hook, _ in hooks if hook in ours)


def scenario_entry_point(rank, W, out_dir):
    source = ensure_entry_points(out_dir, GROUP)
    from sglang.srt.plugins import load_plugins_by_group

    import quickreduce.integrations.sglang as plugin
    found = load_plugins_by_group(GROUP)
    check("quickreduce" in found and found["quickreduce"][0] is plugin.register, f"SGLang found {found}")
    os.environ["SGLANG_PLUGINS"] = "some_other_plugin"
    try:
        check("quickreduce" not in load_plugins_by_group(GROUP), "SGLANG_PLUGINS does not filter it")
    finally:
        del os.environ["SGLANG_PLUGINS"]
    required = os.environ.get("QR_REQUIRE_ENGINES") == "1"
    return {"source": "FAIL the installed quickreduce declares no SGLang entry point"
            if required and source != "installed" else None}


def scenario_off(rank, W, out_dir):
    import quickreduce.integrations.sglang as plugin
    os.environ.pop("QUICKREDUCE_SGLANG", None)
    plugin.register()
    plugin.register()
    check(not plugin.is_registered() and _our_hooks() == [], f"registered while off: {_our_hooks()}")
    return {}


def scenario_not_cuda(rank, W, out_dir):
    import quickreduce.integrations.sglang as plugin
    lines = LogLines(plugin.logger.name)
    os.environ["QUICKREDUCE_SGLANG"] = "1"
    plugin.register()
    from sglang.srt.utils import is_cuda
    check(not is_cuda(), "this machine runs SGLang on CUDA?")
    check(not plugin.is_registered() and _our_hooks() == [], f"registered without CUDA: {_our_hooks()}")
    said = lines.take()
    check(len(said) == 1 and "does not run on CUDA" in said[0], f"log: {said}")
    return {}


def scenario_load_plugins(rank, W, out_dir):
    """SGLang's own load_plugins() runs the entry point and applies the hooks; register() again adds none."""
    import sglang.srt.utils
    from sglang.srt.distributed.parallel_state import GroupCoordinator
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    import quickreduce.integrations.sglang as plugin
    os.environ["QUICKREDUCE_SGLANG"] = "1"
    real_is_cuda = sglang.srt.utils.is_cuda
    sglang.srt.utils.is_cuda = lambda: True  # as on a GPU machine, for register()'s check only
    try:
        load_plugins()
        plugin.register()
        plugin.register()
    finally:
        sglang.srt.utils.is_cuda = real_is_cuda
    HookRegistry.apply_hooks()
    hooks = _our_hooks()
    want = sorted([(plugin.GROUP_COORDINATOR + ".__init__", "after"),
                   (plugin.GROUP_COORDINATOR + "._resolve_outplace_all_reduce_method", "around"),
                   (plugin.GROUP_COORDINATOR + ".destroy", "before")])
    check(hooks == want, f"hooks {hooks}")
    for method in ("__init__", "_resolve_outplace_all_reduce_method", "destroy"):
        fn, depth = getattr(GroupCoordinator, method), 0
        while hasattr(fn, "__wrapped__"):
            fn, depth = fn.__wrapped__, depth + 1
        check(depth == 1, f"GroupCoordinator.{method} wrapped {depth} times")
    return {}


def _group():
    from sglang.srt.distributed.parallel_state import GroupCoordinator
    import torch.distributed as dist
    return GroupCoordinator([[0, 1]], dist.get_rank(), "gloo", use_pynccl=False, use_mscclpp=False,
                            use_custom_allreduce=False, use_torch_symm_mem_all_reduce=False,
                            use_hpu_communicator=False, use_xpu_communicator=False, group_name="tp")


def _eager(group, x):
    """GroupCoordinator.all_reduce's GPU branch (no custom AR, no symmetric memory, no FlashInfer)."""
    method = group._resolve_outplace_all_reduce_method(x)
    if method is not None:
        return group._all_reduce_out_place(x, method)
    y = x.clone()
    group._all_reduce_in_place(y)
    return y


def scenario_routes(rank, W, out_dir):
    import quickreduce.integrations.sglang as plugin
    lines = LogLines(plugin.logger.name)
    group = _group()
    qr = group.qr_comm
    check(isinstance(qr, plugin.SGLangQuickReduce) and not qr.disabled, f"not attached: {qr} {lines.lines}")
    info = lines.take("INFO")
    check(len(info) == (1 if rank == 0 else 0) and all("SGLang group tp:" in i for i in info), f"log: {info}")
    stand_in = qr.impl.comm
    check(stand_in.max_size == 32 * MiB, f"workspace for {stand_in.max_size} bytes")
    x = torch.ones(32 * 1024, dtype=torch.bfloat16)
    check(group._resolve_outplace_all_reduce_method(x) == "qr", "a 64 KiB bf16 all-reduce does not resolve to qr")
    check(group._resolve_outplace_all_reduce_method(x[:8]) is None, "a 16 B bf16 all-reduce resolves to qr")
    out = {}
    for prefix, fn in (("eager ", lambda t: _eager(group, t)),
                       ("compiled ", lambda t: group._all_reduce_out_place(t, "auto"))):
        stand_in.calls.clear()
        out.update({prefix + k: v for k, v in run_samples(fn, rank, W).items()})
        calls = [list(c[:2]) for c in stand_in.calls]
        out[prefix + "split by size"] = (None if calls == expected_calls()
                                         else f"FAIL quickreduce took {calls}, expected {expected_calls()}")
    out["decisions"] = {f"{d}/{n}": qr.impl.route(n, d) for d in (torch.bfloat16, torch.float16) for n in SWEEP}
    group.destroy()
    check(stand_in.closed and group.qr_comm is None, "destroy() left quickreduce open")
    StandInCommunicator.created.clear()
    return out


def scenario_misconfigured(rank, W, out_dir):
    import quickreduce.integrations.sglang as plugin
    lines = LogLines(plugin.logger.name)
    os.environ["QR_TEST_FAIL_CONNECT"] = "1"
    try:
        group = _group()
    finally:
        del os.environ["QR_TEST_FAIL_CONNECT"]
    said = lines.take("WARNING")
    out = {"refused": None if group.qr_comm is None and len(said) == (1 if rank == 0 else 0)
           else f"FAIL qr_comm={group.qr_comm} log={said}",
           "closed": None if all(c.closed for c in StandInCommunicator.created) else "FAIL a workspace left open"}
    out.update(run_samples(lambda t: _eager(group, t), rank, W))
    group.destroy()
    StandInCommunicator.created.clear()
    return out


def scenario_teardown_and_restart(rank, W, out_dir):
    out = {}
    for start in range(2):
        group = _group()
        check(group.qr_comm is not None, f"start {start}: not attached")
        stand_in = group.qr_comm.impl.comm
        out.update({f"{start}/{k}": v for k, v in run_samples(lambda t: _eager(group, t), rank, W).items()})
        group.destroy()
        check(stand_in.closed and group.qr_comm is None, f"start {start}: destroy() left quickreduce open")
    StandInCommunicator.created.clear()
    return out


SCENARIOS = ["entry_point", "off", "not_cuda", "load_plugins", "routes", "misconfigured", "teardown_and_restart"]


@pytest.fixture(scope="module")
def results():
    return spawn_ranks(__name__, SCENARIOS, env={"all": {"QUICKREDUCE_QUANTIZATION": "FP"}}, timeout=400)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sglang_two_ranks(results, scenario):
    assert_scenario(results, scenario)
