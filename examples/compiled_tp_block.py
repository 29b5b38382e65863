"""A tensor-parallel (row-parallel) linear layer whose all-reduce is quickreduce, compiled whole.

    torchrun --nproc-per-node 2 examples/compiled_tp_block.py

One process a GPU. comm.all_reduce is the custom op torch.ops.quickreduce.all_reduce, so
torch.compile(fullgraph=True) traces the block into one graph, and mode="reduce-overhead" replays it
as a CUDA graph. The result is checked against torch.distributed.all_reduce (NCCL): with the default
lossless codec the two agree to the rounding of the sum's order (quickreduce sums in fp32 in rank order
and rounds once; NCCL's bf16 order and rounding are its own).
"""
import os

import torch
import torch.distributed as dist

import quickreduce as qr


class RowParallelLinear(torch.nn.Module):
    """y = all_reduce(x_shard @ w_shard): each rank holds a slice of the input features."""

    def __init__(self, comm: qr.Communicator, in_features: int, out_features: int):
        super().__init__()
        self.comm = comm
        shard = in_features // comm.world_size
        self.weight = torch.nn.Parameter(torch.randn(shard, out_features, dtype=torch.bfloat16) / in_features ** 0.5)

    def forward(self, x_shard):
        return self.comm.all_reduce(x_shard @ self.weight)  # codec=, op= as usual


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    torch.manual_seed(rank)
    comm = qr.Communicator()
    layer = RowParallelLinear(comm, in_features=4096, out_features=4096).cuda()

    explained = torch._dynamo.explain(layer)(torch.randn(8, 4096 // world, device="cuda", dtype=torch.bfloat16))
    print(f"rank {rank}: {explained.graph_count} graph(s), {explained.graph_break_count} graph break(s)")

    compiled = torch.compile(layer, fullgraph=True, mode="reduce-overhead")
    worst = 0.0
    with torch.no_grad():
        for step in range(100):
            x = torch.randn(64, 4096 // world, device="cuda", dtype=torch.bfloat16)
            torch.compiler.cudagraph_mark_step_begin()
            y = compiled(x)
            ref = x @ layer.weight
            dist.all_reduce(ref)  # NCCL
            worst = max(worst, float((y.float() - ref.float()).abs().max() / ref.float().abs().max()))
    print(f"rank {rank}: 100 CUDA-graph steps, largest difference from NCCL {worst:.2e} of the largest value")
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
