"""The engine plugins' shared part on the CPU (no engine needed): the planning API they route by
(``Communicator.plan``/``takes``, ``plan_all_reduce``), the router that sizes their workspace, the
opt-in and limit variables, and ``integrations.common.attach`` over two gloo ranks with a stand-in
Communicator: every misconfiguration ends in one log line and the engine's own path on every rank,
and every rank routes every size the same.

The stand-in (``StandInCommunicator``) is the real ``quickreduce.Communicator`` class with its planning
(``plan``, ``takes``, ``codec_for``, the tuning table) untouched; only what needs a GPU is replaced: the
workspace (nothing allocated), the handle exchange (checked, not mapped) and the sum (gloo's). The
engine tests (test_engine_plugins_vllm.py, test_engine_plugins_sglang.py) import it and the harness.
"""
from __future__ import annotations

import faulthandler
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import socket
import sys
import tempfile
import traceback
from datetime import timedelta
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import quickreduce
from quickreduce import _C, config, tuning
from quickreduce.comm import Communicator, Plan, plan_all_reduce
from quickreduce.integrations import common

KiB, MiB = 1 << 10, 1 << 20

# A table with NCCL at both ends, so a plugin must split calls three ways by size (and the workspace is
# sized to the largest taken size, below the 64 MiB limit).
SPLIT_TABLE = {
    "format": 2, "gpu": "cpu", "world_size": 2, "measured": True, "note": "plugin tests",
    "dtypes": {
        "bf16": [{"max_bytes": 65535, "lossless": "nccl", "lossy": {}},
                 {"max_bytes": 1048575, "lossless": "one_shot", "lossy": {}},
                 {"max_bytes": 16777215, "lossless": ["two_shot", "lossless"], "lossy": {"int4": ["two_shot", "int4"]}},
                 {"max_bytes": None, "lossless": "nccl", "lossy": {"int4": ["two_shot", "int4"]}}],
        "fp16": [{"max_bytes": 4194303, "lossless": "one_shot", "lossy": {}},
                 {"max_bytes": 33554431, "lossless": "two_shot", "lossy": {"int4": ["two_shot", "int4"]}},
                 {"max_bytes": None, "lossless": "nccl", "lossy": {"int4": ["two_shot", "int4"]}}],
    },
}
NCCL_TABLE = {"format": 2, "gpu": "cpu", "world_size": 2,
              "dtypes": {"bf16": [{"max_bytes": None, "lossless": "nccl", "lossy": {}}]}}


def split_table_takes(nbytes: int, dtype: torch.dtype) -> bool:
    """SPLIT_TABLE's routing with an exact codec and the default 64 MiB limit, written out by hand."""
    if dtype == torch.bfloat16:
        return 65536 <= nbytes <= 16777215
    if dtype == torch.float16:
        return 1 <= nbytes <= 33554431
    return False


# Sizes every rank routes (bytes): across each breakpoint, odd sizes, the limit.
SWEEP = sorted({1, 2, 16, 8 * KiB, 65534, 65535, 65536, 65537, MiB - 1, MiB, 4 * MiB - 1, 4 * MiB, 8 * MiB,
                8 * MiB + 2, 16 * MiB - 1, 16 * MiB, 32 * MiB - 1, 32 * MiB, 32 * MiB + 16, 64 * MiB, 64 * MiB + 16,
                1 << 30})


def write_table(path: str, table: dict) -> str:
    with open(path, "w") as f:
        json.dump(table, f)
    return path


