"""Where does the exact uneven all-to-all lose to NCCL under router skew (MoE 4096 tokens, deepseek-v3
shapes: qr_host 0.92-0.94x NCCL with a skewed router, 1.01x uniform; 4x H100, 2026-11-27)?
Patterns of rows (7168 bf16 values a row) C[s][d] sent by rank s to rank d, R rows a sender:
  even     R/W to every rank
  incast   every rank sends all R rows to rank 0 (a skewed dispatch)
  outcast  rank 0 sends R rows to every rank, the others send nothing (a skewed combine)
  zipf     R * (0.85, 0.10, 0.04, 0.01, ...) to ranks 0, 1, 2, ...
Methods: the host-sized exchange at each of A2A_THREADS threads a CTA (comm._c.exchange, threads=) and NCCL's
all_to_all_single; CUDA-graph median per call (lab/scripts/dev_common.graph_time_us); qr's output
checked bitwise against NCCL's.
Run (2+ GPUs): python3 lab/probes/a2a_skew.py [R,R,...]
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
import harness  # noqa: E402

# CTA sizes to time (A2A_THREADS=256,512; an all-to-all with split sizes ran 128 too until 2026-11-28).
THREADS = [int(n) for n in os.environ.get("A2A_THREADS", "256,512").split(",")]
from dev_common import graph_time_us  # noqa: E402

H = 7168


def matrix(pattern, R, W):
    if pattern == "even":
        return [[R // W] * W for _ in range(W)]
    if pattern == "incast":
        return [[R if d == 0 else 0 for d in range(W)] for _ in range(W)]
    if pattern == "outcast":
        return [[R if s == 0 else 0 for d in range(W)] for s in range(W)]
    p = [0.85, 0.10, 0.04, 0.01, 0.0, 0.0, 0.0, 0.0][:W]
    rows = [int(R * q) for q in p]
    rows[0] += R - sum(rows)
    return [rows[:] for _ in range(W)]


def run(rank, world, port, sizes):
    import quickreduce as qr
    from quickreduce import _C
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    most = max(sizes) * world * H * 2
    comm = qr.Communicator(max_size=(most + 15) // 16 * 16)
    stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    if rank == 0:
        print(f"{'pattern':8s} {'R':>6s} {'MB in':>7s} {'MB max recv':>11s} {'nccl':>9s} "
              + " ".join(f"{'qr' + str(n):>9s}" for n in THREADS) + "  same", flush=True)
    for R in sizes:
        for pattern in ("even", "incast", "outcast", "zipf"):
            C = matrix(pattern, R, world)
            send = C[rank]
            recv = [C[s][rank] for s in range(world)]
            x = torch.randn(max(sum(send), 1), H, device="cuda").to(torch.bfloat16)[:sum(send)]
            y_n = torch.empty(sum(recv), H, device="cuda", dtype=torch.bfloat16)
            y_q = torch.empty_like(y_n)
            calls = 3 if R >= 16384 else 6
            t = {"nccl": graph_time_us(lambda i: dist.all_to_all_single(y_n, x, recv, send), calls)}
            sv, rv = [c * H for c in send], [c * H for c in recv]
            for threads in THREADS:
                t[f"qr{threads}"] = graph_time_us(
                    lambda i: comm._c.exchange(_C.EXCHANGE_ALL_TO_ALL, x.data_ptr(), y_q.data_ptr(), _C.DTYPE_BFLOAT16,
                                               qr.codecs.codec_id("bf16"), sv, rv, stream(), threads=threads), calls)
            comm.check()
            same = torch.equal(y_n.view(torch.int16), y_q.view(torch.int16))
            slow = torch.tensor([t[k] for k in ("nccl", *(f"qr{n}" for n in THREADS))], device="cuda")
            dist.all_reduce(slow, op=dist.ReduceOp.MAX)
            ok = torch.tensor([int(same)], device="cuda")
            dist.all_reduce(ok, op=dist.ReduceOp.MIN)
            if rank == 0:
                most_recv = max(sum(C[s][d] for s in range(world)) for d in range(world)) * H * 2 / 1e6
                print(f"{pattern:8s} {R:>6d} {sum(send) * H * 2 / 1e6:7.1f} {most_recv:11.1f} "
                      + " ".join(f"{v:9.1f}" for v in slow.tolist()) + f"  {'yes' if ok.item() else 'NO'}", flush=True)
            del x, y_n, y_q
            torch.cuda.empty_cache()
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [2048, 8192, 32768]
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, harness.free_port(), sizes), nprocs=world)
