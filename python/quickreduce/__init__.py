"""quickreduce: fast intra-node all-reduce for NVIDIA GPUs with inline compression."""
from . import _C
from .codecs import codec_info, codec_names
from .comm import ALGOS, CallMismatchError, Communicator, CudaError, PeerTimeoutError, QuickReduceError
from .handles import allreduce, destroy, get_comm_handle, init, set_comm_handles

__version__ = "0.1.0"

__all__ = [
    "ALGOS", "CallMismatchError", "Communicator", "CudaError", "PeerTimeoutError", "QuickReduceError",
    "allreduce", "codec_info", "codec_names", "destroy", "get_comm_handle", "init", "set_comm_handles",
]
