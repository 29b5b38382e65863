"""Why NCCL after a copy measured faster than NCCL in place below 2 MB (lab/NOTES.md session 20, call 8).
CUDA-graph median per call (lab/scripts/dev_common.graph_time_us), bf16, one process per GPU, forms:
  inplace      50 all-reduces in place, a buffer each (the bench's `nccl` row)
  same         50 all-reduces in place on one buffer
  copy         copy into an output buffer, then the all-reduce there (the bench's `nccl_copy`)
  tiny         a one-element op before each all-reduce (a kernel between NCCL kernels, no copy)
Run (2+ GPUs): python3 lab/probes/nccl_back_to_back.py
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness  # noqa: E402
from dev_common import graph_time_us  # noqa: E402


def run(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    calls = 50
    if rank == 0:
        print(f"{'bytes':>9} {'inplace':>9} {'same':>9} {'copy':>9} {'tiny':>9}", flush=True)
    for nbytes in (8 << 10, 32 << 10, 128 << 10, 512 << 10, 2 << 20, 8 << 20):
        n = nbytes // 2
        xs = [torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(calls)]
        ys = [torch.empty_like(xs[0]) for _ in range(calls)]
        flag = torch.zeros(1, device="cuda")
        forms = {
            "inplace": lambda i: dist.all_reduce(xs[i]),
            "same": lambda i: dist.all_reduce(xs[0]),
            "copy": lambda i: (ys[i].copy_(xs[i]), dist.all_reduce(ys[i])),
            "tiny": lambda i: (flag.add_(1), dist.all_reduce(xs[i])),
        }
        row = [graph_time_us(form, calls) for form in forms.values()]
        if rank == 0:
            print(f"{nbytes:>9} " + " ".join(f"{t:9.2f}" for t in row), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, harness.free_port()), nprocs=world)
