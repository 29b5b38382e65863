"""`quickreduce bench --epilogue add_rmsnorm`: the all-reduce and what follows it in a transformer
layer, timed as one call per method (the row group `report.EPILOGUE`):

    residual_out = all_reduce(x) + residual;  out = RMSNorm(residual_out) * weight

- qr_fused_<codec>: `Communicator.all_reduce_add_rmsnorm` into preallocated out and residual_out;
- qr_unfused_<codec>: `Communicator.all_reduce(x, out=...)`, then torch's add and RMSNorm;
- nccl_unfused: `dist.all_reduce(x)` (in place, as NCCL's row), then the same torch ops;
- trtllm_fused (peers.py): FlashInfer's fused TensorRT-LLM all-reduce + residual add + RMSNorm.

The quickreduce rows pass the codec they name and leave the algorithm to the API ("auto"), so fused
and unfused run the same all-reduce. x is [tokens, hidden] (bench --hidden); sizes are the whole
tensor, as the all-reduce rows', and a size that is not whole rows is skipped. The residual and the
weight are the same on every rank: `operands` draws them from seeds of the size and of the hidden
size, and every adapter and the check take them from there. The check (harness.py) compares the
normed output with `reference`: the float64 sum of every rank's x plus the residual, RMSNorm and
weight in float64, nothing rounded in between.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .methods import Method, QuickReduceMethod, RunContext, SkipMethod
from .report import EPILOGUE, EPILOGUE_METHOD_LOSSY

EPS = 1e-6
REFERENCE_CHUNK = 16 << 20  # values per step of the float64 reference
_OPERANDS = "epilogue_operands"  # ctx.shared: the current size's (key, residual, weight)


# --------------------------------------------------------------------------- operands and math

def operands(ctx: RunContext, numel: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(residual [tokens, hidden], weight [hidden]) for an x of `numel` values, bitwise the same on
    every rank: the residual ~ N(0, 1) from a seed of the size, the weight ~ N(1, 0.25) from one of
    the hidden size. Kept in ctx.shared for the size at hand (the check and every adapter share it)."""
    key = (numel, ctx.hidden, ctx.dtype)
    cached = ctx.shared.get(_OPERANDS)
    if cached is None or cached[0] != key:
        ctx.shared.pop(_OPERANDS, None)  # free the previous size's before drawing the next
        residual = torch.empty(numel, dtype=ctx.dtype, device=ctx.device)
        residual.normal_(generator=_generator(ctx, (1 << 40) + numel * 31))
        weight = torch.empty(ctx.hidden, dtype=ctx.dtype, device=ctx.device)
        weight.normal_(1.0, 0.25, generator=_generator(ctx, (1 << 41) + ctx.hidden))
        cached = ctx.shared[_OPERANDS] = (key, residual.view(-1, ctx.hidden), weight)
    return cached[1], cached[2]


def _generator(ctx: RunContext, seed: int) -> torch.Generator:
    return torch.Generator(device=ctx.device).manual_seed(seed)


