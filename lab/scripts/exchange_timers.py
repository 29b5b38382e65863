# Dev diagnostic: the segment exchange's timeline (csrc/collectives/all_reduce/phase_timers.cuh,
# ExchangeTimers), the dynamic all-to-all beside the host-sized one at the same (uneven) counts.
# Needs a build with the timers compiled in, which is slower and must not be benchmarked:
#   QR_PHASE_TIMERS=1 QR_CUDA_ARCHS=90 pip install --no-build-isolation --no-deps . && python3 lab/scripts/exchange_timers.py
# ET_BYTES (bytes a rank, default 8192,524288) narrows the run. Each line: CTA 0's thread 0 on each rank, SM
# cycles reading the counts, waiting for the peers' previous call, exchanging the size rows, planning,
# pushing and receiving, and ending; the third call of each (size, form) is the one to read.
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness


def run(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import quickreduce as qr
    sizes = [int(x) for x in os.environ.get("ET_BYTES", "8192,524288").split(",")]
    comm = qr.Communicator(max_size=max(sizes) * 2)
    row = 1024  # values a row (2 KB of bf16), as `quickreduce bench moe --part a2a`
    for nbytes in sizes:
        rows = max(world, nbytes // (row * 2))
        counts = [0] * world
        counts[(rank + 1) % world] = rows * 6 // 10  # the bench's skewed shape
        for d in range(world):
            counts[d] += (rows - rows * 6 // 10) // world
        counts[rank] += rows - sum(counts)
        everyone = [None] * world
        dist.all_gather_object(everyone, counts)
        recv = [everyone[s][rank] for s in range(world)]
        x = torch.randn(rows, row, device="cuda").to(torch.bfloat16)
        out = torch.empty(max(sum(everyone[s][d] for s in range(world)) for d in range(world)), row,
                          dtype=torch.bfloat16, device="cuda")
        send = torch.tensor(counts, dtype=torch.int32, device="cuda")
        got = torch.empty(world, dtype=torch.int32, device="cuda")
        for form in ("host-sized", "dynamic"):
            for call in range(3):
                dist.barrier()
                torch.cuda.synchronize()
                if rank == 0:
                    print(f"--- {nbytes} bytes {form} call {call}", flush=True)
                if form == "dynamic":
                    comm.all_to_all_dynamic(x, send, out, got)
                else:
                    comm.all_to_all(x, out=out[:sum(recv)], codec="bf16", output_split_sizes=recv,
                                    input_split_sizes=counts)
                torch.cuda.synchronize()  # flushes the device printf
        comm.check()
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(os.environ.get("ET_WORLD", torch.cuda.device_count()))
    mp.spawn(run, args=(world, harness.free_port()), nprocs=world)
