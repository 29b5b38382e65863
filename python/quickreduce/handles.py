"""The module-level handle API, for Ray and other launchers without torch.distributed: one default
communicator per process, codecs numbered as in vLLM's QuickReduce (profiles).

    qr.init(world_size, rank)
    h = qr.get_comm_handle()          # bytes, give to every rank
    qr.set_comm_handles(all_handles)  # list in rank order
    y = qr.allreduce(profile, x)      # 1=fp16, 2=fp8, 3=int8, 4=int6, 5=int4, 6=fp4, 7=lossless
    y = qr.reduce_scatter(profile, x); y = qr.allgather(profile, x); y = qr.alltoall(profile, x)
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from . import codecs
from .comm import Communicator, QuickReduceError

_default: Optional[Communicator] = None


def _require() -> Communicator:
    if _default is None:
        raise QuickReduceError("quickreduce is not initialised: call quickreduce.init(world_size, rank) first")
    return _default


def init(world_size: int, rank: int, max_size: Optional[int] = None) -> None:
    """Create this process's communicator on ``torch.cuda.current_device()``."""
    global _default
    if _default is not None:
        _default.close()
    _default = Communicator(rank=rank, world_size=world_size, max_size=max_size)


def get_comm_handle() -> bytes:
    return _require().ipc_handle()


def set_comm_handles(handles: Sequence[bytes]) -> None:
    _require().set_handles(handles)


def allreduce(profile: int, tensor: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Sum ``tensor`` over all ranks with the codec of ``profile``; returns a new tensor (or ``out``)."""
    return _require().all_reduce(tensor, out=out, codec=codecs.profile_to_codec(profile), algo="auto")


def reduce_scatter(profile: int, tensor: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Block ``rank`` of the sum of ``tensor`` over all ranks (Communicator.reduce_scatter)."""
    return _require().reduce_scatter(tensor, out=out, codec=codecs.profile_to_codec(profile))


def allgather(profile: int, tensor: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Every rank's ``tensor`` concatenated along dim 0 (Communicator.all_gather)."""
    return _require().all_gather(tensor, out=out, codec=codecs.profile_to_codec(profile))


def alltoall(profile: int, tensor: torch.Tensor, out: Optional[torch.Tensor] = None,
             output_split_sizes: Optional[Sequence[int]] = None,
             input_split_sizes: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Rows of ``tensor`` exchanged between ranks along dim 0 (Communicator.all_to_all)."""
    return _require().all_to_all(tensor, out=out, codec=codecs.profile_to_codec(profile),
                                 output_split_sizes=output_split_sizes, input_split_sizes=input_split_sizes)


def destroy() -> None:
    global _default
    if _default is not None:
        _default.close()
        _default = None
