"""The torch collective conventions on a Communicator: ReduceOp and async_op.

    torchrun --nproc-per-node 2 examples/reduce_ops_and_async.py
"""
import os

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

import quickreduce as qr


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    comm = qr.Communicator()

    x = torch.full((1 << 20,), float(rank + 1), device="cuda", dtype=torch.bfloat16)
    total = comm.all_reduce(x)                      # SUM, lossless by default
    mean = comm.all_reduce(x, op=ReduceOp.AVG)      # the sum divided by the world size (any codec)
    mean4 = comm.all_reduce(x, codec="int4", op=ReduceOp.AVG)
    top = comm.all_reduce(x, op=ReduceOp.MAX)       # exact codecs only
    low = comm.reduce_scatter(x, op=ReduceOp.MIN)   # [W*k] -> [k]
    try:
        comm.all_reduce(x, codec="int4", op=ReduceOp.MAX)
    except ValueError as e:
        print(f"rank {rank}: as expected: {e}")

    # async_op=True: the collective runs on a side stream after everything queued so far; the caller's
    # stream goes on with other work until wait().
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    work = comm.all_reduce(x, async_op=True)
    busy = a @ a                                    # overlaps the collective
    work.wait()                                     # the current stream now waits for it (the host does not)
    overlapped = work.result()[0]

    want = world * (world + 1) / 2
    print(f"rank {rank}: sum {total[0].item()} (want {want}), avg {mean[0].item()} / {mean4[0].item()} "
          f"(want {want / world}), max {top[0].item()} (want {world}), min {low[0].item()} (want 1), "
          f"async sum {overlapped[0].item()}, is_completed {work.is_completed()}")
    del busy
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
