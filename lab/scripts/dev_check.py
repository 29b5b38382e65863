# Throwaway dev check (not the product tests): lossless results of back-to-back calls in one CUDA graph
# equal the float64 sum rounded to bf16, and every rank holds the same bits. DEV_SIZES as dev_timing.
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness

def run(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    import quickreduce as qr
    comm = qr.Communicator(max_size=1 << 30)
    sizes = [int(x[:-1]) << 10 if x.endswith("K") else int(x) << 20 for x in os.environ.get("DEV_SIZES", "1,8,64").split(",")]
    bad = 0
    for nbytes in sizes:
        n = nbytes // 2 - 8 * 37  # an odd tail
        calls = 6
        g = torch.Generator(device="cuda"); g.manual_seed(1234 + rank)
        xs = [torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g) * (1 + i) for i in range(calls)]
        for algo, codec in (("two_shot", "fp16"), ("one_shot", "fp16"), ("two_shot", "int4"), ("two_shot", "lossless"), ("two_shot", "fp16")):
            if algo == "one_shot" and n * 2 > comm._c.one_shot_max_bytes: continue
            outs = [torch.empty_like(x) for x in xs]
            s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                comm.all_reduce(xs[0], out=outs[0], codec=codec, algo=algo)
            torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for x, o in zip(xs, outs): comm.all_reduce(x, out=o, codec=codec, algo=algo)
            for _ in range(3): graph.replay()
            torch.cuda.synchronize(); comm.check()
            for i, (x, o) in enumerate(zip(xs, outs)):
                allx = [torch.empty_like(x) for _ in range(world)]; dist.all_gather(allx, x)
                allo = [torch.empty_like(o) for _ in range(world)]; dist.all_gather(allo, o)
                same = all(torch.equal(allo[0].view(torch.int16), y.view(torch.int16)) for y in allo)
                ref = sum(y.double() for y in allx)
                if codec in ("fp16", "lossless"):
                    wrong = int((o.float() != ref.to(torch.bfloat16).float()).sum())
                else:
                    wrong = int(((o.double() - ref).norm() / ref.norm() > 0.2).item())
                if wrong or not same: bad += 1
                if rank == 0 and (wrong or not same or i == 0):
                    print(f"{nbytes:>10} {algo:9} {codec:5} call {i}: mismatches {wrong}, ranks identical {same}", flush=True)
            del graph
    comm.close()
    if rank == 0: print("DEV_CHECK", "FAILED" if bad else "OK", flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, harness.free_port()), nprocs=world)
