"""Peer all-reduces from FlashInfer, each in its own adapter so one that fails is skipped alone.

- trtllm_one_shot / trtllm_one_shot_pdl / trtllm_two_shot: TensorRT-LLM's all-reduce through
  `flashinfer.comm.allreduce.allreduce_fusion(pattern=kAllReduce)` on one shared workspace.
- vllm_custom: vLLM's custom all-reduce (`flashinfer.comm.vllm_ar`) run as vLLM runs it under
  CUDA graphs: the captured calls read the graph's own input buffers, registered across ranks
  after capture (`register_graph_buffers`), so no staging copy is timed.
- flashinfer_fp8: FlashInfer's FP8 two-shot quantized all-reduce (bf16 only).
- trtllm_fused (bench --epilogue add_rmsnorm): TensorRT-LLM's all-reduce + residual add + RMSNorm
  in one kernel, `allreduce_fusion(pattern=kARResidualRMSNorm)` on the same shared workspace.

Safety: FlashInfer's TRT-LLM workspace uses NVLink multicast unless it believes it runs under
Confidential Computing, and multicast can take a shared host's GPUs out of service. So
FLASHINFER_CONFIDENTIAL_COMPUTE=1 is set before FlashInfer is imported, and cuMulticastCreate
is replaced by a function that raises, so a slip fails loudly instead of harming the host.
"""

from __future__ import annotations

import ctypes
import importlib
import inspect
import os
import warnings

import torch
import torch.distributed as dist

from .epilogue import EPS, EpilogueMethod
from .methods import Method, RunContext, SkipMethod

VLLM_NUM_CTAS = 36  # vLLM's default block limit for its custom all-reduce kernels
TRTLLM_MAX_HIDDEN = 4096


class MulticastBlocked(RuntimeError):
    pass


def _refuse_multicast(*args, **kwargs):
    raise MulticastBlocked("cuMulticastCreate is blocked by quickreduce: NVLink multicast can take "
                           "the host's GPUs out of service")