# ---------------------------------------------------------------- the stand-in Communicator
class StandInCommunicator(Communicator):
    """``quickreduce.Communicator`` without a GPU (module docstring). Built as ``common.make_communicator``
    is called. Failures on a chosen rank come from the environment: ``QR_TEST_FAIL_CREATE``,
    ``QR_TEST_FAIL_CONNECT`` (a rank number), ``QR_TEST_WRONG_SUM`` (that rank's sums are off by one)."""

    created: list = []

    def __init__(self, rank, world_size, max_size, device, codec, cpu_group):  # noqa: D107 - no super(): no GPU
        if os.environ.get("QR_TEST_FAIL_CREATE") == str(rank):
            raise _C.CudaError("simulated: cudaMalloc of the workspace: out of memory")
        self.rank, self.world_size, self.group, self.device = rank, world_size, None, device
        self.max_size = (int(max_size) + 15) // 16 * 16
        self.default_codec = codec
        self.codecs = {c: codec for c in config.COLLECTIVES}
        self._table = tuning.load_table("cpu", world_size)
        self._c = SimpleNamespace(one_shot_max_bytes=_C.one_shot_max_bytes(world_size),
                                  workspace_bytes=_C.workspace_bytes(world_size, self.max_size))
        self._cpu_group = cpu_group
        self.connected = False
        self.calls: list = []
        StandInCommunicator.created.append(self)

    def peer_info(self) -> dict:
        return {"host": socket.gethostname(), "max_size": self.max_size, "rank": self.rank}

    def connect(self, everyone) -> None:
        if os.environ.get("QR_TEST_FAIL_CONNECT") == str(self.rank):
            raise _C.QuickReduceError("simulated: cudaIpcOpenMemHandle failed")
        assert [e["rank"] for e in everyone] == list(range(self.world_size))
        assert len({e["max_size"] for e in everyone}) == 1
        self.connected = True

    def all_reduce(self, x, out=None, codec=None, algo="auto", *, op="sum", async_op=False):
        assert self._c is not None, "all_reduce on a closed communicator"
        assert self.connected, "all_reduce before connect"
        nbytes = x.numel() * x.element_size()
        plan = self.plan(nbytes, x.dtype, codec)
        assert plan.takes, f"the plugin sent {nbytes} bytes of {x.dtype} that the plan does not take: {plan}"
        assert x.is_contiguous() and x.data_ptr() % 16 == 0, "the plugin sent an unaligned or strided tensor"
        out = torch.empty_like(x) if out is None else out
        out.copy_(x)
        dist.all_reduce(out, group=self._cpu_group)
        if os.environ.get("QR_TEST_WRONG_SUM") == str(self.rank):
            out.add_(1)
        self.calls.append((nbytes, str(x.dtype).replace("torch.", ""), plan.algo, plan.codec))
        return out

    def check(self) -> None:
        pass

    def close(self) -> None:
        self._c = None

    @property
    def closed(self) -> bool:
        return self._c is None


def require_engine(engine: str) -> None:
    """Skip the calling engine-test module where ``engine`` is not installed; under
    ``QR_REQUIRE_ENGINES=1`` (CI, which installs both) a missing engine is an error instead."""
    if importlib.util.find_spec(engine) is None:
        if os.environ.get("QR_REQUIRE_ENGINES") == "1":
            raise ImportError(f"QR_REQUIRE_ENGINES=1 but {engine} is not installed (.ci/run installs it)")
        pytest.skip(f"{engine} is not installed (QR_REQUIRE_ENGINES=1 makes this an error)", allow_module_level=True)


def prepare_with_split_table(rank, W, out_dir) -> None:
    """An engine module's per-rank set-up: the stand-in Communicator and SPLIT_TABLE as the tuning table
    (one file a rank: a shared file raced)."""
    use_stand_in()
    os.environ["QUICKREDUCE_TUNE_FILE"] = write_table(os.path.join(out_dir, f"split{rank}.json"), SPLIT_TABLE)


def use_stand_in() -> None:
    common.make_communicator = StandInCommunicator


class LogLines(logging.Handler):
    """The records of the loggers it is attached to, as text."""

    def __init__(self, *names):
        super().__init__(logging.DEBUG)
        self.lines: list = []
        for name in names:
            lg = logging.getLogger(name)
            lg.addHandler(self)
            lg.setLevel(logging.DEBUG)

    def emit(self, record):
        self.lines.append((record.levelname, record.getMessage()))

    def take(self, level=None) -> list:
        lines = [m for lvl, m in self.lines if level is None or lvl == level]
        self.lines.clear()
        return lines


