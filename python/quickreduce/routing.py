"""Which calls the ``torch.distributed`` backend "quickreduce" takes (quickreduce.distributed): ``route``,
a pure function of a call's description (``Request``, built by the ``describe_*`` functions from the
call's tensors, no pointers) and the group's ``Limits``. The same request and limits give the same route
on every rank."""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional, Sequence

import torch

from . import _C, config, ops
from .comm import SUPPORTED_WORLD_SIZES

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
COLLECTIVES = config.COLLECTIVES  # all_reduce, reduce_scatter, all_gather, all_to_all
MAX_SEGMENT_VALUES = 2**32 - 1  # the exchange counts a segment in 32 bits


# ---------------------------------------------------------------- routing: a pure function of the call
@dataclasses.dataclass(frozen=True)
class Limits:
    """What a group's routing depends on besides the call: the same on every rank."""
    world_size: int
    max_size: int
    codecs: dict  # collective -> codec name
    single_host: bool = True
    device_type: str = "cuda"  # the device whose tensors quickreduce takes


class Request(NamedTuple):
    """One call, described by what is the same on every rank of an SPMD program (no pointers); hashable,
    so a group caches the route of each request it has seen.

    ``in_numel``/``out_numel`` count values; ``rows``/``row_numel`` describe dim 0 (all-to-all);
    ``op`` is a ReduceOp's lower-case name (reducing collectives); split sizes ``()`` mean even splits."""
    collective: str
    tensors: int = 1
    device_type: str = "cuda"
    dtype: Optional[torch.dtype] = torch.bfloat16  # None: input and output dtypes differ
    contiguous: bool = True
    in_numel: int = 0
    out_numel: int = 0
    op: Optional[str] = None
    in_rows: int = 0
    out_rows: int = 0
    in_row_numel: int = 1
    out_row_numel: int = 1
    input_split_sizes: tuple = ()
    output_split_sizes: tuple = ()
    on_comm_device: bool = True  # on the communicator's GPU (True before it exists)


class Route(NamedTuple):
    """Where a call goes. ``reason`` (a short, bounded label, for counters) and ``detail`` (a sentence)
    say why the fallback takes it; both are empty when quickreduce does."""
    quickreduce: bool
    reason: str = ""
    detail: str = ""


QUICKREDUCE = Route(True)


def _fallback(reason: str, detail: str) -> Route:
    return Route(False, reason, detail)


