"""quickreduce in vLLM: the ``vllm.general_plugins`` entry point ``quickreduce`` (docs/integrations.md).

``QUICKREDUCE_VLLM=1`` turns it on; without it ``register()`` returns at once. On, and only where vLLM's
platform is CUDA, it makes ``CudaPlatform.get_device_communicator_cls()`` name
``quickreduce.integrations.vllm_communicator.QuickreduceCudaCommunicator``, a ``CudaCommunicator``
subclass: its tensor-parallel groups (``tp:*``) set quickreduce up when vLLM creates them and send it the
all-reduces its plan takes; everything else runs vLLM's own chain unchanged. vLLM loads general plugins
in every process before it creates a communicator, and may load them more than once: ``register()`` is
idempotent.

This module imports nothing of vLLM's at import time, and ``vllm.platforms.cuda`` only through vLLM's own
platform detection (which imports it only where it found an NVIDIA GPU).
"""
from __future__ import annotations

import logging

ENABLE_ENV = "QUICKREDUCE_VLLM"
CUDA_COMMUNICATOR = "vllm.distributed.device_communicators.cuda_communicator.CudaCommunicator"
COMMUNICATOR = "quickreduce.integrations.vllm_communicator.QuickreduceCudaCommunicator"

logger = logging.getLogger("vllm.quickreduce")  # under vLLM's logger: its handler and format

_patched = None  # (platform class, its own get_device_communicator_cls) once register() patched it


def register() -> None:
    """The entry point: a no-op unless ``QUICKREDUCE_VLLM=1`` and vLLM runs on CUDA; never raises."""
    global _patched
    from .common import enabled
    if _patched is not None or not enabled(ENABLE_ENV, logger):
        return
    try:
        from vllm.platforms import current_platform
        if not current_platform.is_cuda():
            logger.info("quickreduce: %s=1 but vLLM's platform is %s, not CUDA: the plugin does nothing",
                        ENABLE_ENV, type(current_platform).__name__)
            return
        platform_cls = type(current_platform)
        own = platform_cls.__dict__.get("get_device_communicator_cls")
        current = platform_cls.get_device_communicator_cls()
        if current != CUDA_COMMUNICATOR:
            logger.warning("quickreduce: %s=1 but vLLM's platform uses the communicator %s, not %s: the plugin "
                           "leaves it alone", ENABLE_ENV, current, CUDA_COMMUNICATOR)
            return
        platform_cls.get_device_communicator_cls = classmethod(lambda cls: COMMUNICATOR)
        _patched = (platform_cls, own)
        logger.debug("quickreduce: %s.get_device_communicator_cls -> %s", platform_cls.__name__, COMMUNICATOR)
    except Exception as e:  # noqa: BLE001 - never stop the engine
        logger.warning("quickreduce: not enabled in vLLM (%s: %s); vLLM's own all-reduce runs every size",
                       type(e).__name__, e)


def unregister() -> None:
    """Undo ``register()`` (for tests): groups created afterwards get vLLM's own communicator."""
    global _patched
    if _patched is None:
        return
    platform_cls, own = _patched
    if own is None:
        del platform_cls.get_device_communicator_cls
    else:
        platform_cls.get_device_communicator_cls = own
    _patched = None


def is_registered() -> bool:
    return _patched is not None
