"""The dynamic all-to-all (split sizes on the device) and MoE dispatch/combine built on it (docs/moe.md).

``Communicator.all_to_all_dynamic(x, input_split_sizes, out=None, output_split_sizes=None, *,
capacity=None, codec=None)`` is ``torch.distributed.all_to_all_single`` whose split sizes are device
tensors: ``input_split_sizes[d]`` (int32 or int64, on the GPU) rows of ``x`` (dim 0, in rank order) go
to rank d; rank s's rows land in ``out`` in rank order and ``output_split_sizes[s]`` (same dtype, on
the GPU, written by the kernel) says how many. ``out`` has a fixed number of rows, its *capacity*
(default ``world_size * x.shape[0]``); rows past ``sum(output_split_sizes)`` are left as they were.
Nothing reads the counts on the host: the call never synchronizes, and a captured CUDA graph replays
with whatever counts the device holds at each replay.

Bad counts never make a kernel write out of bounds or wait forever (csrc/collectives/exchange/
dynamic_plan.hpp): a rank whose counts are negative or add up to more rows than ``x`` has sends
nothing; a rank sent more rows than its capacity keeps them in rank order up to it; the call ends
on every rank, and the next call (or ``comm.check()``) raises ``SplitSizeError`` naming the rank and
the case. After that the communicator is unusable, as after a peer timeout.

For counts that fit, the output equals ``all_to_all(x, input_split_sizes=..., output_split_sizes=...)``
with the same counts bit for bit, with every codec (the same segments, encoded alike).

MoE helpers (``dispatch_layout``, ``dispatch``, ``combine``): a token's top-k (token, expert) pairs
are sent as one row each to the rank owning the expert (experts spread over the ranks in contiguous
blocks), sorted by destination; ``combine`` sends the expert outputs back the same way and returns
them in (token, slot) order, so the caller weights and sums them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from . import _C, codecs, collectives, ops

COUNT_DTYPES = (torch.int32, torch.int64)
SplitSizeError = _C.SplitSizeError


def _rows(t: torch.Tensor) -> int:
    return t.shape[0] if t.dim() else 1


def _row_values(t: torch.Tensor) -> int:
    return math.prod(t.shape[1:]) if t.dim() else 1


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    return t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if not a.numel() or not b.numel():
        return False
    (a0, a1), (b0, b1) = _byte_range(a), _byte_range(b)
    return a0 < b1 and b0 < a1


def _on_comm_device(comm, t: torch.Tensor) -> bool:
    return t.is_cuda and t.device.index == comm.device


def _check_counts(comm, t, what: str) -> None:
    W = comm.world_size
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a device tensor of {W} int32 or int64 row counts (the host-sized form is "
                        f"all_to_all(input_split_sizes=[...])); got {type(t).__name__}")
    if t.dtype not in COUNT_DTYPES:
        raise TypeError(f"{what} has dtype {t.dtype}; the counts are torch.int32 or torch.int64")
    if tuple(t.shape) != (W,):
        raise ValueError(f"{what} has shape {tuple(t.shape)}; it holds one count per rank: shape ({W},)")
    if not _on_comm_device(comm, t):
        raise ValueError(f"{what} is on {t.device}; the counts stay on the GPU (cuda:{comm.device}): the kernel "
                         f"reads and writes them, the host never does")
    if not t.is_contiguous():
        raise ValueError(f"{what} is not contiguous")


def _check_capacity(capacity) -> None:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ValueError(f"capacity must be a non-negative number of rows, got {capacity!r}")


def check_dynamic(comm, x: torch.Tensor, input_split_sizes: torch.Tensor, out: Optional[torch.Tensor],
                  output_split_sizes: Optional[torch.Tensor], capacity: Optional[int]
                  ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Checks a call's arguments and makes the missing outputs: (out, output_split_sizes, capacity)."""
    W = comm.world_size
    comm._check_tensor(x, "x", collectives.DTYPE_IDS)
    if x.dim() == 0:
        raise ValueError("all_to_all_dynamic needs a tensor with at least one dimension (rows along dim 0)")
    _check_counts(comm, input_split_sizes, "input_split_sizes")
    if capacity is not None:
        _check_capacity(capacity)
    if out is None:
        capacity = W * _rows(x) if capacity is None else capacity
        out = torch.empty((capacity, *x.shape[1:]), dtype=x.dtype, device=x.device)
    else:
        comm._check_tensor(out, "out", collectives.DTYPE_IDS)
        if out.dtype != x.dtype:
            raise TypeError(f"out has dtype {out.dtype}; the input has {x.dtype}")
        if out.dim() == 0 or _row_values(out) != _row_values(x):
            raise ValueError(f"out has shape {tuple(out.shape)}; its rows must hold what x's rows hold "
                             f"({tuple(x.shape[1:])}, {_row_values(x)} values)")
        if capacity is None:
            capacity = out.shape[0]
        elif capacity > out.shape[0]:
            raise ValueError(f"capacity {capacity} is more rows than out has ({out.shape[0]})")
    if output_split_sizes is None:
        output_split_sizes = torch.empty(W, dtype=input_split_sizes.dtype, device=input_split_sizes.device)
    else:
        _check_counts(comm, output_split_sizes, "output_split_sizes")
        if output_split_sizes.dtype != input_split_sizes.dtype:
            raise TypeError(f"output_split_sizes has dtype {output_split_sizes.dtype}; input_split_sizes has "
                            f"{input_split_sizes.dtype} (the kernel reads and writes one type)")
    # The kernel writes out and output_split_sizes while it reads x and input_split_sizes.
    for written, wname in ((out, "out"), (output_split_sizes, "output_split_sizes")):
        for read, rname in ((x, "x"), (input_split_sizes, "input_split_sizes")):
            if _overlap(written, read):
                raise ValueError(f"{wname} overlaps {rname}; the kernel reads {rname} while it writes {wname}")
    if _overlap(out, output_split_sizes):
        raise ValueError("out overlaps output_split_sizes")
    row, elem = _row_values(x), x.element_size()
    nbytes = max(_rows(x), capacity) * row * elem
    if nbytes > comm.max_size:
        raise ValueError(f"all_to_all_dynamic of {max(_rows(x), capacity)} rows of {row * elem} bytes (the larger of "
                         f"x's rows and out's capacity) needs max_size >= {nbytes}; this communicator's max_size is "
                         f"{comm.max_size} (set max_size= or QUICKREDUCE_MAX_SIZE_MB)")
    return out, output_split_sizes, capacity


