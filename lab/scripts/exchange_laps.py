# Dev diagnostic: where the coded exchange's time goes at large sizes (ExchangeTimers' laps,
# csrc/collectives/all_reduce/phase_timers.cuh): CTA 0 and the last CTA of each rank print their SM cycles in
# push (encode + staging), wait (sources' flags), decode and announce (this CTA's bulk copies landing).
# Needs a build with the timers compiled in (slower: never benchmark it):
#   bash lab/scripts/build_variant.sh timers QR_PHASE_TIMERS=1 && bash lab/scripts/engine_gpu_check.sh pack timers
# EL_BYTES (a rank's input, default 128M,512M), EL_KINDS (reduce_scatter,all_gather,all_to_all), EL_CODECS
# (bf16,fp8,int4; bf16 = the exact call), EL_DTYPE (bf16 or fp32). Each (kind, size, codec) runs 3 calls; read the third ("--- ... call 2").
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness


def size(text):
    return int(text[:-1]) << {"K": 10, "M": 20, "G": 30}[text[-1]] if text[-1] in "KMG" else int(text)


def run(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import quickreduce as qr
    sizes = [size(x) for x in os.environ.get("EL_BYTES", "128M,512M").split(",")]
    kinds = os.environ.get("EL_KINDS", "reduce_scatter,all_gather,all_to_all").split(",")
    codec_names = os.environ.get("EL_CODECS", "bf16,fp8,int4").split(",")
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[os.environ.get("EL_DTYPE", "bf16")]
    comm = qr.Communicator(max_size=max(sizes) * world)
    for nbytes in sizes:
        x = torch.randn(nbytes // dtype.itemsize, device="cuda", dtype=dtype)
        for kind in kinds:
            arg = x[: x.numel() // world] if kind == "all_gather" else x
            for codec in codec_names:
                for call in range(3):
                    dist.barrier()
                    torch.cuda.synchronize()
                    if rank == 0:
                        print(f"--- {kind} {nbytes} bytes {codec} call {call}", flush=True)
                    getattr(comm, kind)(arg, codec=codec)
                    torch.cuda.synchronize()  # flushes the device printf
        del x
    comm.check()
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(os.environ.get("EL_WORLD", torch.cuda.device_count()))
    mp.spawn(run, args=(world, harness.free_port()), nprocs=world)
