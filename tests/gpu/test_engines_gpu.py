"""Multi-GPU: quickreduce inside vLLM 0.33.0 and SGLang 0.5.23 through their plugins (docs/integrations.md).

vLLM: ``QUICKREDUCE_VLLM=1``, vLLM's ``load_general_plugins()`` (the installed entry point), then vLLM's own
``init_distributed_environment`` + ``initialize_model_parallel(W)``: its TP ``GroupCoordinator`` holds the
plugin's ``CudaCommunicator`` subclass. SGLang: ``QUICKREDUCE_SGLANG=1``, SGLang's ``load_plugins()`` (the
hooks), then SGLang's ``GroupCoordinator`` for a TP group of every rank. For each engine, at W ranks:

- every size from 8 KB to 64 MB, bf16 and fp16, through the engine group's ``all_reduce``: exact codecs
  (FP, LOSSLESS) give the bits of the fp32 rank-ordered sum (quickreduce's exact result), lossy codecs
  (INT8, FP8, INT4: the plugins plan them as ``auto:<codec>``) the bits of our own
  ``quickreduce.Communicator`` with the same codec and an error within the codec's bound; every rank
  holds identical bits;
- a CUDA graph captured inside the engine's ``graph_capture`` and replayed 100 times with changing inputs,
  every replay checked;
- sizes above ``QUICKREDUCE_ENGINE_MAX_SIZE_MB`` take the engine's path (checked close to the exact sum,
  identical on every rank);
- one engine start per codec in the same process: ``destroy`` closes quickreduce (the GPU memory of its
  workspace comes back) and the next start sets it up again;
- timing: CUDA-graph-timed all-reduces per size (bf16) through the engine group with the plugin and with
  it detached (the engine's own path), rows appended to the CSV named by ``QR_ENGINE_TIMES`` (rank 0).

Runs with the engines importable (the engine kit on a GPU machine: tests/gpu/README or docs/integrations.md)
at ``QR_TEST_WORLD_SIZE`` ranks (2 by default); skipped without them unless ``QR_REQUIRE_ENGINES=1``.
``QR_ENGINE_CODECS`` narrows the codec starts (default FP,LOSSLESS,INT8,FP8,INT4).
"""
from __future__ import annotations

import csv
import importlib.util
import logging
import os
import sys
import time

import pytest
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

WORLD = int(os.environ.get("QR_TEST_WORLD_SIZE", "2"))
SCENARIOS = harness.selected(["vllm_engine", "sglang_engine"])
ENGINES = {"vllm_engine": "vllm", "sglang_engine": "sglang"}
KiB, MiB = 1 << 10, 1 << 20
SIZES = [8 * KiB << k for k in range(14)]  # 8 KB .. 64 MB
GRAPH_SIZES = [8 * KiB, 512 * KiB, 8 * MiB, 64 * MiB]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
CODECS = [c for c in os.environ.get("QR_ENGINE_CODECS", "FP,LOSSLESS,INT8,FP8,INT4").split(",") if c]
EXACT = ("FP", "LOSSLESS")
# rel. error vs the float64 sum of Gaussian inputs, generous bounds (measured: README accuracy table)
BOUNDS = {"INT8": 0.02, "FP8": 0.08, "INT6": 0.06, "INT4": 0.3, "FP4": 0.3}
REPLAYS = 100
SPLIT_LIMIT_MB = 16  # the start that checks the engine's path above the limit


# ---------------------------------------------------------------- helpers
class Lines(logging.Handler):
    def __init__(self, name):
        super().__init__(logging.DEBUG)
        self.lines = []
        lg = logging.getLogger(name)
        lg.addHandler(self)
        lg.setLevel(logging.DEBUG)

    def emit(self, record):
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def inputs_for(seed: int, numel: int, dtype, world_size: int) -> list:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(numel, generator=g, device="cuda").to(dtype) for _ in range(world_size)]


