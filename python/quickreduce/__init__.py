"""quickreduce: fast intra-node collectives (all-reduce, reduce-scatter, all-gather, all-to-all) for NVIDIA GPUs with inline compression."""
from . import _C
from .codecs import codec_info, codec_names
from .comm import (ALGOS, CallMismatchError, Communicator, CudaError, PeerTimeoutError, Plan, QuickReduceError,
                   SplitSizeError, plan_all_reduce)
from .handles import allgather, allreduce, alltoall, destroy, get_comm_handle, init, reduce_scatter, set_comm_handles

__version__ = "0.1.0"

__all__ = [
    "ALGOS", "CallMismatchError", "Communicator", "CudaError", "PeerTimeoutError", "Plan", "QuickReduceError", "SplitSizeError",
    "allgather", "allreduce", "alltoall", "codec_info", "codec_names", "destroy", "get_comm_handle", "init", "plan_all_reduce", "reduce_scatter",
    "set_comm_handles",
]
