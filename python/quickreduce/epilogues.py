"""What follows the all-reduce in every transformer layer, fused into one kernel after it: the
residual add, RMSNorm and, optionally, the normed rows as FP8 e4m3 for the next GEMM
(`Communicator.all_reduce_add_rmsnorm`; arithmetic in docs/codec-spec.md, "Add + RMSNorm epilogue").

The epilogue kernel is chained to the all-reduce with programmatic dependent launch: it launches
while the all-reduce finishes and reads its sum once. The unfused sequence it replaces reads and
writes the hidden state two or three more times in two or three more launches.
"""
from __future__ import annotations

from typing import Optional

import torch

from . import _C, collectives

FP8_MODES = {None: _C.FP8_OUT_NONE, "per_token": _C.FP8_OUT_PER_TOKEN, "per_tensor": _C.FP8_OUT_PER_TENSOR}
_DTYPE_IDS = collectives.HALF_DTYPE_IDS


def check_args(x, residual, weight, eps, out, residual_out, fp8, fp8_scale) -> tuple[int, int]:
    """(rows, hidden) of a valid call; a clear exception for anything the kernel cannot take."""
    for name, t in (("residual", residual), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if x.dtype not in _DTYPE_IDS:
        raise TypeError(f"all_reduce_add_rmsnorm takes float16/bfloat16 tensors, got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"x must have a non-empty last (hidden) dimension, got shape {tuple(x.shape)}")
    hidden = x.shape[-1]
    if hidden % 8 or hidden > 65536:
        raise ValueError(f"hidden size (x.shape[-1]) must be a multiple of 8 up to 65536, got {hidden}")
    if residual.shape != x.shape or residual.dtype != x.dtype or residual.device != x.device:
        raise ValueError(f"residual must match x (shape {tuple(x.shape)}, {x.dtype}, {x.device}); got "
                         f"{tuple(residual.shape)}, {residual.dtype}, {residual.device}")
    if weight.shape != (hidden,) or weight.dtype != x.dtype or weight.device != x.device:
        raise ValueError(f"weight must be [{hidden}] {x.dtype} on {x.device}; got {tuple(weight.shape)}, "
                         f"{weight.dtype}, {weight.device}")
    for name, t in (("residual", residual), ("weight", weight), ("out", out), ("residual_out", residual_out)):
        if t is not None and (not t.is_contiguous() or t.data_ptr() % 16):
            raise ValueError(f"{name} must be contiguous and 16-byte aligned")
    for name, t in (("out", out), ("residual_out", residual_out)):
        if t is not None and (t.shape != x.shape or t.dtype != x.dtype or t.device != x.device):
            raise ValueError(f"{name} must match x (shape {tuple(x.shape)}, {x.dtype}, {x.device})")
    if out is not None and residual_out is not None and out.data_ptr() == residual_out.data_ptr():
        raise ValueError("out and residual_out must be different tensors")
    if out is not None and out.data_ptr() == residual.data_ptr():
        raise ValueError("out must not be residual (residual_out=residual is the in-place form)")
    if not isinstance(eps, (int, float)) or not eps > 0:
        raise ValueError(f"eps must be a positive float, got {eps!r}")
    if fp8 not in FP8_MODES:
        raise ValueError(f"fp8 must be None, 'per_token' or 'per_tensor', got {fp8!r}")
    if fp8 == "per_tensor":
        if not (isinstance(fp8_scale, torch.Tensor) and fp8_scale.numel() == 1 and fp8_scale.dtype == torch.float32
                and fp8_scale.device == x.device):
            raise ValueError("fp8='per_tensor' needs fp8_scale: a 1-element float32 tensor on x's device")
    elif fp8_scale is not None:
        raise ValueError("fp8_scale is for fp8='per_tensor' only")
    return x.numel() // hidden, hidden


def _launch(summed, residual, weight, eps, out, residual_out, fp8, fp8_scale, rows, hidden):
    """The epilogue kernel alone over `summed` (the all-reduce's output) on the current stream:
    returns (out, residual_out[, fp8 codes, scales]). summed None: `residual` is r already (the
    two-shot added it) and the kernel only normalises."""
    codes = scales = None
    if fp8 == "per_token":
        codes = torch.empty(residual.shape, dtype=torch.float8_e4m3fn, device=residual.device)
        scales = torch.empty(residual.shape[:-1] + (1,), dtype=torch.float32, device=residual.device)
    elif fp8 == "per_tensor":
        codes = torch.empty(residual.shape, dtype=torch.float8_e4m3fn, device=residual.device)
        scales = fp8_scale
    _C.add_rmsnorm(summed.data_ptr() if summed is not None else 0, residual.data_ptr(), weight.data_ptr(),
                   out.data_ptr(), residual_out.data_ptr(),
                   codes.data_ptr() if codes is not None else 0, scales.data_ptr() if scales is not None else 0,
                   rows, hidden, float(eps), _DTYPE_IDS[residual.dtype], FP8_MODES[fp8],
                   torch.cuda.current_stream(residual.device).cuda_stream, True)
    return (out, residual_out) if fp8 is None else (out, residual_out, codes, scales)


def all_reduce_add_rmsnorm(comm, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                           codec: Optional[str] = None, out: Optional[torch.Tensor] = None,
                           residual_out: Optional[torch.Tensor] = None, fp8: Optional[str] = None,
                           fp8_scale: Optional[torch.Tensor] = None):
    """See Communicator.all_reduce_add_rmsnorm."""
    rows, hidden = check_args(x, residual, weight, eps, out, residual_out, fp8, fp8_scale)
    if residual_out is None:
        residual_out = torch.empty_like(x)
    route, name = _route(comm, x, codec, fp8, rows, hidden)
    if route == "one kernel":
        comm._check_tensor(x, "x", _DTYPE_IDS)  # as all_reduce checks it on the other paths
        out = out if out is not None else torch.empty_like(x)
        comm._c.all_reduce_add_rmsnorm(x.data_ptr(), out.data_ptr(), residual.data_ptr(), weight.data_ptr(),
                                       residual_out.data_ptr(), rows, hidden, float(eps), _DTYPE_IDS[x.dtype],
                                       torch.cuda.current_stream(x.device).cuda_stream, pdl=comm.pdl)
        return out, residual_out
    if route == "add in two-shot":
        # The two-shot stores r = to_T(to_T(sum) + residual) into residual_out; the kernel after it only
        # normalises (the same bits as below, 4 bytes a value less traffic).
        r = comm._all_reduce_sum(x, residual_out, name, "two_shot", residual=residual)
        return _launch(None, r, weight, eps, out if out is not None else torch.empty_like(x), r, fp8, fp8_scale,
                       rows, hidden)
    summed = comm.all_reduce(x, out=out if out is not None else torch.empty_like(x), codec=codec)
    return _launch(summed, residual, weight, eps, summed, residual_out, fp8, fp8_scale, rows, hidden)


def _route(comm, x: torch.Tensor, codec: Optional[str], fp8: Optional[str], rows: int, hidden: int):
    """(route, codec name) of a valid call; the bits are the same on every route.
    "one kernel": one_shot_add_rmsnorm_kernel, where the all-reduce would run the one-shot (an exact
    codec at a size where the table picks it), the rows are whole clusters of CTAs (hidden a multiple
    of 1024 up to 16384), the tensor is at most 256 KiB and there is no FP8 output.
    "add in two-shot": the two-shot (any codec) adds the residual at its stores, from the size where
    that measured faster (Communicator.two_shot_residual_min_bytes).
    "after": the all-reduce, then the epilogue kernel; always with QUICKREDUCE_FUSED_EPILOGUE=0."""
    name = codec if codec is not None else comm.codec_for("all_reduce")
    nbytes = x.numel() * x.element_size()
    fits_one_kernel = fp8 is None and comm._c.fused_add_rmsnorm_fits(rows, hidden)
    if not comm.fused_epilogue or (not fits_one_kernel and nbytes < comm.two_shot_residual_min_bytes):
        return "after", name
    algo = comm.plan(nbytes, x.dtype, name).algo
    if fits_one_kernel and algo == "one_shot":
        return "one kernel", name
    if algo == "two_shot" and nbytes >= comm.two_shot_residual_min_bytes:
        return "add in two-shot", name
    return "after", name
