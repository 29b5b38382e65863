# Throwaway dev timing (not the product bench): one call split between the one-shot (first part,
# caller's stream) and a small two-shot grid (the rest, a side stream), both in flight at once.
# Question: does the store-pushed one-shot leave NVLink room that the bulk-copy two-shot can use?
# Outside the API's contract (communicator.hpp: one call at a time per communicator): it works
# here only because the one-shot and the two-shot use disjoint workspace regions and epochs.
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness
from dev_common import graph_time_us


def run(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import quickreduce as qr
    comm = qr.Communicator(max_size=64 << 20)
    c = comm._c
    sizes = [int(x) << 20 for x in os.environ.get("DEV_SIZES", "6,8,10,12").split(",")]
    # (name, one-shot fraction, two-shot threads, blocks); fraction 1 = one-shot only, 0 = two-shot only
    configs = [("one", 1.0, 0, 0), ("two", 0.0, 0, 0)]
    for t, b in ((256, 132), (128, 264)):
        configs += [(f"f{int(f * 100)}_t{t}", f, t, b) for f in (0.5, 0.6, 0.7, 0.8, 0.9)]
    if rank == 0: print("bytes " + " ".join(f"{n:>9}" for n, *_ in configs), flush=True)
    side = torch.cuda.Stream()
    bad = 0
    for nbytes in sizes:
        n = nbytes // 2
        calls = 20
        nbuf = 8
        xs = [torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
        out = torch.empty_like(xs[0])
        row = []
        for name, f, t, b in configs:
            n1 = (int(n * f) // 4096) * 4096
            if n1 * 2 > c.one_shot_max_bytes: row.append(float("nan")); continue
            def call(i):
                main = torch.cuda.current_stream()  # the capture stream inside torch.cuda.graph
                x = xs[i % nbuf]
                if n1 == n:
                    c.all_reduce(x.data_ptr(), out.data_ptr(), n, 1, 1, 0, main.cuda_stream)
                    return
                if n1 == 0:
                    c.all_reduce(x.data_ptr(), out.data_ptr(), n, 1, 1, 1, main.cuda_stream)
                    return
                side.wait_stream(main)
                c.all_reduce(x.data_ptr(), out.data_ptr(), n1, 1, 1, 0, main.cuda_stream)
                c.all_reduce(x.data_ptr() + 2 * n1, out.data_ptr() + 2 * n1, n - n1, 1, 1, 1, side.cuda_stream,
                             threads=t, blocks=b)
                main.wait_stream(side)
            for i in range(2): call(i)
            torch.cuda.synchronize()
            ref = xs[1].double()
            gathered = [torch.empty_like(ref) for _ in range(world)]
            dist.all_gather(gathered, ref)
            want = sum(gathered).to(torch.bfloat16)
            if not torch.equal(out, want): bad += 1; print(f"{nbytes} {name}: WRONG", flush=True)
            row.append(graph_time_us(call, calls))
            comm.check()
        if rank == 0: print(f"{nbytes:>9} " + " ".join(f"{t:9.2f}" for t in row), flush=True)
    if rank == 0: print("SPLIT CHECK", "OK" if bad == 0 else f"FAILED {bad}", flush=True)
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, harness.free_port()), nprocs=world)