def message_bytes(req: Request, world_size: int) -> int:
    """The bytes quickreduce's size limit applies to for this call: the larger of input and output, and
    the padded buffers of the paths that pad (fp32 all-reduce, MAX/MIN all-reduce). Valid for a request
    whose sizes are consistent (``route`` checks them first)."""
    elt = req.dtype.itemsize
    n, W = req.in_numel, world_size
    if req.collective == "all_reduce":
        if n == 0:
            return 0
        if req.op in ("max", "min"):  # ops.all_reduce_extreme: W chunks of K values, K a multiple of 8
            chunk = (-(-n // W) + 7) // 8 * 8
            return max(n, W * chunk) * elt
        if req.dtype == torch.float32:  # collectives.all_reduce_in_two_calls: reduce-scatter of W chunks
            return max(n, W * _C.fp32_all_reduce_chunk(n, W)) * elt
        return n * elt
    return max(req.in_numel, req.out_numel) * elt


def _largest_segment(req: Request, world_size: int) -> int:
    """Values in the largest segment the exchange kernel moves (counted in 32 bits)."""
    if req.collective == "all_reduce":
        if req.dtype == torch.float32 or req.op in ("max", "min"):
            return -(-req.in_numel // world_size) + 32
        return 0  # the all-reduce kernels count in 64 bits
    if req.collective == "reduce_scatter":
        return req.out_numel
    if req.collective == "all_gather":
        return req.in_numel
    splits = list(req.input_split_sizes) + list(req.output_split_sizes)
    rows = max(splits) if splits else max(req.in_rows, req.out_rows) // max(world_size, 1)
    return rows * req.in_row_numel


def _check_splits(name: str, splits: tuple, rows: int, W: int) -> Optional[Route]:
    if not splits:
        if rows % W:
            return _fallback("sizes", f"all_to_all with even splits needs dim 0 ({rows}) divisible by the "
                                      f"world size {W}")
        return None
    if len(splits) != W or any(int(s) < 0 for s in splits):
        return _fallback("sizes", f"{name} {list(splits)} must hold {W} non-negative sizes")
    if sum(splits) != rows:
        return _fallback("sizes", f"{name} {list(splits)} add up to {sum(splits)} rows; the tensor has {rows}")
    return None


def route(req: Request, limits: Limits) -> Route:
    """Whether quickreduce takes ``req`` in a group with ``limits``, and if not, why.

    A pure function: the same request and limits give the same route on every rank (tests/cpu/
    test_distributed_backend.py checks it over every combination that matters)."""
    W = limits.world_size
    if W not in SUPPORTED_WORLD_SIZES:
        return _fallback("world size", f"a group of {W} ranks (quickreduce runs on "
                                       f"{SUPPORTED_WORLD_SIZES[0]}..{SUPPORTED_WORLD_SIZES[-1]})")
    if not limits.single_host:
        return _fallback("several hosts", "the group spans several hosts (quickreduce is intra-node)")
    if req.collective not in COLLECTIVES:
        return _fallback("collective", f"{req.collective} is not a quickreduce collective")
    if req.tensors != 1:
        return _fallback("tensor count", f"{req.tensors} tensors in one call (quickreduce takes one)")
    if req.device_type != limits.device_type:
        return _fallback("device", f"a {req.device_type} tensor (quickreduce takes {limits.device_type} tensors)")
    if not req.on_comm_device:
        return _fallback("other GPU", "a tensor on another GPU than the quickreduce communicator's")
    if req.dtype is None:
        return _fallback("dtype", "input and output dtypes differ")
    if req.dtype not in DTYPES:
        return _fallback("dtype", f"dtype {req.dtype} (quickreduce takes float16, bfloat16, float32)")
    if not req.contiguous:
        return _fallback("non-contiguous", "a non-contiguous tensor")
    codec = limits.codecs[req.collective]
    if req.collective in ("all_reduce", "reduce_scatter"):
        if req.op not in ops.REDUCE_OPS:
            return _fallback(f"ReduceOp {req.op}", f"ReduceOp {req.op} (quickreduce has SUM, AVG, MAX, MIN)")
        if req.op in ("max", "min") and not ops.is_exact(codec):
            return _fallback("MAX/MIN with a lossy codec",
                             f"ReduceOp {req.op.upper()} with the lossy codec {codec!r} (exact codecs only)")
    if req.collective == "all_reduce" and req.in_numel != req.out_numel:
        return _fallback("sizes", "all_reduce input and output differ in size")
    if req.collective == "reduce_scatter" and req.in_numel != W * req.out_numel:
        return _fallback("sizes", f"reduce_scatter of {req.in_numel} values into {req.out_numel} "
                                  f"(the input must be {W} x the output)")
    if req.collective == "all_gather" and req.out_numel != W * req.in_numel:
        return _fallback("sizes", f"all_gather of {req.in_numel} values into {req.out_numel} "
                                  f"(the output must be {W} x the input)")
    if req.collective == "all_to_all":
        if req.in_row_numel != req.out_row_numel:
            return _fallback("sizes", f"all_to_all rows of {req.in_row_numel} and {req.out_row_numel} values")
        bad = (_check_splits("input_split_sizes", req.input_split_sizes, req.in_rows, W)
               or _check_splits("output_split_sizes", req.output_split_sizes, req.out_rows, W))
        if bad is not None:
            return bad
        if not req.input_split_sizes and not req.output_split_sizes and req.in_rows != req.out_rows:
            return _fallback("sizes", f"all_to_all with even splits of {req.in_rows} rows into {req.out_rows}")
    nbytes = message_bytes(req, W)
    if nbytes > limits.max_size:
        return _fallback("over max_size", f"a message of {nbytes} bytes (max_size is {limits.max_size})")
    if _largest_segment(req, W) > MAX_SEGMENT_VALUES:
        return _fallback("over max_size", "a segment of more than 2^32 - 1 values")
    return QUICKREDUCE


# ---------------------------------------------------------------- describing real calls
def reduce_op_label(op) -> str:
    """``"sum"``/``"avg"``/``"max"``/``"min"``, or the lower-case name of any other ReduceOp."""
    try:
        return ops.reduce_op_name(op)
    except ValueError:
        inner = getattr(op, "op", op)  # a ReduceOp object wraps a RedOpType
        return str(getattr(inner, "name", inner)).lower()


def _common(tensors: Sequence[torch.Tensor], comm_device: Optional[torch.device]) -> dict:
    """The fields every request has, over the call's one or two tensors (on the hot path: kept cheap)."""
    first = tensors[0]
    device, dtype = first.device, first.dtype
    same_device = all(t.device == device for t in tensors[1:])
    return {
        "device_type": device.type if same_device else "mixed",
        "dtype": dtype if all(t.dtype == dtype for t in tensors[1:]) else None,
        "contiguous": all(t.layout == torch.strided and t.is_contiguous() for t in tensors),
        "on_comm_device": comm_device is None or (same_device and device == comm_device),
    }


def _rows(t: torch.Tensor) -> tuple[int, int]:
    """(dim 0, values a row): how all_to_all_single splits a tensor of one dimension or more."""
    return t.shape[0], math.prod(t.shape[1:])


def describe_all_reduce(tensors: Sequence[torch.Tensor], op, comm_device=None) -> Request:
    if len(tensors) != 1:
        return Request("all_reduce", tensors=len(tensors))
    t = tensors[0]
    device, n = t.device, t.numel()
    return Request("all_reduce", 1, device.type, t.dtype, t.layout == torch.strided and t.is_contiguous(), n, n,
                   reduce_op_label(op), on_comm_device=comm_device is None or device == comm_device)


def describe_reduce_scatter(output: torch.Tensor, input: torch.Tensor, op, comm_device=None) -> Request:
    return Request("reduce_scatter", op=reduce_op_label(op), in_numel=input.numel(), out_numel=output.numel(),
                   **_common([output, input], comm_device))


def describe_all_gather(output: torch.Tensor, input: torch.Tensor, comm_device=None) -> Request:
    return Request("all_gather", in_numel=input.numel(), out_numel=output.numel(),
                   **_common([output, input], comm_device))


def describe_all_to_all(output: torch.Tensor, input: torch.Tensor, output_split_sizes, input_split_sizes,
                        comm_device=None) -> Request:
    common = _common([output, input], comm_device)
    if input.dim() == 0 or output.dim() == 0:  # torch splits along dim 0
        common["contiguous"] = False
        return Request("all_to_all", in_numel=input.numel(), out_numel=output.numel(), **common)
    (in_rows, in_row), (out_rows, out_row) = _rows(input), _rows(output)
    return Request("all_to_all", in_numel=input.numel(), out_numel=output.numel(), in_rows=in_rows,
                   out_rows=out_rows, in_row_numel=in_row, out_row_numel=out_row,
                   input_split_sizes=tuple(int(s) for s in input_split_sizes or ()),
                   output_split_sizes=tuple(int(s) for s in output_split_sizes or ()), **common)
