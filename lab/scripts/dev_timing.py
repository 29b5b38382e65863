# Throwaway dev timing (not the product bench): CUDA-graph median per call, qr vs NCCL.
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness
from dev_common import graph_time_us

def run(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    import quickreduce as qr
    comm = qr.Communicator(max_size=1 << 30)
    sizes = [8 << 10, 32 << 10, 128 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    methods = [("nccl", None, None), ("one", "fp16", "one_shot"), ("onepdl", "fp16", "one_shot"), ("two", "fp16", "two_shot"), ("two_g1", "fp16", "two_shot"), ("two_g16", "fp16", "two_shot"), ("fp8", "fp8", "two_shot"), ("int8", "int8", "two_shot"), ("int6", "int6", "two_shot"), ("int4", "int4", "two_shot"), ("int4_g1", "int4", "two_shot"), ("int4_g16", "int4", "two_shot"), ("fp4", "fp4", "two_shot")]
    if os.environ.get("DEV_SIZES"):  # e.g. 8K,32K,1,64 (no suffix: MiB)
        sizes = [int(x[:-1]) << 10 if x.endswith("K") else int(x) << 20 for x in os.environ["DEV_SIZES"].split(",")]
    methods += [("two_t128", "fp16", "two_shot"), ("two_t256", "fp16", "two_shot"), ("two_t512", "fp16", "two_shot")]
    methods += [(f"{c}_t{t}_b{b}", c, "two_shot") for c in ("int4", "fp4", "two") for t in (256, 512) for b in (66, 132, 264)]
    methods += [(f"{c}_t512_b{b}", c, "two_shot") for c in ("int4", "fp4", "int6", "fp8") for b in (396, 528)]
    methods += [(f"{c}_g{g}", c, "two_shot") for c in ("int4", "int6", "fp8", "fp4") for g in (4, 8, 16, 32, 64, 128, 256)]
    methods += [(f"two_t{t}{b}{g}", "fp16", "two_shot") for t in (128, 256, 512) for b in ("", "_b264") for g in ("", "_g2", "_g4", "_g8", "_g16", "_g32", "_g64", "_g128")]
    methods = list({m[0]: m for m in methods}.values())  # one column per name
    if os.environ.get("DEV_METHODS"):  # any name of the forms above, listed or not (e.g. int6_g12)
        known = {m[0]: m for m in methods}
        codec_of = {"two": "fp16", "one": "fp16", "onepdl": "fp16"}
        methods = [known.get(n) or (n, codec_of.get(n.split("_")[0], n.split("_")[0]), "one_shot" if n.startswith("one") else "two_shot")
                   for n in os.environ["DEV_METHODS"].split(",")]
    if rank == 0: print("bytes " + " ".join(f"{m[0]:>9}" for m in methods), flush=True)
    for nbytes in sizes:
        n = nbytes // 2
        calls = 50 if nbytes < (1 << 20) else 20 if nbytes <= (64 << 20) else 5
        calls = int(os.environ.get("DEV_CALLS", calls))
        nbuf = int(os.environ.get("DEV_INPUTS", max(1, min(calls, (256 << 20) // nbytes))))
        xs = [torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
        outs = [torch.empty_like(xs[0]) for _ in range(int(os.environ.get("DEV_OUTPUTS", 1)))]
        row = []
        for name, codec, algo in methods:
            if algo == "one_shot" and nbytes > comm._c.one_shot_max_bytes: row.append(float("nan")); continue
            comm.pdl = name.endswith("pdl")
            comm._two_shot_groups = int(name.rsplit("_g", 1)[1]) if "_g" in name else 0
            def call(i):
                if name == "nccl": dist.all_reduce(xs[i % nbuf])
                elif "_t" in name or "_b" in name:  # e.g. two_t256, int4_t512_b132: codec, CTA size, grid
                    x = xs[i % nbuf]
                    parts = name.split("_")
                    knob = {p[0]: int(p[1:]) for p in parts[1:]}
                    codec_id = 1 if parts[0] == "two" else comm._c.codec_id(parts[0]) if hasattr(comm._c, "codec_id") else qr._C.codec_id(parts[0])
                    comm._c.all_reduce(x.data_ptr(), outs[0].data_ptr(), x.numel(), 1, codec_id, 1, torch.cuda.current_stream().cuda_stream,
                                       threads=knob.get("t", 0), blocks=knob.get("b", 0), groups=knob.get("g", 0))
                else: comm.all_reduce(xs[i % nbuf], out=outs[i % len(outs)], codec=codec, algo=algo)
            row.append(graph_time_us(call, calls))
            comm.check()
        if rank == 0: print(f"{nbytes:>9} " + " ".join(f"{t:9.2f}" for t in row), flush=True)
        del xs
    comm.close()
    dist.destroy_process_group()

if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, harness.free_port()), nprocs=world)