def exact_sum(xs) -> torch.Tensor:
    acc = torch.zeros_like(xs[0], dtype=torch.float32)
    for x in xs:  # rank order, fp32, rounded once: quickreduce's exact result
        acc += x.float()
    return acc.to(xs[0].dtype)


def rel_err(out, xs) -> float:
    ref = sum(x.double() for x in xs)
    return float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))


def same_bits(a, b) -> bool:
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


def identical_on_all_ranks(t: torch.Tensor) -> bool:
    """All ranks' tensors gathered over NCCL (the default group) and compared bit for bit."""
    world = dist.get_world_size()
    everyone = torch.empty((world, t.numel()), dtype=t.dtype, device=t.device)
    dist.all_gather_into_tensor(everyone, t.contiguous().view(-1))
    return all(same_bits(everyone[r], everyone[0]) for r in range(world))


def check_call(all_reduce, codec, plan_codec, reference, rank, world_size, seed, numel, dtype,
               engine_path=False) -> str | None:
    """One all-reduce through the engine: None, or what went wrong. ``codec``: QUICKREDUCE_QUANTIZATION's
    value; ``plan_codec``: what the plugin runs (EngineAllReduce.codec)."""
    xs = inputs_for(seed, numel, dtype, world_size)
    out = all_reduce(xs[rank].clone())
    torch.cuda.synchronize()
    if not identical_on_all_ranks(out):
        return "ranks hold different bits"
    err = rel_err(out, xs)
    if engine_path:
        return None if err < 1e-2 else f"the engine's path: rel err {err:.2e}"
    if codec in EXACT:
        return None if same_bits(out, exact_sum(xs)) else f"not the exact sum's bits (rel err {err:.2e})"
    want = reference.all_reduce(xs[rank], codec=plan_codec)
    if not same_bits(out, want):
        return f"differs from quickreduce.Communicator with codec {plan_codec} (rel err {err:.2e})"
    return None if err <= BOUNDS[codec] else f"rel err {err:.3e} above the {codec} bound {BOUNDS[codec]}"


def graph_replays(graph_capture, all_reduce, codec, plan_codec, reference, rank, world_size, numel, dtype) -> str | None:
    """Capture all_reduce(static input) inside the engine's graph_capture, replay REPLAYS times loading one of
    four input sets before each replay; every replay's output compared (on the GPU) with its expected bits."""
    sets = [inputs_for(900 + i, numel, dtype, world_size) for i in range(4)]
    if codec in EXACT:
        wants = [exact_sum(xs) for xs in sets]
    else:
        wants = [reference.all_reduce(xs[rank], codec=plan_codec) for xs in sets]
    static = sets[0][rank].clone()
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")
    want = torch.empty_like(static)
    with graph_capture() as ctx:
        stream = ctx.stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # a warm-up run outside capture, as graphs want
            all_reduce(static)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            out = all_reduce(static)
            wrong.add_((out.view(torch.int16) != want.view(torch.int16)).sum())
    torch.cuda.synchronize()
    wrong.zero_()
    for i in range(REPLAYS):
        static.copy_(sets[i % 4][rank])
        want.copy_(wants[i % 4])
        g.replay()
    torch.cuda.synchronize()
    bad = int(wrong)
    last = out.clone()
    del g
    if not identical_on_all_ranks(last):
        return "ranks hold different bits after the replays"
    return None if bad == 0 else f"{bad} values differ over {REPLAYS} replays"


def time_graph(graph_capture, all_reduce, numel, dtype) -> float:
    """Microseconds an all-reduce, CUDA-graph timed: a graph of `calls` back-to-back calls, replayed."""
    calls = 50 if numel * 2 <= MiB else 20 if numel * 2 <= 16 * MiB else 10
    x = (torch.randn(numel, device="cuda") * 0.01).to(dtype)
    with graph_capture() as ctx:
        stream = ctx.stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            all_reduce(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(calls):
                all_reduce(x)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    replays = 20
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    del g
    return start.elapsed_time(end) * 1000 / (replays * calls)


def write_times(rows: list) -> None:
    path = os.environ.get("QR_ENGINE_TIMES")
    if not path or not rows:
        return
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["engine", "gpu", "world_size", "dtype", "size_bytes", "path", "codec", "us_per_call"])
        w.writerows(rows)


