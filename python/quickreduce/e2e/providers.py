"""The all-reduce providers a speed run compares, as model reducers built on the bench's adapters.

Each provider is one of `quickreduce bench`'s method adapters (cli/methods.py, cli/peers.py:
NCCL, torch symmetric memory, FlashInfer's TensorRT-LLM all-reduce, quickreduce per codec), so a
provider runs exactly as its bench row does; `MethodReducer` puts one between a model's row-parallel
matmul and its residual add. The adapters keep their own rules: torch symm_mem reads its input
from symmetric memory (the partial is copied in, as vLLM does), TRT-LLM's workspace is sized for the
largest message, and quickreduce's providers share one Communicator.
"""
from __future__ import annotations

import fnmatch

import torch

# name -> what it is; the order is the table's.
PROVIDERS: dict[str, str] = {
    "nccl": "torch.distributed.all_reduce (NCCL)",
    "nccl_symm": "NCCL's symmetric-memory kernels (input staged in a registered window)",
    "symm_mem_one_shot": "torch symmetric memory, one-shot",
    "symm_mem_two_shot": "torch symmetric memory, two-shot (in place)",
    "trtllm_one_shot": "FlashInfer's TensorRT-LLM all-reduce, one-shot",
    "trtllm_two_shot": "FlashInfer's TensorRT-LLM all-reduce, two-shot",
    "qr_lossless": "quickreduce two-shot, lossless bf16 packing (the passthrough's bits)",
    "qr_auto": "quickreduce, fastest exact method for the size (tuned table)",
    "qr_auto_int6": "quickreduce, fastest method at most as lossy as int6",
    "qr_int8": "quickreduce two-shot, int8 codec",
    "qr_int6": "quickreduce two-shot, int6 codec",
    "qr_int4": "quickreduce two-shot, int4 codec",
    "qr_fp4": "quickreduce two-shot, fp4 codec",
    # on request only (--providers):
    "qr_one_shot": "quickreduce one-shot passthrough",
    "qr_two_shot": "quickreduce two-shot passthrough",
    "qr_fp8": "quickreduce two-shot, fp8 codec",
    "qr_int6h": "quickreduce two-shot, rotated int6 codec",
    "qr_int4h": "quickreduce two-shot, rotated int4 codec",
    "qr_auto_int4": "quickreduce, fastest method at most as lossy as int4",
    "trtllm_one_shot_pdl": "FlashInfer's TensorRT-LLM one-shot with PDL",
}
DEFAULT_PROVIDERS = list(PROVIDERS)[:13]
# quickreduce providers whose result is to_T(fp32 sum in rank order): their tokens are checked
# against a reference reduction. NCCL and the peers are exact too but sum in their own order.
EXACT_QR_PROVIDERS = ("qr_lossless", "qr_auto", "qr_one_shot", "qr_two_shot")
# Adapters whose input must live in their own (symmetric or registered) buffer: the partial is copied there.
_STAGED = ("nccl_symm", "symm_mem_one_shot", "symm_mem_two_shot")
# quickreduce providers the bench has no row for: (algo, codec).
_EXTRA_QR = {"qr_auto_int6": ("auto", "auto:int6"), "qr_int6h": ("two_shot", "int6h"),
             "qr_int4h": ("two_shot", "int4h")}


def select_providers(spec: str) -> list[str]:
    """Comma list of names or patterns ('nccl,qr_*'; 'default'; 'all') -> names in table order."""
    chosen: set[str] = set()
    for pattern in (p.strip() for p in spec.split(",") if p.strip()):
        if pattern == "default":
            matches = DEFAULT_PROVIDERS
        elif pattern == "all":
            matches = list(PROVIDERS)
        else:
            matches = fnmatch.filter(PROVIDERS, pattern)
        if not matches:
            raise ValueError(f"no provider matches {pattern!r}; known: {', '.join(PROVIDERS)}")
        chosen.update(matches)
    if not chosen:
        raise ValueError("no provider selected")
    return [name for name in PROVIDERS if name in chosen]


def make_provider_method(name: str):
    """The bench adapter (cli.methods.Method) behind a provider."""
    from ..cli.methods import QuickReduceMethod
    from ..cli.registry import make_method

    if name not in PROVIDERS:
        raise KeyError(f"unknown provider {name!r}; known: {', '.join(PROVIDERS)}")
    if name in _EXTRA_QR:
        algo, codec = _EXTRA_QR[name]
        return QuickReduceMethod(name, algo, codec)
    return make_method(name)


class MethodReducer:
    """A model reducer that runs one bench adapter: partial in, the sum over the ranks out.

    Buffers for the largest message are allocated once (before any graph capture): a staging input
    for the symmetric-memory adapters, one output for the out-of-place ones. The output is reused
    by every call, which is safe in a decoder: each reduced tensor is consumed by the residual add
    before the next reduction is issued on the same stream."""

    def __init__(self, method, max_numel: int):
        self.method = method
        self.name = method.name
        self.staging = method.alloc_inputs(1, max_numel)[0] if method.name in _STAGED else None
        self.output = None if method.inplace else method.alloc_outputs(1, max_numel)[0]
        self.max_numel = max_numel

    def __call__(self, partial: torch.Tensor) -> torch.Tensor:
        flat = partial.reshape(-1)
        n = flat.numel()
        if n > self.max_numel:
            raise ValueError(f"{self.name}: a {n}-value all-reduce is above the {self.max_numel} sized for")
        inp = flat
        if self.staging is not None:
            inp = self.staging[:n]
            inp.copy_(flat)
        out = None if self.output is None else self.output[:n]
        return self.method.run(inp, out).view(partial.shape)

    def skip_reason(self, numel: int) -> str | None:
        return self.method.skip_reason(numel * self.method.ctx.dtype.itemsize)

