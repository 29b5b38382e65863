"""Tensor parallelism with quickreduce as the torch.distributed backend: the model has no quickreduce call.

    torchrun --nproc-per-node 2 examples/backend_tp.py

``import quickreduce.distributed`` registers the backend "quickreduce"; ``init_process_group(
"cpu:gloo,cuda:quickreduce")`` makes it the default group's backend for CUDA tensors. The model below is
plain ``torch.distributed.tensor.parallel`` (a Megatron MLP: ColwiseParallel then RowwiseParallel), so
DTensor's all-reduce of the row-parallel output runs through quickreduce, as do ``dist.all_reduce`` and
the other collectives it takes; everything else (broadcast, integer tensors, ...) goes to NCCL.

The output is checked against NCCL: the partial products all-reduced in fp32 by an NCCL group and
rounded to bf16 once, which is what quickreduce's default (exact) codec computes, so the bits agree
wherever NCCL's fp32 sum is exact (always on 2 GPUs). A second group takes a lossy codec through
``pg_options``.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import quickreduce.distributed as qd  # registers the backend "quickreduce"


class MLP(torch.nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.up = torch.nn.Linear(hidden, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("cpu:gloo,cuda:quickreduce")
    rank, world = dist.get_rank(), dist.get_world_size()
    tp = dist.group.WORLD  # a quickreduce.distributed.ProcessGroupQuickreduce
    mesh = init_device_mesh("cuda", (world,))

    hidden, ffn = 4096, 4 * 4096
    torch.manual_seed(0)  # the same full weights on every rank
    model = MLP(hidden, ffn).to(device="cuda", dtype=torch.bfloat16)
    up, down = model.up.weight.detach().clone(), model.down.weight.detach().clone()
    parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})

    nccl = dist.new_group(backend="nccl")  # the reference
    shard = ffn // world
    my_up, my_down = up[rank * shard:(rank + 1) * shard].contiguous(), down[:, rank * shard:(rank + 1) * shard].contiguous()
    identical, worst = 0, 0.0
    with torch.no_grad():
        for step in range(20):
            x = torch.randn(64, hidden, device="cuda", dtype=torch.bfloat16)
            dist.broadcast(x, src=0)  # the same input on every rank (a broadcast: NCCL's, through the backend)
            y = model(x)  # DTensor: the row-parallel all-reduce runs through quickreduce
            ref = (torch.relu(x @ my_up.t()) @ my_down.t()).float()
            dist.all_reduce(ref, group=nccl)
            ref = ref.to(torch.bfloat16)
            identical += int(torch.equal(y.view(torch.int16), ref.view(torch.int16)))
            worst = max(worst, float((y.float() - ref.float()).abs().max()))
    print(f"rank {rank}: {identical}/20 steps bit-identical to NCCL's fp32 sum rounded once "
          f"(largest difference {worst:.3g}); calls by route: {dict(tp.routed)}; "
          f"fallback reasons: {dict(tp.fallback_reasons)}")

    # A group with a lossy codec for its all-reduces (QUICKREDUCE_QUANTIZATION=INT8 would set it for all groups).
    fast = dist.new_group(backend="quickreduce", pg_options=qd.Options(codecs={"all_reduce": "int8"}))
    qd.communicator(fast)  # creates its workspace now (every rank calls it), as before capturing CUDA graphs
    x = torch.randn(1 << 20, device="cuda", dtype=torch.bfloat16)
    exact, lossy = x.clone(), x.clone()
    dist.all_reduce(exact)
    dist.all_reduce(lossy, group=fast)
    err = float((lossy.float() - exact.float()).norm() / exact.float().norm())
    print(f"rank {rank}: int8 all-reduce relative error {err:.2e} (exact group: 0)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