def install_multicast_guard() -> list[str]:
    """Replace cuMulticastCreate in the CUDA Python driver bindings; return the patched modules."""
    patched = []
    for module_name in ("cuda.bindings.driver", "cuda.cuda"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # cuda.cuda is deprecated in new cuda-python
                module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - not installed: nothing to guard
            continue
        if getattr(module, "cuMulticastCreate", None) not in (None, _refuse_multicast):
            setattr(module, "cuMulticastCreate", _refuse_multicast)
            patched.append(module_name)
    return patched


def import_flashinfer(module_name: str):
    """Import one FlashInfer module with the multicast protections in place."""
    os.environ["FLASHINFER_CONFIDENTIAL_COMPUTE"] = "1"  # before the first flashinfer import
    install_multicast_guard()
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, missing CUDA libs, ABI mismatches
        raise SkipMethod(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from exc


def trtllm_shape(numel: int, world_size: int, max_hidden: int = TRTLLM_MAX_HIDDEN,
                 min_hidden: int = 128) -> tuple[int, int] | None:
    """[tokens, hidden] for a flat tensor: the widest power-of-two hidden size up to 4096 that
    divides it and leaves more tokens than ranks (two-shot splits tokens across ranks)."""
    hidden = max_hidden
    while hidden >= min_hidden:
        if numel % hidden == 0 and numel // hidden > world_size:
            return numel // hidden, hidden
        hidden //= 2
    return None


class TrtllmMethod(Method):
    def __init__(self, name: str, oneshot: bool, pdl: bool):
        self.name = name
        self.oneshot = oneshot
        self.pdl = pdl

    def setup(self, ctx: RunContext):
        super().setup(ctx)
        self.ar, self.workspace = trtllm_workspace(ctx)
        self.pattern = import_flashinfer("flashinfer.comm.trtllm_ar").AllReduceFusionPattern.kAllReduce

    def skip_reason(self, nbytes):
        if nbytes > self.ctx.peer_max_bytes:
            return "above the peers' workspace size (--peer-max-size)"
        numel = nbytes // torch.tensor([], dtype=self.ctx.dtype).element_size()
        if trtllm_shape(numel, self.ctx.world_size) is None:
            return "no [tokens, hidden] shape with more tokens than ranks"
        return None

    def run(self, inp, out):
        tokens, hidden = trtllm_shape(inp.numel(), self.ctx.world_size)
        self.ar.allreduce_fusion(input=inp.view(tokens, hidden), workspace=self.workspace,
                                 pattern=self.pattern, launch_with_pdl=self.pdl,
                                 output=out.view(tokens, hidden), use_oneshot=self.oneshot)
        return out


def trtllm_workspace(ctx: RunContext):
    """(flashinfer.comm.allreduce, the TRT-LLM fusion workspace every trtllm_* adapter shares):
    created on first use (collective), sized for --peer-max-size of [tokens, 4096] rows; the fused
    pattern may use other hidden sizes of no more values (FlashInfer checks token_num * hidden_dim)."""
    ar = import_flashinfer("flashinfer.comm.allreduce")
    workspace = ctx.shared.get("trtllm_workspace")
    if workspace is None:
        elements = ctx.peer_max_bytes // torch.tensor([], dtype=ctx.dtype).element_size()
        kwargs = dict(backend="trtllm", world_size=ctx.world_size, rank=ctx.rank,
                      max_token_num=-(-elements // TRTLLM_MAX_HIDDEN),
                      hidden_dim=TRTLLM_MAX_HIDDEN, dtype=ctx.dtype)
        if "group" in inspect.signature(ar.create_allreduce_fusion_workspace).parameters:
            kwargs["group"] = ctx.group
        workspace = ar.create_allreduce_fusion_workspace(**kwargs)
        if getattr(workspace, "backend", "trtllm") != "trtllm":
            raise SkipMethod(f"got a {workspace.backend} workspace, not trtllm")
        ctx.shared["trtllm_workspace"] = workspace
    return ar, workspace


class TrtllmFusedMethod(EpilogueMethod):
    """FlashInfer's `allreduce_fusion(x, workspace, pattern=kARResidualRMSNorm, residual_in,
    rms_gamma, rms_eps, residual_out, norm_out)`: the all-reduce, residual add and RMSNorm in one
    TensorRT-LLM kernel, launched with PDL and FlashInfer's own one-shot/two-shot choice
    (use_oneshot=None), as vLLM's fusion pass calls it."""

    name = "trtllm_fused"

    def setup(self, ctx: RunContext):
        super().setup(ctx)
        self.ar, self.workspace = trtllm_workspace(ctx)
        self.pattern = import_flashinfer(
            "flashinfer.comm.trtllm_ar").AllReduceFusionPattern.kARResidualRMSNorm

    def skip_reason(self, nbytes):
        if nbytes > self.ctx.peer_max_bytes:
            return "above the peers' workspace size (--peer-max-size)"
        return None

    def alloc_outputs(self, rows, numel):
        # This pattern writes no all-reduce output, but FlashInfer allocates one when none is given
        # (an allocation per call): one buffer for every call, never written.
        self.unused_output = torch.empty(numel, dtype=self.ctx.dtype, device=self.ctx.device)
        return super().alloc_outputs(rows, numel)

    def run(self, inp, out):
        return self.ar.allreduce_fusion(
            input=self.rows(inp), workspace=self.workspace, pattern=self.pattern,
            launch_with_pdl=True, output=self.rows(self.unused_output),
            residual_in=self.residual, rms_gamma=self.weight, rms_eps=EPS,
            residual_out=self.rows(out[1]), norm_out=self.rows(out[0]), use_oneshot=None)


class VllmCustomMethod(Method):
    name = "vllm_custom"

    def setup(self, ctx: RunContext):
        super().setup(ctx)
        if ctx.world_size not in (2, 4, 6, 8):
            raise SkipMethod(f"vLLM's custom all-reduce supports 2/4/6/8 GPUs, not {ctx.world_size}")
        self.vllm = import_flashinfer("flashinfer.comm.vllm_ar")
        self.ipc = import_flashinfer("flashinfer.comm.cuda_ipc")
        self.max_size = ctx.peer_max_bytes
        # Signal flags + the two-stage kernel's scratch; the flags must start at zero.
        meta_bytes = self.vllm.meta_size() + self.max_size
        self.meta_ptrs = self.ipc.create_shared_buffer(meta_bytes, group=ctx.group)
        self.ipc.cudart.cudaMemset(ctypes.c_void_p(self.meta_ptrs[ctx.rank]), 0, meta_bytes)
        # Eager calls copy their input here; graph replays read the registered inputs directly.
        self.buffer_ptrs = self.ipc.create_shared_buffer(self.max_size, group=ctx.group)
        self.rank_data = torch.empty(8 << 20, dtype=torch.uint8, device=ctx.device)
        torch.cuda.synchronize()
        dist.barrier(group=ctx.group)
        self.fa = self.vllm.init_custom_ar(self.meta_ptrs, self.rank_data, ctx.rank, True)
        self.vllm.register_buffer(self.fa, self.buffer_ptrs)
        # Peers map our graph inputs through CUDA IPC; freeing one while it is mapped is
        # undefined behaviour, so inputs live until close() has unmapped everything.
        self.keep_alive: list[torch.Tensor] = []

    def skip_reason(self, nbytes):
        if nbytes > self.max_size:
            return "above the peers' workspace size (--peer-max-size)"
        return None

    def alloc_inputs(self, rows, numel):
        inputs = super().alloc_inputs(rows, numel)
        self.keep_alive.append(inputs)
        return inputs

    def run(self, inp, out):
        if torch.cuda.is_current_stream_capturing():
            self.vllm.all_reduce(self.fa, inp, out, 0, 0, VLLM_NUM_CTAS)
        else:
            self.vllm.all_reduce(self.fa, inp, out, self.buffer_ptrs[self.ctx.rank],
                                 self.max_size, VLLM_NUM_CTAS)
        return out

    def after_capture(self):
        handle, offsets = self.vllm.get_graph_buffer_ipc_meta(self.fa)
        handles: list = [None] * self.ctx.world_size
        all_offsets: list = [None] * self.ctx.world_size
        dist.all_gather_object(handles, list(handle), group=self.ctx.group)
        dist.all_gather_object(all_offsets, list(offsets), group=self.ctx.group)
        self.vllm.register_graph_buffers(self.fa, handles, all_offsets)

    def close(self):
        torch.cuda.synchronize()
        self.vllm.dispose(self.fa)  # closes the IPC mappings of peers' buffers
        dist.barrier(group=self.ctx.group)
        self.keep_alive.clear()
        self.ipc.free_shared_buffer(self.buffer_ptrs, self.ctx.group)
        self.ipc.free_shared_buffer(self.meta_ptrs, self.ctx.group)


class FlashinferFp8Method(Method):
    name = "flashinfer_fp8"
    lossy = True

    def setup(self, ctx: RunContext):
        super().setup(ctx)
        if ctx.dtype != torch.bfloat16:
            raise SkipMethod("FlashInfer's quantized all-reduce takes bf16 only")
        module = import_flashinfer("flashinfer.comm.quantized_allreduce")
        self.fn = module.quantized_all_reduce
        # Its symmetric buffer grows on demand, which must not happen under graph capture:
        # one eager call at the largest size allocates it once.
        x = torch.ones(ctx.max_bytes // 2, dtype=ctx.dtype, device=ctx.device)
        self.fn(x, ctx.group, output=torch.empty_like(x))
        torch.cuda.synchronize()

    def run(self, inp, out):
        return self.fn(inp, self.ctx.group, output=out)


PEER_METHODS = {
    "vllm_custom": VllmCustomMethod,
    "trtllm_one_shot": lambda: TrtllmMethod("trtllm_one_shot", oneshot=True, pdl=False),
    "trtllm_one_shot_pdl": lambda: TrtllmMethod("trtllm_one_shot_pdl", oneshot=True, pdl=True),
    "trtllm_two_shot": lambda: TrtllmMethod("trtllm_two_shot", oneshot=False, pdl=False),
    "flashinfer_fp8": FlashinferFp8Method,
}


def close_shared_peers(ctx: RunContext) -> None:
    workspace = ctx.shared.pop("trtllm_workspace", None)
    if workspace is not None:
        workspace.destroy()
