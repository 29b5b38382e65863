"""A short 2-rank run of every algorithm and codec at a few sizes (small, tail, large), for
compute-sanitizer (scripts/gpu_check.sh stage `sanitize`). Exits non-zero on a wrong result."""
import os
import sys

import torch
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "gpu"))
import harness  # noqa: E402


def run(rank, world, port):
    import torch.distributed as dist

    import quickreduce as qr
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    comm = qr.Communicator(max_size=8 << 20, timeout_s=120)
    # (2 << 20) + 8: a one-shot of more than 4 MiB, which empties its slots as it reads them
    for n in (4096, 4096 * 3 + 5, 1 << 20, (2 << 20) + 8):
        g = torch.Generator(device="cuda").manual_seed(n)
        xs = [torch.randn(n, generator=g, device="cuda").bfloat16() for _ in range(world)]
        for algo, codec in [("one_shot", "bf16"), ("two_shot", "bf16")] + [("two_shot", c) for c in qr.codec_names()[1:]]:
            comm.all_reduce(xs[rank], codec=codec, algo=algo)
        # values 2^-40..2^40 apart: the lossless codec's slices go raw (its restaging path)
        wide = xs[rank] * torch.exp2(torch.randint(-40, 41, (n,), generator=g, device="cuda")).bfloat16()
        comm.all_reduce(wide, codec="lossless", algo="two_shot")
    comm.all_reduce(xs[rank][:4096], codec="bf16", algo="one_shot")  # a small one-shot after the large one
    torch.cuda.synchronize()
    comm.check()
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, args=(2, harness.free_port()), nprocs=2)
    print("sanitize_run: done")
