"""Reduce-scatter, all-gather, all-to-all and the fp32 all-reduce on a Communicator.

Shaped like torch.distributed's ``reduce_scatter_tensor``, ``all_gather_into_tensor`` and
``all_to_all_single`` (blocks along dim 0), but out of place by default. Their arithmetic is
docs/codec-spec.md ("Segments" and after): one quantization a value; all-gather gives identical
bits on every rank. The kernels are one segment exchange (csrc/collectives/exchange/).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from . import _C, codecs

_KINDS = {"all_gather": _C.EXCHANGE_ALL_GATHER, "all_to_all": _C.EXCHANGE_ALL_TO_ALL,
          "reduce_scatter": _C.EXCHANGE_REDUCE_SCATTER}
DTYPE_IDS = {torch.float16: _C.DTYPE_FLOAT16, torch.bfloat16: _C.DTYPE_BFLOAT16, torch.float32: _C.DTYPE_FLOAT32}
HALF_DTYPE_IDS = {t: i for t, i in DTYPE_IDS.items() if t != torch.float32}  # the all-reduce kernels' dtypes


def resolve_codec(comm, collective: str, codec: Optional[str], x: torch.Tensor, even: bool = True) -> str:
    """The codec name a collective runs: the call's, else the communicator's per-collective default.
    ``auto`` is the exact passthrough; ``auto:<codec>`` the tuning table's fastest codec at most that
    lossy for this collective, dtype and size (tuning.choose_collective: the bound codec itself while
    the table holds no measurement of the collective), except where the passthrough's segments take
    the flag-in-data path (`takes_packets`): there it stays exact, but for fp32 where the table measured
    the collective in fp32."""
    name = codec if codec is not None else comm.codec_for(collective)
    is_auto, bound = codecs.parse_codec_request(name)
    if not is_auto:
        return bound
    if bound is None:
        return "fp16"
    from . import tuning
    table = comm.tune_table()
    # fp32 on the packet path: the table's measured choice; with none measured, exact as 16-bit (and the
    # fp32 all-reduce, whose exact call there is one packet kernel for both halves, not two calls)
    measured_fp32 = (x.element_size() == 4 and collective != "all_reduce"
                     and tuning.measured_collective(table, collective, x.dtype))
    if collective == "all_reduce":  # the fp32 all-reduce: reduce-scatter + all-gather
        collective = "reduce_scatter"
    if even and not measured_fp32 and takes_packets(comm, collective, x):
        return "fp16"  # the exact passthrough, as "auto"
    chosen = tuning.choose_collective(table, collective, x.numel() * x.element_size(), x.dtype, bound)
    return codecs.canonical(chosen)


def takes_packets(comm, collective: str, x: torch.Tensor) -> bool:
    """Whether an even collective of input `x` keeps the exact call under an ``auto:<codec>`` bound: its
    passthrough segments take the flag-in-data path (the C++ Communicator's own rule: the packet limit,
    max_size, the kernel's 2 MiB) and hold at most _C.PACKET_CHANNEL_VALUES values (a lane a thread of the
    channel), where the codecs, which take the same path, were no faster (bf16, 2026-11-28, 2x H200:
    1.0-1.25x the exact call's time at 8-512 KB; 4x H200, before the codecs' units: 1.2-1.8x). Past that
    the int4-family codecs send one unit a lane and were faster (2x H200, 2 MB: reduce-scatter int4 5.5
    against 8.4 us, all-gather 4.6 against 6.3), so the tuning table decides. fp32 tensors take the
    table's choice (resolve_codec): their codecs carry a quarter of the exact call's bytes or less and were
    faster on this path (2x H200, 2026-11-28: reduce-scatter 512 KB int6 3.30 against 3.86 us, 2 MB int8 5.15
    against 8.51) where the table has fp32 entries for the collective."""
    values = x.numel() if collective == "all_gather" else x.numel() // comm.world_size
    if values > _C.PACKET_CHANNEL_VALUES:
        return False
    return _C.packet_path_fits(comm.world_size, comm.max_size, values * x.element_size(), comm.packet_segment_max_bytes)


def _rows(t: torch.Tensor) -> int:
    return t.shape[0] if t.dim() else 1


def _row_values(t: torch.Tensor) -> int:
    return math.prod(t.shape[1:]) if t.dim() else 1


def _out(comm, x: torch.Tensor, out: Optional[torch.Tensor], shape: tuple, what: str) -> torch.Tensor:
    if out is None:
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    comm._check_tensor(out, "out", DTYPE_IDS)
    if out.dtype != x.dtype:
        raise TypeError(f"out has dtype {out.dtype}; the input has {x.dtype}")
    if out.numel() != math.prod(shape):
        raise ValueError(f"out has shape {tuple(out.shape)} ({out.numel()} values); {what} needs {math.prod(shape)} "
                         f"values, e.g. shape {shape}")
    if out.numel() and x.numel() and _overlaps(out, x):
        raise ValueError("out overlaps the input; the collectives read the input while writing the output")
    return out


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def _run(comm, kind: str, x: torch.Tensor, out: torch.Tensor, codec: str, send: Sequence[int],
         recv: Sequence[int], even_splits: bool = False) -> None:
    """even_splits (all-to-all): no split sizes were given, so every rank knows every count and
    none cross the link (ranks must agree on whether they give split sizes)."""
    comm._c.exchange(_KINDS[kind], x.data_ptr(), out.data_ptr(), DTYPE_IDS[x.dtype], codecs.codec_id(codec),
                     list(send), list(recv), torch.cuda.current_stream(comm.device).cuda_stream, pdl=comm.pdl,
                     even_splits=even_splits, packet_max_bytes=comm.packet_segment_max_bytes)


def reduce_scatter(comm, x: torch.Tensor, out: Optional[torch.Tensor] = None, codec: Optional[str] = None) -> torch.Tensor:
    W = comm.world_size
    comm._check_tensor(x, "x", DTYPE_IDS)
    if x.numel() % W:
        raise ValueError(f"reduce_scatter needs an input whose size divides by the world size {W}; x has {x.numel()} values")
    shape = (_rows(x) // W, *x.shape[1:]) if x.dim() and _rows(x) % W == 0 else (x.numel() // W,)
    out = _out(comm, x, out, shape, "reduce_scatter")
    k = x.numel() // W
    if k:
        _run(comm, "reduce_scatter", x, out, resolve_codec(comm, "reduce_scatter", codec, x), [k] * W, [k] * W)
    return out


def all_gather(comm, x: torch.Tensor, out: Optional[torch.Tensor] = None, codec: Optional[str] = None) -> torch.Tensor:
    W = comm.world_size
    comm._check_tensor(x, "x", DTYPE_IDS)
    shape = (W * _rows(x), *x.shape[1:]) if x.dim() else (W,)
    out = _out(comm, x, out, shape, "all_gather")
    k = x.numel()
    if k:
        _run(comm, "all_gather", x, out, resolve_codec(comm, "all_gather", codec, x), [k] * W, [k] * W)
    return out


def _splits(name: str, splits: Optional[Sequence[int]], rows: int, W: int) -> list[int]:
    if splits is None:
        if rows % W:
            raise ValueError(f"all_to_all without {name} needs dim 0 ({rows}) divisible by the world size {W}")
        return [rows // W] * W
    splits = [int(s) for s in splits]
    if len(splits) != W or any(s < 0 for s in splits):
        raise ValueError(f"{name} must hold {W} non-negative sizes (one per rank), got {splits}")
    return splits


def all_to_all(comm, x: torch.Tensor, out: Optional[torch.Tensor] = None, codec: Optional[str] = None,
               output_split_sizes: Optional[Sequence[int]] = None,
               input_split_sizes: Optional[Sequence[int]] = None) -> torch.Tensor:
    W = comm.world_size
    comm._check_tensor(x, "x", DTYPE_IDS)
    if x.dim() == 0:
        raise ValueError("all_to_all needs a tensor with at least one dimension (split along dim 0)")
    row = _row_values(x)
    send = _splits("input_split_sizes", input_split_sizes, _rows(x), W)
    if sum(send) != _rows(x):
        raise ValueError(f"input_split_sizes {send} add up to {sum(send)} rows; x has {_rows(x)}")
    if output_split_sizes is None and out is not None and out.dim():
        recv = _splits("output_split_sizes", None, out.shape[0], W)
    else:
        recv = _splits("output_split_sizes", output_split_sizes, _rows(x), W)
    out = _out(comm, x, out, (sum(recv), *x.shape[1:]), "all_to_all")
    if out.dim() and out.shape[0] != sum(recv) and out.numel() != sum(recv) * row:
        raise ValueError(f"out has {out.shape[0]} rows; output_split_sizes {recv} add up to {sum(recv)}")
    send_values, recv_values = [s * row for s in send], [r * row for r in recv]
    even = input_split_sizes is None and output_split_sizes is None
    _run(comm, "all_to_all", x, out, resolve_codec(comm, "all_to_all", codec, x, even), send_values, recv_values, even)
    return out


def all_reduce_in_two_calls(comm, x: torch.Tensor, out: torch.Tensor, codec: str) -> torch.Tensor:
    """All-reduce as reduce-scatter then all-gather of W chunks of K = 32 * ceil(N / 32W) values
    (docs/codec-spec.md, "All-reduce of fp32 tensors"): every fp32 all-reduce, and 16-bit ones where
    the plan says `rs_ag`. A tail that does not fill W chunks is padded with zeros in a scratch buffer
    (the zeros change no block's absmax and are never written out). An exact call whose chunks fit the
    packet path runs both halves as one kernel (Communicator.all_reduce_packets: on 4x H100, 2026-11-27,
    9.4-9.7 / 16.4-16.8 / 25.7-27.3 us at 512 KB / 2 MB / 4 MB where the two launches took 10.4 / 19.3 /
    30.8)."""
    W, n = comm.world_size, x.numel()
    stream = torch.cuda.current_stream(comm.device).cuda_stream
    if (codec in codecs.PASSTHROUGH_BITS or codec in codecs.exact_codecs()) and \
            comm._c.all_reduce_packets_fit(n, DTYPE_IDS[x.dtype], comm.packet_segment_max_bytes):
        # Exact and small enough for the packet path: both halves in one kernel (the same bits).
        comm._c.all_reduce_packets(x.data_ptr(), out.data_ptr(), n, DTYPE_IDS[x.dtype], stream, pdl=comm.pdl,
                                   packet_max_bytes=comm.packet_segment_max_bytes)
        return out
    K = _C.fp32_all_reduce_chunk(n, W)
    flat = x.reshape(-1)
    if W * K != n:
        padded = torch.zeros(W * K, dtype=x.dtype, device=x.device)
        padded[:n].copy_(flat)
        flat = padded
    chunk = torch.empty(K, dtype=x.dtype, device=x.device)
    _run(comm, "reduce_scatter", flat, chunk, codec, [K] * W, [K] * W)
    valid = min(max(n - comm.rank * K, 0), K)
    if valid < K:  # the padding must stay zero for the second shot (a rotated codec's sum is not)
        chunk[valid:].zero_()
    gathered = out.reshape(-1) if W * K == n else torch.empty(W * K, dtype=x.dtype, device=x.device)
    _run(comm, "all_gather", chunk, gathered, codec, [K] * W, [K] * W)
    if W * K != n:
        out.reshape(-1).copy_(gathered[:n])
    return out