def reference(summed: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
              eps: float = EPS) -> torch.Tensor:
    """The epilogue's exact output, computed in place in `summed` (the float64 all-reduce of every
    rank's x, flat or [tokens, hidden]) and returned: r = summed + residual, then
    r * rsqrt(mean(r^2 over the row) + eps) * weight, all in float64. A row at a time in chunks,
    so no second float64 copy of the tensor is made; any device (CPU tensors too)."""
    if summed.dtype != torch.float64 or not summed.is_contiguous():
        raise TypeError(f"summed must be a contiguous float64 tensor, got {summed.dtype}")
    hidden = weight.numel()
    if summed.numel() % hidden or residual.numel() != summed.numel():
        raise ValueError(f"summed ({summed.numel()} values) and residual ({residual.numel()}) must "
                         f"be the same whole rows of {hidden} (the weight's length)")
    rows, residual_rows = summed.view(-1, hidden), residual.reshape(-1, hidden)
    w = weight.double()
    step = max(1, REFERENCE_CHUNK // hidden)
    for begin in range(0, rows.shape[0], step):
        r = rows[begin:begin + step]
        r.add_(residual_rows[begin:begin + step].double())
        r.mul_(torch.rsqrt(r.square().mean(dim=1, keepdim=True) + eps)).mul_(w)
    return summed


def rms_norm(r: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """torch's RMSNorm over the last dimension: torch.nn.functional.rms_norm where torch has it
    (2.4+), else Hugging Face LlamaRMSNorm's formula (float32 statistics, normed rows rounded to
    the dtype, then times the weight)."""
    if hasattr(torch.nn.functional, "rms_norm"):
        return torch.nn.functional.rms_norm(r, (r.shape[-1],), weight, eps)
    variance = r.float().square().mean(-1, keepdim=True)
    return weight * (r.float() * torch.rsqrt(variance + eps)).to(r.dtype)


def torch_add_rmsnorm(summed: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                      residual_out: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """What an unfused model runs after its all-reduce: torch's add into `residual_out` (which may
    be `summed`), then `rms_norm`; returns the normed rows (a tensor torch allocates)."""
    torch.add(summed, residual, out=residual_out)
    return rms_norm(residual_out, weight, eps)


# --------------------------------------------------------------------------- adapters

class EpilogueMethod(Method):
    """What every epilogue adapter shares: fp16/bf16 only; x viewed as [tokens, hidden]; residual
    and weight from `operands` (set when the inputs are allocated, once per size); out of place,
    two outputs per call, `out[0]` (the normed rows, or the sum) and `out[1]` (residual_out).
    `run` returns the normed rows, which the check compares with `reference`."""

    collective = EPILOGUE

    def setup(self, ctx: RunContext) -> None:
        if ctx.dtype not in (torch.float16, torch.bfloat16):
            raise SkipMethod(f"the add + RMSNorm epilogue takes fp16 or bf16, not {ctx.dtype_name}")
        super().setup(ctx)

    def alloc_inputs(self, rows: int, numel: int) -> torch.Tensor:
        self.residual, self.weight = operands(self.ctx, numel)
        return super().alloc_inputs(rows, numel)

    def alloc_outputs(self, rows: int, numel: int) -> torch.Tensor:
        return torch.empty((rows, 2, numel), dtype=self.ctx.dtype, device=self.ctx.device)

    def rows(self, flat: torch.Tensor) -> torch.Tensor:
        return flat.view(-1, self.ctx.hidden)


class NcclUnfusedMethod(EpilogueMethod):
    """`dist.all_reduce(x)` in place (NCCL's row), then torch's add into x and torch's RMSNorm."""

    name = "nccl_unfused"
    inplace = True

    def run(self, inp, out):
        dist.all_reduce(inp, group=self.ctx.group)
        x = self.rows(inp)
        return torch_add_rmsnorm(x, self.residual, self.weight, residual_out=x)


class QrFusedMethod(EpilogueMethod, QuickReduceMethod):
    """`Communicator.all_reduce_add_rmsnorm(x, residual, weight, eps, codec, out, residual_out)`."""

    api = "all_reduce_add_rmsnorm"

    def __init__(self, name: str, codec: str | None):
        super().__init__(name, "auto", codec)  # QuickReduceMethod's: codec None is the passthrough
        self.lossy = EPILOGUE_METHOD_LOSSY[name]

    def run(self, inp, out):
        normed, _ = self.comm.all_reduce_add_rmsnorm(
            self.rows(inp), self.residual, self.weight, EPS, codec=self.codec,
            out=self.rows(out[0]), residual_out=self.rows(out[1]))
        return normed


class QrUnfusedMethod(QrFusedMethod):
    """`Communicator.all_reduce(x, out=out[0], codec)`, then torch's add into out[1] and RMSNorm."""

    api = "all_reduce"  # runs on a build without the fused call

    def run(self, inp, out):
        summed = self.comm.all_reduce(self.rows(inp), out=self.rows(out[0]), codec=self.codec)
        return torch_add_rmsnorm(summed, self.residual, self.weight, residual_out=self.rows(out[1]))
