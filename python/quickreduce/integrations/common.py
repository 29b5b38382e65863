"""What the engine plugins share: the opt-in, the routing, the workspace size and the collective set-up.

An engine's tensor-parallel group gets an ``EngineAllReduce`` from ``attach()``, or None, in which case
the engine's own all-reduce runs everything, exactly as without the plugin. ``attach`` is collective
over the group's CPU (gloo) group and every rank reaches the same outcome: each step (reading the
settings, allocating the workspace, mapping the peers, a warm-up call of every route) reports success
or failure to every rank before the next begins, so no rank waits for one that gave up.

Routing (``EngineAllReduce.takes``) is a pure function of what every rank of an SPMD program shares:
size, dtype and codec through ``Communicator.plan``, plus the tensor's device and contiguity. Never a
pointer: a tensor whose data is not 16-byte aligned is taken and reduced from an aligned copy.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import socket
from typing import Any, Callable, Optional

import torch

ENGINE_MAX_SIZE_ENV = "QUICKREDUCE_ENGINE_MAX_SIZE_MB"
DEFAULT_ENGINE_MAX_SIZE_MB = 64
ROUTED_DTYPES = (torch.bfloat16, torch.float16)  # the all-reduce kernels' dtypes (float32 stays with the engine)
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------- settings
def enabled(variable: str, log: Optional[logging.Logger] = None) -> bool:
    """Whether the opt-in variable is set to 1 (true/yes/on). Any other value than those and 0/false/no/off
    (or unset) is off, with one warning line: a typo never turns quickreduce on."""
    raw = os.environ.get(variable, "").strip().lower()
    if raw in _ON:
        return True
    if raw not in _OFF:
        (log or logger).warning("quickreduce: %s=%r is not 0 or 1; the plugin stays off", variable,
                                os.environ[variable])
    return False


def engine_max_size_bytes() -> int:
    """The largest all-reduce (bytes) an engine plugin hands to quickreduce: ``QUICKREDUCE_ENGINE_MAX_SIZE_MB``
    (default 64). The workspace is sized to it (or to less where the engine or the tuning table needs
    less); larger all-reduces take the engine's own path."""
    raw = os.environ.get(ENGINE_MAX_SIZE_ENV, "").strip()
    if raw == "":
        mb = float(DEFAULT_ENGINE_MAX_SIZE_MB)
    else:
        try:
            mb = float(raw)
        except ValueError:
            raise ValueError(f"{ENGINE_MAX_SIZE_ENV}={raw!r} is not a number") from None
        if not mb > 0:
            raise ValueError(f"{ENGINE_MAX_SIZE_ENV}={raw!r} must be positive")
    return int(mb * (1 << 20)) // 16 * 16


def engine_codec(codec: str) -> str:
    """The codec an engine plugin plans with, from QUICKREDUCE_QUANTIZATION's: a lossy codec named alone
    (``INT8``) becomes the bound ``auto:int8``, the tuning table's fastest method at most that lossy at each
    size: the exact one-shot where it is faster than the codec (small messages), the codec or a more
    accurate one where that is faster. Exact codecs and ``auto``/``auto:<codec>`` stay as they are."""
    from .. import codecs, ops
    lowered = codec.lower()
    is_auto, requested = codecs.parse_codec_request(lowered)
    if is_auto or lowered in ops.EXACT_CODECS:
        return lowered
    return codecs.AUTO_PREFIX + requested


