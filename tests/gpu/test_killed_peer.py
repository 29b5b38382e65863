"""A peer process that dies before a call: the survivor gets PeerTimeoutError within the timeout
plus 5 s, then every later call raises at once. Runs its own processes (no collective after the death)."""
import json
import os
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

TIMEOUT_S = 3.0


def _worker(rank, world_size, port, out_dir):
    import torch
    import torch.distributed as dist

    import quickreduce as qr
    harness.init_rank(rank, world_size, port)
    comm = qr.Communicator(max_size=1 << 20, timeout_s=TIMEOUT_S)
    x = torch.randn(1 << 16, device="cuda", dtype=torch.bfloat16)
    comm.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    if rank == world_size - 1:
        os._exit(0)  # dies without a word, mappings and all
    time.sleep(1.0)
    result = {}
    for algo in ("one_shot", "two_shot"):
        t0 = time.time()
        try:
            comm.all_reduce(x, algo=algo)
            torch.cuda.synchronize()
            comm.check()
            result[algo] = {"error": None, "seconds": time.time() - t0}
        except qr.PeerTimeoutError as e:
            result[algo] = {"error": str(e), "seconds": time.time() - t0}
        except qr.QuickReduceError as e:
            result[algo] = {"error": f"{type(e).__name__}: {e}", "seconds": time.time() - t0}
        if algo == "one_shot":
            break  # the communicator is broken now; the next call must raise at once
    t0 = time.time()
    try:
        comm.all_reduce(x, algo="two_shot")
        result["later"] = {"error": None, "seconds": time.time() - t0}
    except qr.QuickReduceError as e:
        result["later"] = {"error": str(e), "seconds": time.time() - t0}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    os._exit(0)  # NCCL teardown would wait for the dead peer


@pytest.mark.gpu(2)
def test_killed_peer_raises_within_timeout():
    import torch.multiprocessing as mp
    out_dir = tempfile.mkdtemp(prefix="qr-kill-")
    ctx = mp.get_context("spawn")
    port = harness.free_port()
    procs = [ctx.Process(target=_worker, args=(r, 2, port, out_dir)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    hung = [p for p in procs if p.is_alive()]
    for p in hung:
        p.kill()
    assert not hung, "a process hung"
    with open(os.path.join(out_dir, "rank0.json")) as f:
        result = json.load(f)
    print(result)
    first = result["one_shot"]
    assert first["error"] and "rank 1" in first["error"], result
    assert first["seconds"] < TIMEOUT_S + 5.0, result
    assert result["later"]["error"] and result["later"]["seconds"] < 1.0, result
