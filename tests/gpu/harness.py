"""Run scenario functions on N GPU processes at once and collect their per-check results.

Each scenario gets (rank, world_size) and returns {check_name: None | "failure message"}.
One spawn runs every scenario, so the device pays the process/NCCL start-up once.

With QR_TEST_SHARED_GPU=1 on a machine with fewer GPUs than ranks, every rank runs on GPU 0 with
gloo in place of NCCL (NCCL refuses two ranks on one GPU): the processes' kernels take turns on the
GPU, so it checks results, not speed. conftest.py then runs the multi-GPU tests on one GPU.
"""
from __future__ import annotations

import faulthandler
import json
import os
import tempfile
import time
import traceback

import torch
import torch.multiprocessing as mp

import quickreduce as qr
from quickreduce.cli.launch import free_port  # also used by the GPU tests and scripts


def selected(scenarios: list[str]) -> list[str]:
    """The scenarios a run asks for: those named in QR_TEST_SCENARIOS=a,b (a short device call;
    a file none of whose scenarios is named runs none), or all of them."""
    wanted = [s for s in os.environ.get("QR_TEST_SCENARIOS", "").split(",") if s]
    return [s for s in scenarios if s in wanted] if wanted else scenarios


def shared_gpu(world_size: int) -> bool:
    """True when the ranks are to share GPU 0 (asked for, and too few GPUs for one each)."""
    return os.environ.get("QR_TEST_SHARED_GPU") == "1" and torch.cuda.device_count() < world_size


def init_rank(rank: int, world_size: int, port: int, backend: str | None = None) -> None:
    """This process's GPU and process group: one GPU a rank over NCCL, or GPU 0 over gloo when shared;
    `backend` (e.g. "cpu:gloo,cuda:quickreduce", the torch.distributed backend's tests) overrides it."""
    import torch.distributed as dist
    init = f"tcp://127.0.0.1:{port}"
    shared = shared_gpu(world_size)
    if shared:
        os.environ["QUICKREDUCE_ALLOW_SHARED_GPU"] = "1"  # (the quickreduce backend's fallback is then gloo)
    torch.cuda.set_device(0 if shared else rank)
    if backend is not None:
        if "quickreduce" in backend:
            import quickreduce.distributed  # noqa: F401  (registers the backend)
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world_size)
    elif shared:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world_size)
    else:
        dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world_size,
                                device_id=torch.device("cuda", rank))


def _worker(rank, world_size, port, scenario_module, scenario_names, out_dir, env, backend):
    os.environ.update(env)
    # A worker still running after QR_TEST_HANG_DUMP_S (240 s; 0: never; the whole 2-GPU suite takes
    # ~130 s) prints every thread's stack and exits: a run of tests/gpu once printed nothing for 300 s,
    # as the CPU backend test's workers once sat in a futex wait.
    hang_dump_s = float(os.environ.get("QR_TEST_HANG_DUMP_S", "240"))
    if hang_dump_s > 0:
        faulthandler.dump_traceback_later(hang_dump_s, exit=True)
    import importlib

    import torch.distributed as dist
    init_rank(rank, world_size, port, backend)
    mod = importlib.import_module(scenario_module)
    results = {}
    for name in scenario_names:
        try:
            checks = getattr(mod, name)(rank, world_size)
            for k, v in checks.items():
                results[f"{name}/{k}"] = v
        except Exception:
            results[f"{name}/<crashed>"] = traceback.format_exc()
        try:
            dist.barrier()
        except Exception:
            results[f"{name}/<barrier>"] = traceback.format_exc()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


def run_scenarios(scenario_module: str, names: list[str], world_size: int, env: dict | None = None,
                  timeout_s: float = 600, backend: str | None = None) -> dict:
    out_dir = tempfile.mkdtemp(prefix="qr-gpu-")
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, world_size, port, scenario_module, names, out_dir, env or {}, backend))
             for r in range(world_size)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout_s)
    hung = [i for i, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
    merged: dict = {}
    for r in range(world_size):
        path = os.path.join(out_dir, f"rank{r}.json")
        if not os.path.exists(path):
            merged[f"<rank {r} wrote no results; exit code {procs[r].exitcode}; hung={r in hung}>"] = {r: "missing"}
            continue
        with open(path) as f:
            for k, v in json.load(f).items():
                merged.setdefault(k, {})[r] = v
    return merged


def check_scenario(results: dict, scenario: str) -> None:
    """Assert that every check of one scenario passed on every rank (its info/ entries are printed)."""
    mine = {k: v for k, v in results.items() if k.startswith(scenario + "/") or k.startswith("<")}
    assert mine, f"scenario {scenario} produced no checks"
    for k, v in mine.items():
        if k.startswith(scenario + "/info/"):
            print(k, v)  # measured numbers, kept in the log (-s)
    checks = {k: v for k, v in mine.items() if not k.startswith(scenario + "/info/")}
    failures = {k: v for k, v in checks.items() if any(msg is not None for msg in v.values())}
    print(f"{scenario}: {len(checks)} checks, {len(failures)} failed")
    assert not failures, "\n".join(f"{k}: {v}" for k, v in list(failures.items())[:20])


def capture_graph(body):
    """Run body once on a side stream (warm-up, as torch's graph capture wants), then capture it."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    return g


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def replay_checked(run, inputs: list[torch.Tensor], outputs: list[torch.Tensor], bank: list[tuple],
                   replays: int) -> int:
    """Capture run() (reads `inputs`, writes `outputs`) in a CUDA graph and replay it `replays` times,
    loading bank[i % len(bank)] = (*input values, *expected outputs) before replay i. Returns how many
    output elements differed from the expected bits (counted on the GPU, so replays stay back to back)."""
    want = [torch.empty_like(o) for o in outputs]
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")

    def body():
        run()
        for o, w in zip(outputs, want):
            bits = _BITS[o.element_size()]
            wrong.add_((o.view(bits) != w.view(bits)).sum())

    assert all(len(entry) == len(inputs) + len(outputs) for entry in bank), "bank entries: inputs then outputs"

    def load(b):
        for dst, src in zip([*inputs, *want], bank[b]):
            dst.copy_(src)

    load(0)
    g = capture_graph(body)  # its warm-up call runs (and is counted); the capture runs nothing
    for it in range(replays):
        load(it % len(bank))
        g.replay()
    torch.cuda.synchronize()
    del g
    return int(wrong)


def expect_peer_timeout(comm, call, limit_s: float = 7.0) -> tuple[str | None, str]:
    """This rank makes call() alone (its peer skips it): comm.check() must raise PeerTimeoutError
    within limit_s. Returns (failure message or None, what happened, for an info/ entry)."""
    t0 = time.time()
    call()
    torch.cuda.synchronize()
    try:
        comm.check()
        return "no error after the peer skipped the call", "no error"
    except qr.PeerTimeoutError as e:
        took = time.time() - t0
        return (None if took < limit_s else f"took {took:.1f}s: {e}"), f"{took:.1f}s: {e}"