def format_bytes(n: int) -> str:
    """1536 -> '1.5 KiB', 5931641 -> '5.657 MiB', 16777215 -> '16 MiB' (four significant digits)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} B"


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype).replace("torch.", ""))


# ---------------------------------------------------------------- routing
@dataclasses.dataclass(frozen=True)
class Segment:
    """Sizes ``lo..hi`` bytes (inclusive) of one dtype that plan the same."""
    dtype: torch.dtype
    lo: int
    hi: int
    takes: bool
    algo: str
    codec: str
    exact: bool

    def describe(self) -> str:
        what = f"{self.algo} {self.codec}" if self.takes else f"engine ({self.algo or 'not taken'})"
        return f"{format_bytes(self.lo)}-{format_bytes(self.hi)} {what}"


@dataclasses.dataclass(frozen=True)
class Router:
    """The routing of one group before its communicator exists (to size the workspace): the same planner
    as ``Communicator.plan`` (``quickreduce.comm.plan_all_reduce``), with the group's codec, world size and
    tuning table. ``max_size`` None plans without a size limit."""
    codec: str
    world_size: int
    table: Any = dataclasses.field(compare=False, repr=False)
    one_shot_max_bytes: int = 0
    max_size: Optional[int] = None

    def plan(self, nbytes: int, dtype: torch.dtype):
        from ..comm import plan_all_reduce
        return plan_all_reduce(nbytes, dtype, self.codec, table=self.table, world_size=self.world_size,
                               max_size=self.max_size, one_shot_max_bytes=self.one_shot_max_bytes)

    def segments(self, dtype: torch.dtype, upto: int) -> list[Segment]:
        """Sizes 1..upto bytes of ``dtype`` cut where the plan may change (the table's breakpoints, the
        one-shot's limit), neighbours that plan the same merged."""
        from .. import tuning
        entries = self.table.dtypes.get(tuning.dtype_name(dtype)) or next(iter(self.table.dtypes.values()))
        cuts = {e["max_bytes"] for e in entries if e["max_bytes"] is not None and e["max_bytes"] < upto}
        if self.one_shot_max_bytes < upto:
            cuts.add(self.one_shot_max_bytes)
        out: list[Segment] = []
        lo = 1
        for hi in sorted(cuts | {upto}):
            if hi < lo:
                continue
            p = self.plan(hi, dtype)
            seg = Segment(dtype, lo, hi, p.takes, p.algo, p.codec, p.exact)
            if out and (out[-1].takes, out[-1].algo, out[-1].codec) == (seg.takes, seg.algo, seg.codec):
                out[-1] = dataclasses.replace(out[-1], hi=hi)
            else:
                out.append(seg)
            lo = hi + 1
        return out

    def largest_taken(self, upto: int) -> int:
        """The largest size up to ``upto`` bytes that quickreduce takes in some routed dtype (0: none)."""
        return max((s.hi for d in ROUTED_DTYPES for s in self.segments(d, upto) if s.takes), default=0)


def workspace_size(router: Router, largest: int) -> int:
    """The Communicator's max_size for taking every size up to ``largest`` that the plan takes: rounded to 16
    bytes as the Communicator rounds it, and grown where a route pads the message (the reduce-scatter +
    all-gather route pads it to W equal chunks) until the plan takes the largest size of each segment."""
    size = (largest + 15) // 16 * 16
    for _ in range(8):
        limited = dataclasses.replace(router, max_size=size)
        short = [s for d in ROUTED_DTYPES for s in router.segments(d, largest)
                 if s.takes and not limited.plan(s.hi, d).takes]
        if not short:
            return size
        size += (router.world_size * 256 + 15) // 16 * 16
    return size


def make_router(codec: str, world_size: int, device: torch.device) -> Router:
    """The group's router without a size limit: the tuning table of this GPU model and world size."""
    from .. import _C, tuning
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return Router(codec=codec, world_size=world_size, table=tuning.load_table(gpu, world_size),
                  one_shot_max_bytes=_C.one_shot_max_bytes(world_size))


def describe_routes(router: Router, max_size: int) -> str:
    """'bf16 1 B-5.66 MiB one_shot fp16, 5.66 MiB-64 MiB two_shot lossless; fp16 ...' (the taken sizes)."""
    parts = []
    for dtype in ROUTED_DTYPES:
        taken = [s.describe() for s in router.segments(dtype, max_size) if s.takes]
        parts.append(f"{_dtype_name(dtype)} " + (", ".join(taken) if taken else "none"))
    return "; ".join(parts)


# ---------------------------------------------------------------- the attached all-reduce
class EngineAllReduce:
    """quickreduce in one engine group: ``takes(x)`` says whether quickreduce reduces ``x``, ``all_reduce(x)``
    returns the sum in a new tensor. After ``close()`` it takes nothing, so the engine's path runs
    everything."""

    def __init__(self, comm, device: torch.device, engine: str, group_name: str, codec: str,
                 limit: Optional[int] = None):
        self.comm = comm
        self.device = device
        self.limit = limit if limit is not None else comm.max_size  # the largest size taken (bytes)
        self.engine, self.group_name, self.codec = engine, group_name, codec
        self.calls = 0  # all-reduces taken (a CUDA graph counts its capture, not its replays)
        self._routes: dict = {}

    @property
    def disabled(self) -> bool:
        return self.comm is None

    def route(self, nbytes: int, dtype: torch.dtype) -> bool:
        """Whether quickreduce takes a contiguous all-reduce of ``nbytes`` bytes of ``dtype`` on this group's
        device (``Communicator.plan``; remembered per size and dtype)."""
        key = (nbytes, dtype)
        where = self._routes.get(key)
        if where is None:
            if len(self._routes) >= 4096:
                self._routes.clear()
            where = self._routes[key] = (dtype in ROUTED_DTYPES and 0 < nbytes <= self.limit
                                         and bool(self.comm.plan(nbytes, dtype, self.codec).takes))
        return where

    def takes(self, x: torch.Tensor) -> bool:
        if self.comm is None or x.device != self.device or not x.is_contiguous():
            return False
        return self.route(x.numel() * x.element_size(), x.dtype)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The sum of ``x`` over the group, in a new tensor (``x`` as ``takes`` accepted it)."""
        if x.data_ptr() % 16:
            x = x.clone()  # the kernels read 16-byte vectors; the route never depends on this
        out = torch.empty_like(x)
        self.calls += 1
        return self.comm.all_reduce(x, out=out, codec=self.codec)

    def close(self) -> None:
        """Free the workspace; idempotent."""
        comm, self.comm = self.comm, None
        if comm is not None:
            comm.close()

    def __repr__(self) -> str:
        state = "closed" if self.comm is None else f"max_size={getattr(self.comm, 'max_size', '?')}"
        return f"EngineAllReduce({self.engine} {self.group_name}, codec={self.codec}, {state})"


# ---------------------------------------------------------------- set-up (collective)
def make_communicator(rank: int, world_size: int, max_size: int, device: torch.device, codec: str, cpu_group):
    """This rank's quickreduce Communicator (workspace allocated, peers not yet mapped). The handles are
    exchanged by ``attach`` over ``cpu_group``. Tests replace this function with a stand-in."""
    if device.type != "cuda":
        raise RuntimeError(f"the group's device is {device}, not a CUDA GPU")
    from ..comm import Communicator
    with torch.cuda.device(device):
        return Communicator(rank=rank, world_size=world_size, max_size=max_size, codecs={"all_reduce": codec})


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _everyone(cpu_group, mine) -> list:
    import torch.distributed as dist
    everyone: list = [None] * dist.get_world_size(cpu_group)
    dist.all_gather_object(everyone, mine, group=cpu_group)
    return everyone


def _step(cpu_group, what: str, fn: Callable[[], Any]) -> tuple[Optional[list], Optional[str]]:
    """``fn()`` on every rank, results gathered: (every rank's result, None) or (None, the first failure)."""
    try:
        mine = {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - every failure becomes the engine's own path
        mine = {"error": f"{type(e).__name__}: {e}"}
    everyone = _everyone(cpu_group, mine)
    for r, result in enumerate(everyone):
        if "error" in result:
            return None, f"rank {r} could not {what}: {result['error']}"
    return [result["ok"] for result in everyone], None


def _local_settings(engine: str, world_size: int, device: torch.device, max_bytes_hint: Optional[int],
                    require_exact: bool) -> dict:
    """What this rank would set up: codec, workspace size, routes (compared across ranks)."""
    from .. import __version__, config
    from ..comm import SUPPORTED_WORLD_SIZES
    if world_size not in SUPPORTED_WORLD_SIZES:
        raise ValueError(f"a group of {world_size} ranks (quickreduce runs on {SUPPORTED_WORLD_SIZES[0]}.."
                         f"{SUPPORTED_WORLD_SIZES[-1]} GPUs of one node)")
    codec = engine_codec(config.default_codec("all_reduce"))
    limit = engine_max_size_bytes()
    upto = min(limit, max_bytes_hint) if max_bytes_hint else limit
    router = make_router(codec, world_size, device)
    max_size = router.largest_taken(upto)
    if max_size <= 0:
        raise ValueError(f"the tuning table ({router.table.source}) has NCCL fastest at every size up to "
                         f"{format_bytes(upto)}")
    largest, max_size = max_size, workspace_size(router, max_size)
    routes = describe_routes(dataclasses.replace(router, max_size=max_size), largest)
    if require_exact:
        lossy = [s for d in ROUTED_DTYPES for s in router.segments(d, max_size) if s.takes and not s.exact]
        if lossy:
            raise ValueError(f"the engine asks for batch-invariant results and QUICKREDUCE_QUANTIZATION picks the "
                             f"lossy codec {lossy[0].codec} (use an exact codec: FP or LOSSLESS)")
    return {"host": socket.gethostname(), "version": __version__, "codec": codec, "max_size": max_size,
            "largest": largest, "limit": limit, "routes": routes}


def _disagreement(everyone: list) -> Optional[str]:
    for key, what in (("host", "the group spans several hosts (quickreduce is intra-node)"),
                      ("version", "ranks run different quickreduce versions"),
                      ("codec", "ranks disagree on QUICKREDUCE_QUANTIZATION"),
                      ("max_size", f"ranks disagree on the workspace size ({ENGINE_MAX_SIZE_ENV})"),
                      ("routes", "ranks plan different routes (different tuning tables)")):
        values = [e[key] for e in everyone]
        if len(set(values)) != 1:
            return f"{what}: {values} in rank order"
    return None


def _warm_up(qr: EngineAllReduce, router: Router, max_size: int, world_size: int, rank: int) -> None:
    """One call of every route the plan takes (its smallest size), each checked: every kernel is loaded
    and every table read before any CUDA-graph capture, and a broken setup shows here, not in serving.
    Every rank makes every call before any result is judged (a rank that stopped early would leave its
    peers waiting in a collective)."""
    calls = []
    for dtype in ROUTED_DTYPES:
        for seg in router.segments(dtype, max_size):
            esize = torch.empty((), dtype=dtype).element_size()
            numel = max(1, -(-seg.lo // esize))
            if seg.takes and numel * esize <= seg.hi:
                x = torch.full((numel,), float(rank + 1), dtype=dtype, device=qr.device)
                calls.append((seg, numel, qr.takes(x), qr.all_reduce(x)))
    _synchronize(qr.device)
    qr.comm.check()
    expected = float(world_size * (world_size + 1) // 2)
    for seg, numel, taken, out in calls:
        what = f"{seg.algo} {seg.codec}, {numel} {_dtype_name(seg.dtype)} values"
        if not taken:
            raise RuntimeError(f"the warm-up call ({what}) is not taken by its own plan")
        if seg.exact and not bool((out == expected).all()):
            raise RuntimeError(f"the warm-up all-reduce ({what}) gave {out.flatten()[:4].tolist()}, expected {expected}")
    qr.calls = 0


def attach(engine: str, group_name: str, cpu_group, device: torch.device, *, max_bytes_hint: Optional[int] = None,
           require_exact: bool = False, log: Optional[logging.Logger] = None) -> Optional[EngineAllReduce]:
    """Set quickreduce up for one engine group (collective over ``cpu_group``, a gloo group of the engine's
    ranks). Returns the ``EngineAllReduce``, or None after one log line saying why the engine's own path
    runs everything: a group of an unsupported size or spanning hosts, ranks that disagree on version,
    codec, workspace size or tuning table, a bad QUICKREDUCE_* value, a workspace that cannot be
    allocated, peers that cannot be mapped, a warm-up call that fails. Never raises for any of these.

    ``max_bytes_hint``: the largest all-reduce the engine will make (bytes), when the engine knows it;
    the workspace is sized to at most that. ``require_exact``: refuse lossy codecs."""
    import torch.distributed as dist
    log = log or logger
    rank, world_size = dist.get_rank(cpu_group), dist.get_world_size(cpu_group)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    speaker = rank == 0

    def refuse(why: str) -> None:
        if speaker:
            log.warning("quickreduce: not used in %s group %s: %s; %s's own all-reduce runs every size",
                        engine, group_name, why, engine)

    settings, problem = _step(cpu_group, "read its settings",
                              lambda: _local_settings(engine, world_size, device, max_bytes_hint, require_exact))
    if problem is None:
        problem = _disagreement(settings)
    if problem is not None:
        refuse(problem)
        return None
    mine = settings[rank]
    made: list = []

    def create():
        made.append(make_communicator(rank, world_size, mine["max_size"], device, mine["codec"], cpu_group))
        return made[0].peer_info()

    qr = None
    infos, problem = _step(cpu_group, "allocate its workspace", create)
    if problem is None:
        _, problem = _step(cpu_group, "map its peers' workspaces", lambda: made[0].connect(infos))
    if problem is None:
        qr = EngineAllReduce(made[0], device, engine, group_name, mine["codec"], limit=mine["largest"])
        router = dataclasses.replace(make_router(mine["codec"], world_size, device), max_size=mine["max_size"])
        _, problem = _step(cpu_group, "run the warm-up all-reduce",
                           lambda: _warm_up(qr, router, mine["largest"], world_size, rank))
    if problem is not None:
        if made:
            try:
                made[0].close()
            except Exception:  # noqa: BLE001
                pass
        refuse(problem)
        return None
    if speaker:
        codec = mine["codec"]
        log.info("quickreduce %s in %s group %s (%d ranks, %s): takes %s; codec %s; other sizes and dtypes take "
                 "%s's path; workspace %s a GPU (%s=%s)", mine["version"], engine, group_name, world_size, device,
                 mine["routes"], codec, engine, format_bytes(qr.comm.workspace_bytes), ENGINE_MAX_SIZE_ENV,
                 f"{mine['limit'] / (1 << 20):g}")
    return qr
