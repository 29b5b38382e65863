# Dev diagnostic: where a two-shot CTA's cycles go, per phase (csrc/collectives/all_reduce/phase_timers.cuh).
# Needs a build with the timers compiled in, which is slower and must not be benchmarked:
#   QR_PHASE_TIMERS=1 QR_CUDA_ARCHS=90 pip install --no-build-isolation --no-deps . && python3 lab/scripts/phase_timers.py
# PT_SIZES (MiB, default 64,1024) and PT_CODECS (default fp16,int4,fp4,int6,fp8) narrow the run.
# Each line: CTA 0's thread 0 on each rank, cycles in scatter (encode + staging, "send" included),
# waiting for the peers' scatter flags, reduce, announcing (bulk-copy completion + flags), waiting
# for the all-gather flags, and gather. The third call of each (size, codec) is the one to read.
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness


def run(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import quickreduce as qr
    sizes = [int(x) << 20 for x in os.environ.get("PT_SIZES", "64,1024").split(",")]
    codecs = os.environ.get("PT_CODECS", "fp16,int4,fp4,int6,fp8").split(",")
    comm = qr.Communicator(max_size=max(sizes))
    for nbytes in sizes:
        x = torch.randn(nbytes // 2, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        for codec in codecs:
            for call in range(3):
                dist.barrier()
                torch.cuda.synchronize()
                if rank == 0: print(f"--- {nbytes >> 20} MiB {codec} call {call}", flush=True)
                comm.all_reduce(x, out=out, codec=codec, algo="two_shot")
                torch.cuda.synchronize()  # flushes the device printf
        comm.check()
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, harness.free_port()), nprocs=world)
