# Dev probe for Nsight Compute: a few two-shot calls of one codec at one size on every local GPU.
# ncu --target-processes all --kernel-name regex:two_shot ... python3 scripts/ncu_probe.py CODEC MB
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp

def run(rank, world, port, codec, mb):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    import quickreduce as qr
    comm = qr.Communicator(max_size=mb << 20, timeout_s=60)
    x = torch.randn((mb << 20) // 2, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    for _ in range(4):
        comm.all_reduce(x, out=out, codec=codec, algo="two_shot")
    torch.cuda.synchronize()
    comm.check()
    comm.close()
    dist.destroy_process_group()

if __name__ == "__main__":
    from quickreduce.cli.launch import free_port
    mp.spawn(run, args=(torch.cuda.device_count(), free_port(), sys.argv[1], int(sys.argv[2])), nprocs=torch.cuda.device_count())
