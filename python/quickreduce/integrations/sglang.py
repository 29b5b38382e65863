"""quickreduce in SGLang: the ``sglang.srt.plugins`` entry point ``quickreduce`` (docs/integrations.md).

``QUICKREDUCE_SGLANG=1`` turns it on; without it ``register()`` returns at once. On, and only where SGLang
runs on CUDA, it registers three hooks with SGLang's ``HookRegistry`` (``load_plugins()`` applies them
before the scheduler creates any group):

- AFTER ``GroupCoordinator.__init__``: a tensor-parallel group (``tp:*``) sets quickreduce up and keeps it
  as ``group.qr_comm`` (the slot SGLang gives its ROCm QuickReduce, empty on CUDA), so the compiled and
  piecewise-graph paths, which choose the all-reduce at run time, see it too;
- AROUND ``GroupCoordinator._resolve_outplace_all_reduce_method``: ``"qr"`` for the all-reduces quickreduce's
  plan takes (a pure function of size, dtype and codec), before SGLang's custom all-reduce; the original
  method for everything else. SGLang's ``_all_reduce_out_place`` then calls ``qr_comm.quick_all_reduce``;
- BEFORE ``GroupCoordinator.destroy``: close quickreduce.

``register()`` is idempotent and never raises. This module imports nothing of SGLang's at import time.
"""
from __future__ import annotations

import logging

import torch

ENABLE_ENV = "QUICKREDUCE_SGLANG"
GROUP_COORDINATOR = "sglang.srt.distributed.parallel_state.GroupCoordinator"

logger = logging.getLogger("sglang.quickreduce")

_registered = False


class SGLangQuickReduce:
    """quickreduce in the shape SGLang expects of ``GroupCoordinator.qr_comm``: ``disabled``,
    ``should_quick_allreduce(x)``, ``quick_all_reduce(x)`` (out of place)."""

    def __init__(self, engine_all_reduce):
        self.impl = engine_all_reduce

    @property
    def disabled(self) -> bool:
        return self.impl.disabled

    def should_quick_allreduce(self, input_: torch.Tensor) -> bool:
        return self.impl.takes(input_)

    def quick_all_reduce(self, input_: torch.Tensor, out=None) -> torch.Tensor:
        result = self.impl.all_reduce(input_)
        if out is not None:
            out.copy_(result)
            return out
        return result

    def close(self) -> None:
        self.impl.close()

    def __repr__(self) -> str:
        return f"SGLangQuickReduce({self.impl!r})"


def _quickreduce_of(group):
    qr = getattr(group, "qr_comm", None)
    return qr if isinstance(qr, SGLangQuickReduce) else None


def after_init(result, group, *args, **kwargs):
    """AFTER hook of ``GroupCoordinator.__init__``: set quickreduce up in a TP group (collective over its
    CPU group; every rank of the group runs this hook)."""
    name = getattr(group, "unique_name", "")
    if name.split(":")[0] != "tp" or getattr(group, "world_size", 1) < 2:
        return None
    if getattr(group, "qr_comm", None) is not None:  # SGLang's own (ROCm) QuickReduce
        return None
    from . import common
    try:
        impl = common.attach("SGLang", name, group.cpu_group, torch.device(group.device), log=logger)
    except Exception as e:  # noqa: BLE001 - the engine keeps its own path
        logger.warning("quickreduce: not used in SGLang group %s (%s: %s); SGLang's own all-reduce runs every size",
                       name, type(e).__name__, e)
        impl = None
    if impl is not None:
        group.qr_comm = SGLangQuickReduce(impl)
    return None


def around_resolve(original, group, input_, *args, **kwargs):
    """AROUND hook of ``GroupCoordinator._resolve_outplace_all_reduce_method``."""
    qr = _quickreduce_of(group)
    if qr is not None and qr.should_quick_allreduce(input_):
        return "qr"
    return original(group, input_, *args, **kwargs)


def before_destroy(group, *args, **kwargs):
    """BEFORE hook of ``GroupCoordinator.destroy``: free the workspace while the group still exists."""
    qr = _quickreduce_of(group)
    if qr is not None:
        qr.close()
        group.qr_comm = None
    return None


def register() -> None:
    """The entry point: a no-op unless ``QUICKREDUCE_SGLANG=1`` and SGLang runs on CUDA; never raises."""
    global _registered
    from .common import enabled
    if _registered or not enabled(ENABLE_ENV, logger):
        return
    try:
        from sglang.srt.utils import is_cuda
        if not is_cuda():
            logger.info("quickreduce: %s=1 but SGLang does not run on CUDA here: the plugin does nothing", ENABLE_ENV)
            return
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType
        HookRegistry.register(GROUP_COORDINATOR + ".__init__", after_init, HookType.AFTER)
        HookRegistry.register(GROUP_COORDINATOR + "._resolve_outplace_all_reduce_method", around_resolve,
                              HookType.AROUND)
        HookRegistry.register(GROUP_COORDINATOR + ".destroy", before_destroy, HookType.BEFORE)
        _registered = True
    except Exception as e:  # noqa: BLE001 - never stop the engine
        logger.warning("quickreduce: not enabled in SGLang (%s: %s); SGLang's own all-reduce runs every size",
                       type(e).__name__, e)


def is_registered() -> bool:
    return _registered
