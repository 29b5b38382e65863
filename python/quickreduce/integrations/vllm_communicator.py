"""The ``CudaCommunicator`` subclass the vLLM plugin names (quickreduce.integrations.vllm).

vLLM builds it for every group that uses a device communicator; only tensor-parallel groups (``tp:*``,
the groups vLLM gives its own fast all-reduces) set quickreduce up. ``all_reduce`` sends quickreduce
what its plan takes (a pure function of size, dtype and codec) and everything else to vLLM's own chain
(``CudaCommunicator.all_reduce``). vLLM calls ``all_reduce`` inside its opaque ``vllm::all_reduce`` op,
eagerly and while capturing CUDA graphs under ``GroupCoordinator.graph_capture``: quickreduce needs no
capture hook (its buffers are mapped at set-up; the kernels take the input's address directly), and
the set-up, warm-up included, happens here, in ``__init__``, before any capture.
"""
from __future__ import annotations

import torch
from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator

from . import common
from .vllm import logger


def _engine_max_bytes():
    """The largest all-reduce vLLM will make, where its config says: max_num_batched_tokens x hidden size x
    the model's dtype size (a row-parallel layer's output); None when no config is current."""
    try:
        from vllm.config import get_current_vllm_config_or_none
        config = get_current_vllm_config_or_none()
        if config is None or config.model_config is None:
            return None
        tokens = int(config.scheduler_config.max_num_batched_tokens)
        hidden = int(config.model_config.get_hidden_size())
        itemsize = torch.empty((), dtype=config.model_config.dtype).element_size()
        return tokens * hidden * itemsize if tokens > 0 and hidden > 0 else None
    except Exception:  # noqa: BLE001 - no hint: the limit variable alone sizes the workspace
        return None


def _batch_invariant() -> bool:
    try:
        import vllm.envs as envs
        return bool(envs.VLLM_BATCH_INVARIANT)
    except Exception:  # noqa: BLE001
        return False


class QuickreduceCudaCommunicator(CudaCommunicator):
    """vLLM's ``CudaCommunicator`` with quickreduce first in its all-reduce chain (for the sizes its plan
    takes). ``self.quickreduce`` is the ``EngineAllReduce``, None where it is not used (not a TP group, or
    the set-up refused with one log line)."""

    def __init__(self, cpu_group, device=None, device_group=None, unique_name: str = "", *args, **kwargs):
        super().__init__(cpu_group, device, device_group, unique_name, *args, **kwargs)
        self.quickreduce = None
        if unique_name.split(":")[0] != "tp" or self.world_size < 2:
            return
        try:
            self.quickreduce = common.attach("vLLM", unique_name, self.cpu_group, self.device,
                                             max_bytes_hint=_engine_max_bytes(), require_exact=_batch_invariant(),
                                             log=logger)
        except Exception as e:  # noqa: BLE001 - the engine keeps its own path
            logger.warning("quickreduce: not used in vLLM group %s (%s: %s); vLLM's own all-reduce runs every size",
                           unique_name, type(e).__name__, e)
            self.quickreduce = None

    def all_reduce(self, input_):
        qr = self.quickreduce
        if qr is not None and qr.takes(input_):
            return qr.all_reduce(input_)
        return super().all_reduce(input_)

    def destroy(self):
        qr, self.quickreduce = self.quickreduce, None
        if qr is not None:
            qr.close()
        super().destroy()