def all_to_all_dynamic(comm, x: torch.Tensor, input_split_sizes: torch.Tensor, out: Optional[torch.Tensor] = None,
                       output_split_sizes: Optional[torch.Tensor] = None, capacity: Optional[int] = None,
                       codec: Optional[str] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The call itself (Communicator.all_to_all_dynamic): returns (out, output_split_sizes)."""
    out, output_split_sizes, capacity = check_dynamic(comm, x, input_split_sizes, out, output_split_sizes, capacity)
    name = collectives.resolve_codec(comm, "all_to_all", codec, x, even=False)
    comm._c.all_to_all_dynamic(x.data_ptr(), out.data_ptr(), input_split_sizes.data_ptr(),
                               output_split_sizes.data_ptr(), input_split_sizes.element_size(), _row_values(x),
                               _rows(x), capacity, collectives.DTYPE_IDS[x.dtype], codecs.codec_id(name),
                               torch.cuda.current_stream(comm.device).cuda_stream, pdl=comm.pdl)
    return out, output_split_sizes


# ---------------------------------------------------------------- the custom op
@torch.library.custom_op("quickreduce::all_to_all_dynamic", mutates_args=())
def all_to_all_dynamic_op(x: torch.Tensor, input_split_sizes: torch.Tensor, handle: int, capacity: int,
                          codec: Optional[str] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(out of ``capacity`` rows, output_split_sizes) of Communicator.all_to_all_dynamic; out's rows past
    the received ones are zeros (a functional op's output is all defined)."""
    comm = ops.lookup(handle)
    _check_capacity(capacity)
    out = torch.zeros((capacity, *x.shape[1:]), dtype=x.dtype, device=x.device) if x.dim() else None
    return all_to_all_dynamic(comm, x, input_split_sizes, out, None, capacity, codec)


@all_to_all_dynamic_op.register_fake
def _all_to_all_dynamic_fake(x, input_split_sizes, handle, capacity, codec=None):
    W = ops.lookup(handle).world_size
    if x.dim() == 0:
        raise ValueError("all_to_all_dynamic needs a tensor with at least one dimension (rows along dim 0)")
    if input_split_sizes.dtype not in COUNT_DTYPES or tuple(input_split_sizes.shape) != (W,):
        raise ValueError(f"input_split_sizes must be {W} int32 or int64 counts, got shape "
                         f"{tuple(input_split_sizes.shape)} and dtype {input_split_sizes.dtype}")
    return x.new_empty((capacity, *x.shape[1:])), input_split_sizes.new_empty((W,))


# ---------------------------------------------------------------- MoE dispatch / combine
@dataclass
class DispatchHandle:
    """What ``combine`` needs from a ``dispatch``: the send order of the (token, slot) pairs, the counts
    both ways, and the top-k shape."""
    order: torch.Tensor         # [T*k] int64: pair order[i] went out as row i
    send_counts: torch.Tensor   # [W] rows sent to each rank
    recv_counts: torch.Tensor   # [W] rows received from each rank (in rank order in the dispatch output)
    tokens: int
    topk: int


def dispatch_layout(topk_ids: torch.Tensor, num_experts: int, world_size: int,
                    count_dtype: torch.dtype = torch.int32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(order, send_counts, dest) for a [T, k] tensor of expert ids: experts in contiguous blocks of
    num_experts / world_size a rank; pair i = (token i // k, slot i % k) goes to rank dest[i]; order
    sorts the pairs by destination (token order kept within one); send_counts[d] = pairs for rank d.
    No host synchronization (scatter_add, a stable sort), so it is captured in CUDA graphs."""
    if num_experts % world_size:
        raise ValueError(f"{num_experts} experts do not spread evenly over {world_size} ranks")
    dest = (topk_ids.reshape(-1) // (num_experts // world_size)).to(torch.int64)
    order = torch.sort(dest, stable=True).indices
    counts = torch.zeros(world_size, dtype=torch.int64, device=topk_ids.device)
    counts.scatter_add_(0, dest, torch.ones_like(dest))
    return order, counts.to(count_dtype), dest


def dispatch(comm, x: torch.Tensor, topk_ids: torch.Tensor, num_experts: int, out: Optional[torch.Tensor] = None,
             recv_counts: Optional[torch.Tensor] = None, capacity: Optional[int] = None,
             codec: Optional[str] = None, count_dtype: torch.dtype = torch.int32,
             expert_ids_out: Optional[torch.Tensor] = None
             ) -> tuple[torch.Tensor, torch.Tensor, DispatchHandle, Optional[torch.Tensor]]:
    """Sends each token's row to the rank of each of its top-k experts: returns (received rows, in
    source-rank order, ``out``'s capacity rows; rows received from each rank; the handle for
    ``combine``; with ``expert_ids_out`` (float32 [capacity, 1]) the expert id of each received row,
    sent exactly by a second call with the same counts, else None). Default capacity:
    ``world_size * T * k`` (every pair of every rank could land here)."""
    T, k = topk_ids.shape
    order, send_counts, _ = dispatch_layout(topk_ids, num_experts, comm.world_size, count_dtype)
    rows = x.index_select(0, torch.div(order, k, rounding_mode="floor"))
    if capacity is None and out is None:
        capacity = comm.world_size * T * k
    out, recv_counts = all_to_all_dynamic(comm, rows, send_counts, out, recv_counts, capacity, codec)
    ids = None
    if expert_ids_out is not None:
        sorted_ids = topk_ids.reshape(-1).index_select(0, order).to(torch.float32).unsqueeze(1)
        ids_counts = torch.empty_like(recv_counts)
        ids, _ = all_to_all_dynamic(comm, sorted_ids, send_counts, expert_ids_out, ids_counts, out.shape[0]
                                    if capacity is None else capacity, "fp32")
    return out, recv_counts, DispatchHandle(order, send_counts, recv_counts, T, k), ids


def combine(comm, y: torch.Tensor, handle: DispatchHandle, out: Optional[torch.Tensor] = None,
            back_counts: Optional[torch.Tensor] = None, codec: Optional[str] = None) -> torch.Tensor:
    """Sends the expert outputs ``y`` (the dispatch output's rows, same order) back to their tokens'
    ranks: returns [T, k, ...] rows in (token, slot) order (the caller weights and sums over k)."""
    back, _ = all_to_all_dynamic(comm, y, handle.recv_counts, out, back_counts, handle.tokens * handle.topk, codec)
    unsorted = torch.empty_like(back)
    unsorted.index_copy_(0, handle.order, back)
    return unsorted.view(handle.tokens, handle.topk, *y.shape[1:])