# ---------------------------------------------------------------- the two-rank harness
def check(cond, message) -> None:
    if not cond:
        raise AssertionError(message)


def _worker(rank, W, init, out_dir, module_name, scenarios, env):
    faulthandler.dump_traceback_later(280, exit=True)
    os.environ.update(env.get("all", {}))
    os.environ.update(env.get(str(rank), {}))
    module = importlib.import_module(module_name)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=W, timeout=timedelta(seconds=120))
    if hasattr(module, "prepare"):
        module.prepare(rank, W, out_dir)
    results = {}

    def save():
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(results, f, default=str)

    for name in scenarios:
        try:
            for k, v in (getattr(module, "scenario_" + name)(rank, W, out_dir) or {}).items():
                results[f"{name}/{k}"] = v
            results.setdefault(f"{name}/ok", None)
        except Exception:  # noqa: BLE001
            # The ranks may now be at different collectives: report and leave, so the peer's next
            # collective fails at once instead of waiting out gloo's timeout.
            results[f"{name}/<crashed>"] = "FAIL " + traceback.format_exc()
            save()
            os._exit(1)
        dist.barrier()
    save()
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


def spawn_ranks(module_name: str, scenarios: list, W: int = 2, env: dict | None = None, timeout: float = 300) -> dict:
    """Run ``scenario_<name>(rank, W, out_dir)`` of ``module_name`` for each name on W spawned gloo ranks, in
    order; returns ``{"<scenario>/<key>": {rank: value}}``. A value starting with "FAIL" is a failure; any
    other value must be the same on every rank."""
    out_dir = tempfile.mkdtemp(prefix="qr-engine-")
    env = dict(env or {})
    env.setdefault("all", {})
    env["all"] = {"XDG_CACHE_HOME": out_dir, **env["all"]}
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(r, W, f"file://{out_dir}/store", out_dir, module_name, scenarios, env))
             for r in range(W)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    for p in procs:
        if p.is_alive():
            p.kill()
    merged: dict = {}
    for r in range(W):
        path = os.path.join(out_dir, f"rank{r}.json")
        if not os.path.exists(path):
            merged.setdefault("<worker>/exit", {})[r] = f"FAIL rank {r} wrote no results (exit code {procs[r].exitcode})"
            continue
        with open(path) as f:
            for k, v in json.load(f).items():
                merged.setdefault(k, {})[r] = v
    return merged