def free_bytes() -> int:
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]


# ---------------------------------------------------------------- one engine, every codec start
def run_engine(name, rank, world_size, start, stop, group_all_reduce, graph_capture, attached, detach) -> dict:
    """The checks shared by both engines. start(codec, limit_mb) builds the engine's TP group; stop() destroys
    it; group_all_reduce() is its all_reduce; attached() its EngineAllReduce (or None); detach() a context
    in which the group runs the engine's own path."""
    import quickreduce as qr
    res = {}
    reference = qr.Communicator(max_size=64 * MiB)  # our own result for the lossy codecs (default group)
    rows = []
    gpu = torch.cuda.get_device_name()
    for codec in CODECS + ["SPLIT"]:
        split = codec == "SPLIT"
        codec_name = "FP" if split else codec
        key = f"{codec}"
        os.environ["QUICKREDUCE_QUANTIZATION"] = codec_name
        os.environ["QUICKREDUCE_ENGINE_MAX_SIZE_MB"] = str(SPLIT_LIMIT_MB if split else 64)
        start()
        qra = attached()
        if qra is None:
            res[f"{key}/attached"] = "the plugin did not set quickreduce up"
            stop()
            continue
        res[f"info/{key}/workspace_bytes"] = qra.comm.workspace_bytes
        for dname, dtype in DTYPES.items():
            for i, nbytes in enumerate(SIZES):
                numel = nbytes // 2
                engine_path = split and nbytes > SPLIT_LIMIT_MB * MiB
                if qra.takes(torch.empty(numel, dtype=dtype, device="cuda")) == engine_path:
                    res[f"{key}/{dname}/{nbytes}/route"] = f"takes={not engine_path} expected"
                res[f"{key}/{dname}/{nbytes}"] = check_call(group_all_reduce, codec_name, qra.codec, reference, rank,
                                                            world_size, 100 + i, numel, dtype, engine_path)
        for nbytes in GRAPH_SIZES:
            for dname, dtype in DTYPES.items():
                if dname == "fp16" and nbytes != 512 * KiB:
                    continue
                engine_path = split and nbytes > SPLIT_LIMIT_MB * MiB
                if engine_path:
                    continue  # the engine's own graph path: not bitwise comparable at W > 2
                res[f"{key}/graph/{dname}/{nbytes}"] = graph_replays(graph_capture, group_all_reduce, codec_name,
                                                                     qra.codec, reference, rank, world_size,
                                                                     nbytes // 2, dtype)
        if codec in ("FP", "INT8", "INT4"):
            for nbytes in SIZES:
                us = time_graph(graph_capture, group_all_reduce, nbytes // 2, torch.bfloat16)
                rows.append([name, gpu, world_size, "bf16", nbytes, "quickreduce", qra.codec, f"{us:.2f}"])
                if codec == "FP":
                    with detach():
                        us = time_graph(graph_capture, group_all_reduce, nbytes // 2, torch.bfloat16)
                    rows.append([name, gpu, world_size, "bf16", nbytes, "engine", "", f"{us:.2f}"])
        held = qra.comm.workspace_bytes
        before = free_bytes()
        stop()
        returned = free_bytes() - before
        res[f"{key}/closed"] = None if qra.comm is None else "destroy() left quickreduce open"
        res[f"{key}/memory returned"] = (None if returned >= 0.9 * held
                                         else f"{returned} bytes came back of the workspace's {held}")
    reference.close()
    if rank == 0:
        write_times(rows)
    for r in rows:
        res[f"info/time/{r[4]}/{r[5]}/{r[6]}"] = r[7]
    return res


def vllm_engine(rank, world_size):
    import contextlib

    os.environ["QUICKREDUCE_VLLM"] = "1"
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import parallel_state as ps
    from vllm.plugins import load_general_plugins

    import quickreduce.integrations.vllm as plugin
    lines = Lines(plugin.logger.name)
    res = {}
    load_general_plugins()
    res["entry point"] = None if plugin.is_registered() else "load_general_plugins() did not register the plugin"
    if not plugin.is_registered():
        plugin.register()
    config = VllmConfig()
    state = {}

    def start():
        with set_current_vllm_config(config):
            ps.init_distributed_environment(world_size, rank, "env://", rank, "nccl")
            ps.initialize_model_parallel(world_size)
        state["tp"] = ps.get_tp_group()

    def stop():
        ps.destroy_model_parallel()

    def attached():
        return getattr(state["tp"].device_communicator, "quickreduce", None)

    @contextlib.contextmanager
    def detach():
        comm = state["tp"].device_communicator
        saved, comm.quickreduce = comm.quickreduce, None
        try:
            yield
        finally:
            comm.quickreduce = saved

    res.update(run_engine("vllm", rank, world_size, start, stop, lambda x: state["tp"].all_reduce(x),
                          lambda: state["tp"].graph_capture(), attached, detach))
    res["info/log"] = lines.lines[:12]
    return res


def sglang_engine(rank, world_size):
    import contextlib

    os.environ["QUICKREDUCE_SGLANG"] = "1"
    from sglang.srt.distributed.parallel_state import GroupCoordinator
    from sglang.srt.plugins import load_plugins

    import quickreduce.integrations.sglang as plugin
    lines = Lines(plugin.logger.name)
    res = {}
    load_plugins()
    res["entry point"] = None if plugin.is_registered() else "load_plugins() did not register the plugin"
    state = {}

    def make(use_pynccl):
        return GroupCoordinator([list(range(world_size))], rank, "nccl", use_pynccl=use_pynccl, use_mscclpp=False,
                                use_custom_allreduce=False, use_torch_symm_mem_all_reduce=False,
                                use_hpu_communicator=False, use_xpu_communicator=False, group_name="tp")

    def start():
        try:
            state["tp"] = make(True)
        except Exception as e:  # noqa: BLE001 - the kit's NCCL may be older than SGLang's PyNccl wants
            res["info/pynccl"] = f"SGLang's PyNccl failed ({type(e).__name__}: {e}); its path is torch.distributed"
            state["tp"] = make(False)

    def stop():
        state["tp"].destroy()

    def attached():
        qr_comm = state["tp"].qr_comm
        return qr_comm.impl if isinstance(qr_comm, plugin.SGLangQuickReduce) else None

    @contextlib.contextmanager
    def detach():
        saved, state["tp"].qr_comm = state["tp"].qr_comm, None
        try:
            yield
        finally:
            state["tp"].qr_comm = saved

    res.update(run_engine("sglang", rank, world_size, start, stop, lambda x: state["tp"].all_reduce(x),
                          lambda: state["tp"].graph_capture(), attached, detach))
    res["info/log"] = lines.lines[:12]
    return res


# ---------------------------------------------------------------- pytest
@pytest.fixture(scope="module")
def results():
    started = time.time()
    out = harness.run_scenarios("test_engines_gpu", [s for s in SCENARIOS if _have(ENGINES[s])], WORLD,
                                env={"QR_TEST_HANG_DUMP_S": "1500"}, timeout_s=1700)
    print(f"engine scenarios took {time.time() - started:.0f} s")
    return out


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.gpu(WORLD)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_engine(results, scenario):
    if not _have(ENGINES[scenario]):
        if os.environ.get("QR_REQUIRE_ENGINES") == "1":
            pytest.fail(f"{ENGINES[scenario]} is not importable (the engine kit: docs/integrations.md)")
        pytest.skip(f"{ENGINES[scenario]} is not importable")
    harness.check_scenario(results, scenario)
