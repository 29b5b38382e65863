# Throwaway dev timing of the segment exchange's CTA size (not the product bench): CUDA-graph median per
# call, NCCL beside it. Size = the larger tensor (reduce-scatter's input, all-gather's output, all-to-all's).
# DEV_SIZES (MiB, or K), DEV_KINDS (rs, ag, a2a), DEV_CODECS (fp16 = passthrough, fp8, int4, ...), DEV_THREADS (0 = the rule,
# -1 = the rule's CTA size on the slice path: no packets), DEV_CALLS (calls a graph; more amortise the ranks' skew at
# each replay's start at small sizes), DEV_DTYPE (bf16 or fp32), DEV_GROUPS (pipeline groups a CTA, 0 = the rule;
# columns codec_tT_gG where set).
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness
from dev_common import graph_time_us


def run(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import quickreduce as qr
    from quickreduce import _C, codecs
    from quickreduce.collectives import _KINDS, DTYPE_IDS
    comm = qr.Communicator(max_size=1 << 30)
    sizes = [int(x[:-1]) << 10 if x.endswith("K") else int(x) << 20 for x in os.environ.get("DEV_SIZES", "8,32,128").split(",")]
    kinds = os.environ.get("DEV_KINDS", "rs,ag,a2a").split(",")
    codec_names = os.environ.get("DEV_CODECS", "fp16").split(",")
    threads = [int(t) for t in os.environ.get("DEV_THREADS", "0,256,512").split(",")]
    names = {"rs": "reduce_scatter", "ag": "all_gather", "a2a": "all_to_all"}
    groups = [int(g) for g in os.environ.get("DEV_GROUPS", "").split(",") if g]
    cols = ["nccl"] + [f"{c}_t{t}" + (f"_g{g}" if groups else "") for c in codec_names for t in threads
                       for g in (groups or [0])]
    if rank == 0: print("kind bytes " + " ".join(f"{c:>15}" for c in cols), flush=True)
    W = world
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[os.environ.get("DEV_DTYPE", "bf16")]
    for kind in kinds:
        for nbytes in sizes:
            n = nbytes // dtype.itemsize
            k = n // W  # values per segment
            calls = int(os.environ.get("DEV_CALLS", 20 if nbytes <= (64 << 20) else 5))
            nbuf = max(1, min(calls, (256 << 20) // nbytes))
            big = [torch.randn(n, device="cuda", dtype=dtype) for _ in range(nbuf)]
            small = [torch.randn(k, device="cuda", dtype=dtype) for _ in range(nbuf)]
            out_big, out_small = torch.empty(n, device="cuda", dtype=dtype), torch.empty(k, device="cuda", dtype=dtype)
            src = big if kind in ("rs", "a2a") else small
            out = out_small if kind == "rs" else out_big
            row = []
            for col in cols:
                def call(i, col=col):
                    x = src[i % nbuf]
                    if col == "nccl":
                        if kind == "rs": dist.reduce_scatter_tensor(out, x)
                        elif kind == "ag": dist.all_gather_into_tensor(out, x)
                        else: dist.all_to_all_single(out, x)
                        return
                    codec, tg = col.rsplit("_t", 1)
                    t, g = (tg.split("_g") + ["0"])[:2]
                    comm._c.exchange(_KINDS[names[kind]], x.data_ptr(), out.data_ptr(), DTYPE_IDS[dtype],
                                     codecs.codec_id(codec), [k] * W, [k] * W, torch.cuda.current_stream().cuda_stream,
                                     pdl=comm.pdl, threads=max(int(t), 0), even_splits=kind == "a2a",
                                     packet_max_bytes=0 if int(t) < 0 else comm.packet_segment_max_bytes,
                                     **({"groups": int(g)} if int(g) else {}))
                row.append(graph_time_us(call, calls))
                comm.check()
            if rank == 0: print(f"{kind} {nbytes:>10} " + " ".join(f"{t:15.2f}" for t in row), flush=True)
            del big, small
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, harness.free_port()), nprocs=world)
