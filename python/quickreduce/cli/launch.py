"""Run a function on N local GPUs, one process per GPU, and never hang.

`spawn(fn, nprocs, *args)` starts `fn(rank, world_size, *args)` in `nprocs` fresh processes
(spawn context: no CUDA state is inherited), each bound to GPU `rank` with an NCCL process group
on a free localhost port. The parent polls the children: the first one that fails (or the
deadline) stops them all, and the parent raises with the failing ranks' tracebacks. Rank 0's
return value comes back through a pickle file, not a queue: a child blocked on a full queue
could never exit, and files survive a child that is killed after it reported.

Under torchrun (RANK and WORLD_SIZE set) the function runs in this process instead, and every
rank gets its own return value.

The environment is the caller's: NVLink multicast (NVLS) stays as the caller's variables set it,
unless a tool's --no-multicast (`add_multicast_option`) turns it off for the run.

`shared_gpu=True` puts every rank on GPU 0 with a gloo group (NCCL refuses two ranks on one GPU)
and sets QUICKREDUCE_ALLOW_SHARED_GPU=1, as tests/gpu/harness.py's shared mode does: the ranks'
kernels take turns on the GPU, which checks results but says nothing of speed.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import tempfile
import time
import traceback
import warnings
from datetime import timedelta
from multiprocessing.connection import wait as wait_for_sentinels
from pathlib import Path
from typing import Any, Callable

# The variables that turn NVLink multicast (NVLS) off in NCCL, torch symmetric memory and NVSHMEM
# (bench/tune/e2e --no-multicast). Multicast can take the GPUs of a host shared with other jobs
# out of service; on a machine of one's own it is a choice, so the tools leave it to the caller.
MULTICAST_OFF_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

_RESULT_FILE = "result.pkl"


class LaunchError(RuntimeError):
    """A rank failed; the message holds the failing ranks' tracebacks."""


class LaunchTimeout(LaunchError):
    """The ranks did not finish before the deadline and were killed."""


def disable_multicast() -> list[str]:
    """Set MULTICAST_OFF_ENV in os.environ (this process and the ranks it starts); return the names
    whose value changed."""
    changed = [name for name, value in MULTICAST_OFF_ENV.items() if os.environ.get(name) != value]
    os.environ.update(MULTICAST_OFF_ENV)
    return changed


def add_multicast_option(parser) -> None:
    """The --no-multicast flag of the tools that start ranks (bench, tune, e2e)."""
    parser.add_argument("--no-multicast", action="store_true",
                        help="turn NVLink multicast off for this run (" +
                             " ".join(f"{k}={v}" for k, v in MULTICAST_OFF_ENV.items()) +
                             "); default: the environment decides, as for your own jobs")


def apply_multicast_option(args) -> None:
    if getattr(args, "no_multicast", False):
        disable_multicast()


def multicast_settings() -> list[tuple[str, str]]:
    """(variable, value or '(unset)') of each variable that turns NVLink multicast off."""
    return [(name, os.environ.get(name, "(unset)")) for name in MULTICAST_OFF_ENV]