def assert_scenario(results: dict, scenario: str, W: int = 2) -> None:
    crashed = {k: v for k, v in results.items() if k.endswith("/<crashed>") or k.startswith("<worker>/")}
    assert not crashed, "\n".join(f"{k}: {v}" for k, v in crashed.items())
    mine = {k: v for k, v in results.items() if k.startswith(scenario + "/")}
    assert mine, f"scenario {scenario} produced no results"
    problems = []
    for key, per_rank in mine.items():
        if len(per_rank) != W:
            problems.append(f"{key}: only ranks {sorted(per_rank)} reported")
        fails = {r: v for r, v in per_rank.items() if isinstance(v, str) and v.startswith("FAIL")}
        if fails:
            problems.append(f"{key}: {fails}")
        elif len({json.dumps(v, sort_keys=True) for v in per_rank.values()}) > 1:
            problems.append(f"{key} differs between ranks: {per_rank}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- what the engine tests share
def ensure_entry_points(out_dir: str, group: str) -> str:
    """'installed' when quickreduce's distribution declares the engine entry points; else (a source
    checkout on PYTHONPATH) a distribution holding pyproject.toml's entry-point tables is put on sys.path,
    so the engine's discovery still runs on what the package declares: 'pyproject.toml'."""
    names = {ep.name for ep in importlib.metadata.entry_points(group=group)}
    if "quickreduce" in names:
        return "installed"
    import tomllib
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        eps = tomllib.load(f)["project"]["entry-points"]
    info = os.path.join(out_dir, "eps", "quickreduce_engine_plugins-0.0.0.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: quickreduce-engine-plugins\nVersion: 0.0.0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        for group, entries in eps.items():
            f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n")
    sys.path.append(os.path.join(out_dir, "eps"))
    importlib.invalidate_caches()
    return "pyproject.toml"


SAMPLES = [  # (name, numel, dtype, contiguous)
    ("bf16 16 B", 8, torch.bfloat16, True), ("bf16 64 KiB", 32 * KiB, torch.bfloat16, True),
    ("bf16 2 MiB", MiB, torch.bfloat16, True), ("bf16 16 MiB", 8 * MiB, torch.bfloat16, True),
    ("fp16 16 B", 8, torch.float16, True), ("fp16 8 MiB", 4 * MiB, torch.float16, True),
    ("fp16 32 MiB", 16 * MiB, torch.float16, True), ("fp32 4 KiB", KiB, torch.float32, True),
    ("bf16 strided", 64 * KiB, torch.bfloat16, False),
]


def run_samples(all_reduce, rank, W) -> dict:
    """Each sample through ``all_reduce``; the sums checked (small integers: exact in every dtype)."""
    out = {}
    for name, numel, dtype, contiguous in SAMPLES:
        base = (torch.arange(numel * (2 if not contiguous else 1)) % 5).to(dtype) + rank
        x = base if contiguous else base[::2]
        expect = sum(x.float() - rank + r for r in range(W))
        got = all_reduce(x)
        out[name] = None if torch.equal(got.float(), expect) else f"FAIL wrong sum for {name}"
    return out


def expected_calls() -> list:
    return [[numel * torch.empty((), dtype=dtype).element_size(), str(dtype).replace("torch.", "")]
            for _, numel, dtype, contiguous in SAMPLES
            if contiguous and split_table_takes(numel * torch.empty((), dtype=dtype).element_size(), dtype)]


# ---------------------------------------------------------------- planning API (one process)
@pytest.fixture
def split_table(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", write_table(str(tmp_path / "split.json"), SPLIT_TABLE))
    return tuning.load_table("cpu", 2)


def _comm(table, max_size=64 * MiB, codec="fp16", group=None):
    c = object.__new__(Communicator)  # only what plan() reads: no GPU
    c._c = SimpleNamespace(one_shot_max_bytes=8 * MiB)
    c._table, c.group, c.device, c.world_size, c.max_size = table, group, 0, 2, max_size
    c.codecs = {k: codec for k in config.COLLECTIVES}
    return c


def test_plan_is_a_frozen_dataclass(split_table):
    p = _comm(split_table).plan(MiB, torch.bfloat16)
    assert p == Plan(True, "two_shot", "lossless", True) and hash(p)
    with pytest.raises(Exception):
        p.takes = False


def test_plan_follows_the_table_and_the_limit(split_table):
    c = _comm(split_table, max_size=32 * MiB)
    assert c.plan(8 * KiB, torch.bfloat16) == Plan(False, "nccl", "fp16", True, "the tuning table has NCCL fastest at this size")
    assert c.plan(64 * KiB, torch.bfloat16) == Plan(True, "one_shot", "fp16", True)
    assert c.plan(64 * KiB, torch.float16) == Plan(True, "one_shot", "fp16", True)
    assert c.plan(8 * MiB, torch.float16) == Plan(True, "two_shot", "fp16", True)  # lossless packs bf16 only
    assert not c.plan(16 * MiB, torch.bfloat16).takes  # nccl above 16 MiB
    over = c.plan(32 * MiB + 16, torch.float16, "int4")
    assert not over.takes and over.algo == "two_shot" and over.codec == "int4" and "max_size" in over.reason
    assert c.plan(32 * MiB, torch.bfloat16, "auto:int4") == Plan(True, "two_shot", "int4", False)
    assert c.plan(MiB, torch.bfloat16, "int8") == Plan(True, "two_shot", "int8", False)  # a named codec: always it


def test_plan_other_dtypes(split_table):
    c = _comm(split_table)
    fp32 = c.plan(4 * MiB, torch.float32)
    assert fp32.takes and fp32.algo == "reduce_scatter+all_gather" and fp32.exact
    assert not c.plan(80 * MiB, torch.float32).takes
    assert c.plan(4, torch.float32, "auto:int4").codec == "auto:int4"
    p = c.plan(1024, torch.int32)
    assert not p.takes and "dtype" in p.reason


def test_plan_rejects_what_all_reduce_rejects(split_table):
    c = _comm(split_table)
    with pytest.raises(ValueError, match="unknown codec"):
        c.plan(MiB, torch.bfloat16, "int3")
    with pytest.raises(ValueError, match="algo"):
        c.plan(MiB, torch.bfloat16, algo="three_shot")
    with pytest.raises(ValueError, match="passthrough only"):
        c.plan(MiB, torch.bfloat16, "int4", algo="one_shot")


def test_launch_plan_keeps_its_rules(split_table):
    """_plan (what a launch runs) is plan_all_reduce without the size limit; a table choice of NCCL runs
    the two-shot without a group, NCCL with one."""
    assert _comm(split_table)._plan(8 * KiB, torch.bfloat16, "fp16", "auto") == ("two_shot", "fp16")
    assert _comm(split_table, group=object())._plan(8 * KiB, torch.bfloat16, "fp16", "auto") == ("nccl", "fp16")
    with pytest.raises(ValueError, match="process group"):
        _comm(split_table)._plan(MiB, torch.bfloat16, "fp16", "nccl")
    assert _comm(split_table, max_size=16)._plan(MiB, torch.bfloat16, "fp16", "auto") == ("two_shot", "lossless")


def test_takes_needs_a_tensor_on_the_communicators_gpu(split_table):
    c = _comm(split_table)
    assert not c.takes(torch.zeros(32 * KiB, dtype=torch.bfloat16))  # a CPU tensor
    assert not c.takes("not a tensor")


def test_plan_all_reduce_needs_no_communicator(split_table):
    p = plan_all_reduce(MiB, torch.bfloat16, "auto", table=split_table, world_size=2, max_size=64 * MiB)
    assert p == Plan(True, "two_shot", "lossless", True)
    assert plan_all_reduce(MiB, torch.bfloat16, "auto", table=split_table, world_size=2, max_size=MiB - 16).takes is False


# ---------------------------------------------------------------- router, variables
def test_router_segments_and_workspace_size(split_table):
    r = common.Router("fp16", 2, split_table, _C.one_shot_max_bytes(2))
    segs = [(s.lo, s.hi, s.takes, s.algo, s.codec) for s in r.segments(torch.bfloat16, 64 * MiB)]
    assert segs == [(1, 65535, False, "nccl", "fp16"), (65536, 1048575, True, "one_shot", "fp16"),
                    (1048576, 16777215, True, "two_shot", "lossless"), (16777216, 64 * MiB, False, "nccl", "fp16")]
    assert r.largest_taken(64 * MiB) == 33554431  # fp16's two-shot reaches further than bf16's
    assert r.largest_taken(MiB) == MiB
    for dtype in common.ROUTED_DTYPES:
        for n in SWEEP:
            assert r.plan(n, dtype).takes == split_table_takes(n, dtype) or n > 33554431, (n, dtype)


def test_workspace_covers_a_padded_route(tmp_path, monkeypatch):
    """The reduce-scatter + all-gather route pads a message to W equal chunks: the workspace grows past the
    largest size taken so that the plan still takes it (the routing itself stops at that size)."""
    table = {"format": 2, "gpu": "cpu", "world_size": 4,
             "dtypes": {"bf16": [{"max_bytes": 1048575, "lossless": "one_shot", "lossy": {}},
                                 {"max_bytes": None, "lossless": "rs_ag", "lossy": {}}]}}
    monkeypatch.setenv("QUICKREDUCE_TUNE_FILE", write_table(str(tmp_path / "rs.json"), table))
    r = common.Router("fp16", 4, tuning.load_table("cpu", 4), _C.one_shot_max_bytes(4))
    largest = r.largest_taken(5_000_000)
    assert largest == 5_000_000
    size = common.workspace_size(r, largest)
    assert largest < size <= largest + 4096 and size % 16 == 0
    import dataclasses
    assert not dataclasses.replace(r, max_size=largest).plan(largest, torch.bfloat16).takes  # padded: over
    assert dataclasses.replace(r, max_size=size).plan(largest, torch.bfloat16).takes
    assert common.workspace_size(r, 4 * MiB) == 4 * MiB  # W equal chunks already


def test_describe_routes(split_table):
    r = common.Router("fp16", 2, split_table, _C.one_shot_max_bytes(2), max_size=32 * MiB)
    text = common.describe_routes(r, 32 * MiB)
    assert text == ("bf16 64 KiB-1024 KiB one_shot fp16, 1 MiB-16 MiB two_shot lossless; "
                    "fp16 1 B-4 MiB one_shot fp16, 4 MiB-32 MiB two_shot fp16")


def test_enabled_variable(monkeypatch):
    lines = LogLines("qr-test-enabled")
    log = logging.getLogger("qr-test-enabled")
    for raw, on in (("1", True), ("true", True), ("ON", True), ("", False), ("0", False), ("no", False)):
        monkeypatch.setenv("QUICKREDUCE_VLLM", raw)
        assert common.enabled("QUICKREDUCE_VLLM", log) is on
    assert lines.take() == []
    monkeypatch.setenv("QUICKREDUCE_VLLM", "2")
    assert common.enabled("QUICKREDUCE_VLLM", log) is False
    assert len(lines.take("WARNING")) == 1
    monkeypatch.delenv("QUICKREDUCE_VLLM")
    assert common.enabled("QUICKREDUCE_VLLM", log) is False


def test_engine_max_size_variable(monkeypatch):
    monkeypatch.delenv(common.ENGINE_MAX_SIZE_ENV, raising=False)
    assert common.engine_max_size_bytes() == 64 * MiB
    monkeypatch.setenv(common.ENGINE_MAX_SIZE_ENV, "8.5")
    assert common.engine_max_size_bytes() == int(8.5 * MiB)
    for bad in ("abc", "0", "-1"):
        monkeypatch.setenv(common.ENGINE_MAX_SIZE_ENV, bad)
        with pytest.raises(ValueError, match=common.ENGINE_MAX_SIZE_ENV):
            common.engine_max_size_bytes()


def test_engine_codec_makes_a_named_lossy_codec_a_bound():
    assert [common.engine_codec(c) for c in ("fp16", "bf16", "lossless", "auto", "auto:fp8", "int8", "INT4H", "fp8")] == \
        ["fp16", "bf16", "lossless", "auto", "auto:fp8", "auto:int8", "auto:int4h", "auto:fp8"]
    with pytest.raises(ValueError):
        common.engine_codec("int3")


def test_workspace_at_the_default_limit_is_far_below_the_communicators_default():
    """What the limit buys (docs/integrations.md): at W=2, 64 MiB costs about half of 128 MiB's workspace."""
    assert _C.workspace_bytes(2, 64 * MiB) < 0.6 * _C.workspace_bytes(2, 128 * MiB)


# ---------------------------------------------------------------- attach over two gloo ranks
def prepare(rank, W, out_dir):
    use_stand_in()


def _attach(rank, **kw):
    group = dist.group.WORLD
    return common.attach("TestEngine", "tp:0", group, torch.device("cpu"), **kw)


def _refused(rank, lines, qr, expect) -> dict:
    """Every rank refuses; rank 0 logs one warning naming the cause; every stand-in made is closed."""
    warnings = lines.take("WARNING")
    made_open = [c for c in StandInCommunicator.created if not c.closed]
    StandInCommunicator.created.clear()
    ok = (qr is None and not made_open and (len(warnings) == (1 if rank == 0 else 0))
          and all(expect in w and "own all-reduce runs every size" in w for w in warnings))
    return {"refused": None if ok else f"FAIL qr={qr!r} open={made_open} warnings={warnings} (expected {expect!r})"}


def scenario_routes(rank, W, out_dir):
    os.environ["QUICKREDUCE_TUNE_FILE"] = write_table(os.path.join(out_dir, f"split{rank}.json"), SPLIT_TABLE)
    lines = LogLines(common.__name__)
    qr = _attach(rank)
    check(qr is not None, f"attach refused: {lines.lines}")
    info = lines.take("INFO")
    check(len(info) == (1 if rank == 0 else 0), f"log lines: {info}")
    if rank == 0:
        check("takes bf16 64 KiB-1024 KiB one_shot fp16" in info[0] and "workspace" in info[0], info[0])
    check(qr.comm.max_size == 32 * MiB, f"workspace sized to {qr.comm.max_size}")
    warm = list(qr.comm.calls)
    check(len(warm) == 4, f"warm-up calls {warm}")  # one per taken route: bf16 one/two-shot, fp16 one/two-shot
    qr.comm.calls.clear()
    decisions = {f"{d}/{n}": qr.route(n, d) for d in (torch.bfloat16, torch.float16) for n in SWEEP}
    wrong = {k: v for k, v in decisions.items()
             if v != split_table_takes(int(k.split("/")[1]), getattr(torch, k.split("/")[0].split(".")[1]))}
    out = {"decisions": decisions, "as_written": None if not wrong else f"FAIL {wrong}"}
    # calls: a taken size, an engine size, a misaligned view (taken through a copy), a strided one (not taken)
    base = (torch.arange(32 * KiB + 1) % 7).to(torch.bfloat16) + rank  # small integers: every sum exact
    view = base[1:]  # 64 KiB at an address 2 bytes past an aligned one
    strided = torch.ones(64 * KiB, dtype=torch.bfloat16)[::2]
    for name, x, taken in (("64K", base[:32 * KiB].clone(), True), ("16B", torch.ones(8, dtype=torch.bfloat16), False),
                           ("view", view, True), ("strided", strided, False),
                           ("fp32", torch.ones(1024), False), ("fp16-8M", torch.ones(4 * MiB, dtype=torch.float16) + rank, True)):
        check(qr.takes(x) == taken, f"{name}: takes={qr.takes(x)}")
        if taken:
            got = qr.all_reduce(x)
            expect = x.float() * 0 + sum((x.float() - rank + r) for r in range(W))
            check(torch.equal(got.float(), expect), f"{name}: wrong sum")
    out["calls"] = [c[:2] for c in qr.comm.calls]
    comm = qr.comm
    qr.close()
    qr.close()
    check(comm.closed and qr.comm is None and not qr.takes(base), "close")
    StandInCommunicator.created.clear()
    return out


def scenario_refusals(rank, W, out_dir):
    os.environ["QUICKREDUCE_TUNE_FILE"] = write_table(os.path.join(out_dir, f"split{rank}.json"), SPLIT_TABLE)
    lines = LogLines(common.__name__)
    out = {}

    def case(name, expect, env=None, **kw):
        saved = {k: os.environ.get(k) for k in (env or {})}
        os.environ.update({k: v for k, v in (env or {}).items() if v is not None})
        try:
            out[name] = _refused(rank, lines, _attach(rank, **kw), expect)["refused"]
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        dist.barrier()

    mine = lambda value: value if rank == 1 else None  # noqa: E731 - a setting on rank 1 only
    case("codec mismatch", "ranks disagree on QUICKREDUCE_QUANTIZATION", {"QUICKREDUCE_QUANTIZATION": mine("INT4")})
    case("bad codec", "rank 1 could not read its settings", {"QUICKREDUCE_QUANTIZATION": mine("INT3")})
    case("bad limit", "rank 1 could not read its settings", {common.ENGINE_MAX_SIZE_ENV: mine("lots")})
    case("limit mismatch", "ranks disagree on the workspace size", {common.ENGINE_MAX_SIZE_ENV: mine("1")})
    case("create fails", "rank 1 could not allocate its workspace", {"QR_TEST_FAIL_CREATE": "1"})
    case("connect fails", "rank 0 could not map its peers", {"QR_TEST_FAIL_CONNECT": "0"})
    case("wrong warm-up sum", "rank 1 could not run the warm-up", {"QR_TEST_WRONG_SUM": "1"})
    case("lossy where exact is required", "batch-invariant", {"QUICKREDUCE_QUANTIZATION": "auto:int4"},
         require_exact=True)
    case("NCCL everywhere", "NCCL fastest at every size",
         {"QUICKREDUCE_TUNE_FILE": write_table(os.path.join(out_dir, f"nccl{rank}.json"), NCCL_TABLE)})
    real_version, real_host = quickreduce.__version__, socket.gethostname
    try:
        if rank == 1:
            quickreduce.__version__ = "0.0.0-other"
        case("version mismatch", "ranks run different quickreduce versions")
        quickreduce.__version__ = real_version
        if rank == 1:
            socket.gethostname = lambda: "another-host"
        case("several hosts", "the group spans several hosts")
    finally:
        quickreduce.__version__, socket.gethostname = real_version, real_host
    # and after all of that, a correct set-up still works
    qr = _attach(rank)
    out["works after"] = None if qr is not None else f"FAIL {lines.lines}"
    if qr is not None:
        qr.close()
    StandInCommunicator.created.clear()
    return out


def scenario_hint_and_codec(rank, W, out_dir):
    """The engine's hint caps the workspace; a lossy codec named in QUICKREDUCE_QUANTIZATION is a bound
    (the table's fastest method at most that lossy); the limit variable caps the workspace."""
    os.environ["QUICKREDUCE_TUNE_FILE"] = write_table(os.path.join(out_dir, f"split{rank}.json"), SPLIT_TABLE)
    out = {}
    qr = _attach(rank, max_bytes_hint=2 * MiB)
    out["hint"] = [qr.comm.max_size, qr.route(2 * MiB, torch.float16), qr.route(2 * MiB + 2, torch.float16)]
    qr.close()
    os.environ["QUICKREDUCE_QUANTIZATION"] = "INT4"
    os.environ[common.ENGINE_MAX_SIZE_ENV] = "48"
    qr = _attach(rank)
    out["int4"] = [qr.comm.max_size, qr.codec, qr.route(16, torch.bfloat16), qr.route(64 * KiB, torch.bfloat16),
                   qr.route(48 * MiB, torch.bfloat16), qr.route(48 * MiB + 16, torch.bfloat16),
                   sorted({c[2:] for c in qr.comm.calls})]
    qr.close()
    del os.environ["QUICKREDUCE_QUANTIZATION"], os.environ[common.ENGINE_MAX_SIZE_ENV]
    StandInCommunicator.created.clear()
    return out


ATTACH_SCENARIOS = ["routes", "refusals", "hint_and_codec"]


@pytest.fixture(scope="module")
def attach_results():
    return spawn_ranks(__name__, ATTACH_SCENARIOS, env={"all": {"QUICKREDUCE_QUANTIZATION": "FP"}})


@pytest.mark.parametrize("scenario", ATTACH_SCENARIOS)
def test_attach_two_ranks(attach_results, scenario):
    assert_scenario(attach_results, scenario)


def test_attach_values(attach_results):
    calls = attach_results["routes/calls"][0]
    assert calls == [[64 * KiB, "bfloat16"], [64 * KiB, "bfloat16"], [8 * MiB, "float16"]]
    assert attach_results["hint_and_codec/hint"][0] == [2 * MiB, True, False]
    # INT4 is the bound auto:int4: the table's exact method below its lossy breakpoints (NCCL under 64 KiB:
    # the engine's), int4 above; the workspace reaches the limit (int4 is taken up to it)
    assert attach_results["hint_and_codec/int4"][0] == [48 * MiB, "auto:int4", False, True, True, False,
                                                        [["one_shot", "fp16"], ["two_shot", "int4"]]]