def free_port() -> int:
    """A TCP port that was free a moment ago on localhost (the race window is tiny)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_process_group(rank: int, world_size: int, local_rank: int, *, backend: str = "nccl",
                       timeout_s: float = 600.0, shared_gpu: bool = False) -> None:
    """Bind this process to its GPU and join the default process group (env:// rendezvous).
    With `shared_gpu`, every rank binds to GPU 0 and the group is gloo."""
    import inspect

    import torch
    import torch.distributed as dist

    if shared_gpu:
        os.environ["QUICKREDUCE_ALLOW_SHARED_GPU"] = "1"
        backend = "gloo"
        torch.cuda.set_device(0)
    kwargs: dict[str, Any] = {"backend": backend, "rank": rank, "world_size": world_size,
                              "timeout": timedelta(seconds=timeout_s)}
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        # device_id binds the group to our GPU, so barrier() never has to guess the device.
        if "device_id" in inspect.signature(dist.init_process_group).parameters:
            kwargs["device_id"] = torch.device("cuda", local_rank)
    if not dist.is_initialized():
        dist.init_process_group(**kwargs)


def spawn(fn: Callable[..., Any], nprocs: int, *args: Any, timeout_s: float = 600.0,
          grace_s: float = 10.0, backend: str = "nccl", shared_gpu: bool = False) -> Any:
    """Run `fn(rank, nprocs, *args)` on `nprocs` ranks; return rank 0's return value.

    `fn` and `args` must be picklable (a module-level function). Raises LaunchError if any rank
    fails, LaunchTimeout if they are not done after `timeout_s`; either way every child is
    killed before this returns. `backend="gloo"` runs without GPUs (used by the CPU tests);
    `shared_gpu=True` runs every rank on GPU 0 over gloo (see the module docstring).
    """
    if under_torchrun():
        return _run_in_this_process(fn, args, timeout_s=timeout_s, backend=backend,
                                    shared_gpu=shared_gpu)
    if shared_gpu:
        import torch

        if torch.cuda.device_count() < 1:
            raise LaunchError("--shared-gpu needs one visible GPU; found none")
    elif backend == "nccl":
        import torch

        available = torch.cuda.device_count()
        if nprocs > available:
            raise LaunchError(f"asked for {nprocs} GPUs but only {available} are visible")

    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="quickreduce-launch-") as tmp:
        workdir = Path(tmp)
        procs = [
            context.Process(target=_child_main, name=f"quickreduce-rank{rank}",
                            args=(fn, rank, nprocs, port, str(workdir), timeout_s, backend, args,
                                  shared_gpu))
            for rank in range(nprocs)
        ]
        try:
            for proc in procs:
                proc.start()
            _supervise(procs, workdir, deadline=time.monotonic() + timeout_s, grace_s=grace_s)
        finally:
            _kill_all(procs)
        result_path = workdir / _RESULT_FILE
        if not result_path.exists():
            raise LaunchError("rank 0 finished without writing its result")
        with open(result_path, "rb") as f:
            return pickle.load(f)


def _run_in_this_process(fn, args, *, timeout_s: float, backend: str, shared_gpu: bool = False):
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    init_process_group(rank, world_size, local_rank, backend=backend, timeout_s=timeout_s,
                       shared_gpu=shared_gpu)
    return fn(rank, world_size, *args)


def _supervise(procs, workdir: Path, *, deadline: float, grace_s: float) -> None:
    """Return when every child exited 0; raise (children still alive) otherwise."""
    while True:
        codes = [p.exitcode for p in procs]
        if all(code == 0 for code in codes):
            return
        failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            # Let the others finish reporting their own errors, then stop them.
            _join_until(procs, time.monotonic() + grace_s)
            raise LaunchError(_failure_report(procs, workdir))
        now = time.monotonic()
        if now >= deadline:
            done = [rank for rank in range(len(procs)) if (workdir / f"done-{rank}").exists()]
            if len(done) == len(procs):
                # Every rank returned; only teardown hung. Keep the results.
                warnings.warn("quickreduce: ranks finished but did not exit; killed them",
                              stacklevel=3)
                return
            raise LaunchTimeout(
                f"ranks did not finish within the timeout (done: {done or 'none'}); killed them\n"
                + _failure_report(procs, workdir))
        wait_for_sentinels([p.sentinel for p in procs if p.exitcode is None],
                           timeout=min(0.5, deadline - now))


def _join_until(procs, deadline: float) -> None:
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))


def _kill_all(procs) -> None:
    for proc in procs:
        if proc.pid is not None and proc.exitcode is None:
            proc.kill()
    for proc in procs:
        if proc.pid is not None:
            proc.join(timeout=10)


def _failure_report(procs, workdir: Path) -> str:
    lines = []
    for rank, proc in enumerate(procs):
        code = proc.exitcode
        state = "running" if code is None else f"exit code {code}"
        lines.append(f"rank {rank}: {state}")
        error_file = workdir / f"error-{rank}.txt"
        if error_file.exists():
            text = error_file.read_text(errors="replace").rstrip()
            lines.append("  " + "\n  ".join(text.splitlines()[-25:]))
    return "\n".join(lines)


def _child_main(fn, rank: int, world_size: int, port: int, workdir: str, timeout_s: float,
                backend: str, args, shared_gpu: bool = False) -> None:
    """Body of one child process. Always leaves through os._exit: a normal interpreter exit runs
    NCCL/CUDA teardown, which can block forever when a peer is gone."""
    out = Path(workdir)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world_size))
    code = 0
    try:
        init_process_group(rank, world_size, rank, backend=backend, timeout_s=timeout_s,
                           shared_gpu=shared_gpu)
        result = fn(rank, world_size, *args)
        if rank == 0:
            partial = out / (_RESULT_FILE + ".part")
            with open(partial, "wb") as f:
                pickle.dump(result, f)
            partial.rename(out / _RESULT_FILE)  # atomic: the parent never reads half a file
        (out / f"done-{rank}").touch()
        _teardown()
    except BaseException:  # noqa: BLE001 - everything must reach the parent
        code = 1
        (out / f"error-{rank}.txt").write_text(traceback.format_exc())
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _teardown() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
