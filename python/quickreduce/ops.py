"""quickreduce as torch operators: ``torch.ops.quickreduce.*``, ``ReduceOp`` and ``async_op``.

Custom ops (``torch.library.custom_op``; functional: each returns a new tensor and mutates nothing)::

    torch.ops.quickreduce.all_reduce(x, handle, codec=None, algo="auto", op="sum") -> Tensor
    torch.ops.quickreduce.reduce_scatter(x, handle, codec=None, op="sum") -> Tensor
    torch.ops.quickreduce.all_gather(x, handle, codec=None) -> Tensor
    torch.ops.quickreduce.all_to_all(x, handle, codec=None, output_split_sizes=None,
                                     input_split_sizes=None) -> Tensor
    torch.ops.quickreduce.all_reduce_add_rmsnorm(x, residual, weight, handle, eps=1e-6, codec=None)
        -> (out, residual_out)          (and _fp8: -> (out, residual_out, e4m3 codes, per-token scales))

An op cannot take a Python object, so a communicator is named by ``Communicator.handle``: an integer
from this module's registry (``register``; handles are never reused, the registry holds communicators
weakly, and ``close()`` removes one, so a stale handle is an error, never another communicator).
``codec=None`` is the communicator's default for the collective. Each op has a fake (meta)
implementation giving the output's shape and dtype, so ``torch.compile(fullgraph=True)`` traces a
function calling ``comm.all_reduce(x)`` into one graph. ``Communicator.all_reduce(x)`` (and the
other three) with ``out=None`` and ``async_op=False`` *is* a call of the op: one path. The ops run
the kernels on the current stream and never synchronize the host, so they are captured by CUDA
graphs (``mode="reduce-overhead"``) like the methods are. No autograd formula is registered (the
right one depends on the model: a Megatron row-parallel all-reduce's backward is the identity, the
adjoint of a sum over ranks is another all-reduce): backward through them raises, and so does
torch.compile of a graph that needs their gradient; wrap them in a ``torch.autograd.Function`` with
the convention your model uses, or run them under ``torch.no_grad()``/``torch.inference_mode()``.

ReduceOp (``op=``: ``torch.distributed.ReduceOp.SUM/AVG/MAX/MIN`` or ``"sum"/"avg"/"max"/"min"``):

- ``SUM``: the collective itself, every codec.
- ``AVG``: the ``SUM`` result, then ``out.div_(world_size)`` applied elementwise to the reduced output
  in the tensor's dtype (torch's division: fp16/bf16 divided in fp32 and rounded once). Every rank
  divides bitwise-identical sums by the same number with the same kernel, so AVG's output is
  bitwise identical on every rank too, for every codec. (NCCL's AVG may divide before summing;
  quickreduce never does.)
- ``MAX``/``MIN``: exact codecs only (``fp16``/``bf16``/``fp32``/``lossless``/``auto``/``auto:<exact>``);
  a lossy codec is a ``ValueError``. Built from the exact (passthrough) exchange, no new kernel:
  reduce-scatter = an all-to-all of the input (the same bytes a reduce-scatter moves) and a local
  ``amax``/``amin`` over the W received blocks in rank order; all-reduce = that reduce-scatter over
  W chunks of ``K = ceil(N / W)`` rounded up to 8 values (a zero-padded copy of the input when
  ``W*K != N``), then an exact all-gather of the chunks. Each chunk is reduced by its one owner and
  then copied bit for bit, so every rank holds identical bits. Cost: the traffic of a passthrough
  all-reduce (about ``2 (W-1)/W`` of the message a rank), two exchange launches plus one reduction
  kernel, and scratch of about 2x the message (plus the padded copy); the message (padded) must fit
  ``max_size``. NaN propagates (``torch.amax``); which zero MAX(+0, -0) gives is unspecified (the
  same on every rank).

async_op=True returns a ``Work`` (a ``torch.distributed.Work``): the collective is issued on a side
stream of the communicator that first waits on the caller's current stream (so it sees everything
queued before the call); ``wait()`` makes the stream current at that time wait on an event recorded
after the collective (the host never blocks), ``is_completed()`` queries that event,
``synchronize()`` blocks the host, ``result()`` is ``[output]``. The inputs (and ``out``) are marked
used by the side stream (``record_stream``) and the Work holds them until it is gone, so freeing
them early is safe. async_op=False: the call runs on the current stream as always. async_op is
for eager code (torch.compile breaks the graph at stream and event calls; compiled code overlaps
through the compiler's own scheduling).

Cost of the one path: an eager call with ``out=None`` goes through the dispatcher and custom_op's
Python wrapper: about 9 us of host time a call on the development machine's CPU, measured with a
stub communicator (under 1 us called directly); ``out=`` calls, CUDA graphs and compiled graphs
don't pay it.
"""
from __future__ import annotations

import itertools
import math
import weakref
from typing import Optional, Sequence

import torch

from . import _C, codecs, collectives

REDUCE_OPS = ("sum", "avg", "max", "min")
# The passthrough's names and the registry's other exact codecs (lossless): the same bits.
EXACT_CODECS = codecs.PASSTHROUGH_NAMES + tuple(c for c in codecs.exact_codecs() if c != "fp16")

# ---------------------------------------------------------------- the registry of communicators
_registry: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()
_next_handle = itertools.count(1)


def register(comm) -> int:
    """A new integer handle naming ``comm`` in the ops (held weakly; handles are never reused)."""
    handle = next(_next_handle)
    _registry[handle] = comm
    return handle


def unregister(handle: int) -> None:
    _registry.pop(int(handle), None)


def lookup(handle: int):
    """The communicator a handle names; QuickReduceError when it was closed or never existed."""
    comm = _registry.get(int(handle))
    if comm is None:
        raise _C.QuickReduceError(f"no open quickreduce communicator has handle {int(handle)} "
                                  "(closed, garbage-collected, or from another process)")
    return comm


# ---------------------------------------------------------------- ReduceOp
def reduce_op_name(op) -> str:
    """``"sum"``, ``"avg"``, ``"max"`` or ``"min"`` from a ``torch.distributed.ReduceOp`` or a string;
    ValueError for anything else (PRODUCT, BAND, PREMUL_SUM, ...). Pure Python: torch.compile traces it."""
    if isinstance(op, str):
        name = op.lower()
        if name in REDUCE_OPS:
            return name
    elif torch.distributed.is_available():
        RO = torch.distributed.ReduceOp
        if isinstance(op, RO.RedOpType):  # ReduceOp.SUM etc.: by name (torch 2.11's dynamo cannot compare them)
            name = op.name.lower()
            if name in REDUCE_OPS:
                return name
        elif isinstance(op, RO):  # a ReduceOp object, ReduceOp(ReduceOp.MAX)
            if op == RO.SUM:
                return "sum"
            if op == RO.AVG:
                return "avg"
            if op == RO.MAX:
                return "max"
            if op == RO.MIN:
                return "min"
    raise ValueError(f"quickreduce reduces with ReduceOp.SUM, AVG, MAX or MIN (or 'sum', 'avg', 'max', 'min'); "
                     f"got {op!r}")


def is_exact(codec: str) -> bool:
    """True for codec names that give the exact values: the passthrough, lossless, auto, auto:<exact>."""
    _, name = codecs.parse_codec_request(codec, check=False)  # no extension call: traced by torch.compile
    return name is None or name in EXACT_CODECS


def check_reduce(op, codec, collective: str) -> tuple[str, str]:
    """(op name, codec) of a reducing call; MAX/MIN with a lossy codec is a ValueError."""
    name = reduce_op_name(op)
    if not isinstance(codec, str):
        raise TypeError(f"codec must be a string, got {type(codec).__name__}")
    if name in ("max", "min") and not is_exact(codec):
        raise ValueError(f"ReduceOp.{name.upper()} runs on the exact paths only (codec fp16/bf16/fp32/lossless/auto); "
                         f"{collective} got codec {codec!r}: a lossy codec has no exact maximum, use SUM/AVG with it")
    return name, codec


def check_call(x, async_op) -> None:
    """The checks a method makes before choosing its path (the op's schema would reject a non-tensor
    with a less helpful message)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not isinstance(async_op, bool):
        raise TypeError(f"async_op must be True or False, got {async_op!r}")


# ---------------------------------------------------------------- output shapes (the fakes and the checks)
def reduce_scatter_shape(shape: Sequence[int], world_size: int) -> tuple:
    """[W*k, ...] -> [k, ...]; a tensor whose dim 0 does not divide gives a flat [numel / W]."""
    if len(shape) and shape[0] % world_size == 0:
        return (shape[0] // world_size, *shape[1:])
    return (math.prod(shape) // world_size,)


def all_gather_shape(shape: Sequence[int], world_size: int) -> tuple:
    """[k, ...] -> [W*k, ...]; a 0-d tensor gives [W]."""
    return (world_size * shape[0], *shape[1:]) if len(shape) else (world_size,)


def all_to_all_shape(shape: Sequence[int], output_split_sizes: Optional[Sequence[int]]) -> tuple:
    """Rows ``sum(output_split_sizes)`` (None: as many as the input), the input's other dims."""
    if not len(shape):
        raise ValueError("all_to_all needs a tensor with at least one dimension (split along dim 0)")
    rows = sum(output_split_sizes) if output_split_sizes is not None else shape[0]
    return (rows, *shape[1:])


# ---------------------------------------------------------------- MAX / MIN over the exact exchange
def _torch_reduce_op(name: str):
    RO = torch.distributed.ReduceOp
    return {"sum": RO.SUM, "avg": RO.AVG, "max": RO.MAX, "min": RO.MIN}[name]


def _extreme_out(comm, x: torch.Tensor, out: Optional[torch.Tensor], shape: tuple) -> torch.Tensor:
    if out is None:
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    if out is not x:
        comm._check_tensor(out, "out", collectives.DTYPE_IDS)
        if out.dtype != x.dtype or out.numel() != math.prod(shape):
            raise ValueError(f"out has shape {tuple(out.shape)} and dtype {out.dtype}; expected {shape} and {x.dtype}")
    return out


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def _reduce_blocks(received: torch.Tensor, world_size: int, name: str, out: torch.Tensor) -> None:
    """out = amax/amin over the W blocks of ``received`` (block s from rank s)."""
    blocks = received.view(world_size, -1)
    if name == "max":
        torch.amax(blocks, 0, out=out.view(-1))
    else:
        torch.amin(blocks, 0, out=out.view(-1))


def all_reduce_extreme(comm, x: torch.Tensor, out: Optional[torch.Tensor], codec: str, algo: str,
                       name: str) -> torch.Tensor:
    """All-reduce with MAX/MIN: exact all-to-all + local amax/amin + exact all-gather (module docstring)."""
    check_reduce(name, codec, "all_reduce")
    comm._check_tensor(x, "x", collectives.DTYPE_IDS)
    out = _extreme_out(comm, x, out, tuple(x.shape))
    if out is not x and tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"out has shape {tuple(out.shape)}; expected {tuple(x.shape)}")
    W, n, elt = comm.world_size, x.numel(), x.element_size()
    if n * elt > comm.max_size:
        raise ValueError(f"message of {n * elt} bytes exceeds this communicator's max_size of {comm.max_size} "
                         f"bytes (set max_size= or QUICKREDUCE_MAX_SIZE_MB)")
    if n == 0:
        return out
    if algo == "nccl":
        if comm.group is None:
            raise ValueError("algo='nccl' needs a communicator built from a process group")
        if out is not x:
            out.copy_(x)
        torch.distributed.all_reduce(out, op=_torch_reduce_op(name), group=comm.group)
        return out
    if algo != "auto":
        raise ValueError(f"ReduceOp.{name.upper()} all-reduces run as an exact all-to-all + all-gather; "
                         f"algo must be 'auto' or 'nccl', got {algo!r}")
    K = (-(-n // W) + 7) // 8 * 8  # whole 16-byte units per chunk for every dtype
    if W * K * elt > comm.max_size:
        raise ValueError(f"a ReduceOp.{name.upper()} all-reduce of {n} values pads to {W * K * elt} bytes, over "
                         f"this communicator's max_size of {comm.max_size} (raise max_size)")
    flat = x.reshape(-1)
    if W * K != n:
        padded = torch.zeros(W * K, dtype=x.dtype, device=x.device)  # the padding is never written out
        padded[:n].copy_(flat)
        flat = padded
    received = torch.empty(W * K, dtype=x.dtype, device=x.device)
    collectives.all_to_all(comm, flat, received, "fp16")  # block s = rank s's chunk `rank`
    mine = torch.empty(K, dtype=x.dtype, device=x.device)
    _reduce_blocks(received, W, name, mine)
    gathered = out.reshape(-1) if W * K == n else torch.empty(W * K, dtype=x.dtype, device=x.device)
    collectives.all_gather(comm, mine, gathered, "fp16")
    if W * K != n:
        out.reshape(-1).copy_(gathered[:n])
    return out


def reduce_scatter_extreme(comm, x: torch.Tensor, out: Optional[torch.Tensor], codec: str,
                           name: str) -> torch.Tensor:
    """Reduce-scatter with MAX/MIN: exact all-to-all of x + local amax/amin over the W blocks."""
    check_reduce(name, codec, "reduce_scatter")
    W = comm.world_size
    comm._check_tensor(x, "x", collectives.DTYPE_IDS)
    if x.numel() % W:
        raise ValueError(f"reduce_scatter needs an input whose size divides by the world size {W}; x has {x.numel()} values")
    out = _extreme_out(comm, x, out, reduce_scatter_shape(tuple(x.shape), W))
    if out is x or (out.numel() and _overlaps(out, x)):
        raise ValueError("out overlaps the input; the collectives read the input while writing the output")
    k = x.numel() // W
    if k:
        received = torch.empty(W * k, dtype=x.dtype, device=x.device)
        collectives.all_to_all(comm, x.reshape(-1), received, "fp16")  # block s = rank s's block `rank`
        _reduce_blocks(received, W, name, out)
    return out


# ---------------------------------------------------------------- async_op
_WorkBase = torch.distributed.Work if torch.distributed.is_available() else object


class Work(_WorkBase):
    """What ``async_op=True`` returns, as ``torch.distributed``'s work objects behave (module docstring)."""

    def __init__(self, result: torch.Tensor, event, device: int, keep: tuple):
        super().__init__()
        self._result, self._event, self._device, self._keep = result, event, device, keep

    def wait(self, timeout=None) -> bool:
        """Make the current CUDA stream wait for the collective; the host does not block."""
        stream = torch.cuda.current_stream(self._device)
        stream.wait_event(self._event)
        self._result.record_stream(stream)  # the output is used on this stream from now on
        return True

    def is_completed(self) -> bool:
        """True once the collective has finished on the GPU (non-blocking)."""
        return self._event.query()

    def is_success(self) -> bool:
        return self.is_completed()

    def exception(self):
        return None

    def synchronize(self) -> None:
        """Block the host until the collective has finished."""
        self._event.synchronize()

    def result(self) -> list:
        return [self._result]


def side_stream(comm) -> "torch.cuda.Stream":
    stream = comm.__dict__.get("_side_stream")
    if stream is None:
        stream = comm._side_stream = torch.cuda.Stream(device=comm.device)
    return stream


def run_async(comm, fn, args: tuple, inputs: Sequence[Optional[torch.Tensor]]) -> Work:
    """Run ``fn(*args)`` (one collective on the current stream) on the communicator's side stream,
    ordered after the caller's stream; a Work that orders a later stream after it."""
    caller = torch.cuda.current_stream(comm.device)
    side = side_stream(comm)
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        result = fn(*args)
        event = torch.cuda.Event()
        event.record(side)
    keep = tuple(t for t in inputs if isinstance(t, torch.Tensor))
    for t in keep:
        t.record_stream(side)  # allocated on the caller's stream, read/written by the side stream
    result.record_stream(caller)  # allocated on the side stream when out=None, used on the caller's
    return Work(result, event, comm.device, keep)


# ---------------------------------------------------------------- the custom ops
@torch.library.custom_op("quickreduce::all_reduce", mutates_args=())
def all_reduce(x: torch.Tensor, handle: int, codec: Optional[str] = None, algo: str = "auto",
               op: str = "sum") -> torch.Tensor:
    """Sum (or AVG/MAX/MIN) of ``x`` over the ranks of communicator ``handle`` (Communicator.all_reduce)."""
    comm = lookup(handle)
    name, codec = check_reduce(op, codec if codec is not None else comm.codec_for("all_reduce"), "all_reduce")
    return comm._all_reduce(x, None, codec, algo, name)


@all_reduce.register_fake
def _all_reduce_fake(x, handle, codec=None, algo="auto", op="sum"):
    lookup(handle)
    return torch.empty_like(x)


@torch.library.custom_op("quickreduce::reduce_scatter", mutates_args=())
def reduce_scatter(x: torch.Tensor, handle: int, codec: Optional[str] = None, op: str = "sum") -> torch.Tensor:
    """Block ``rank`` of the reduction of ``x`` over the ranks (Communicator.reduce_scatter)."""
    comm = lookup(handle)
    name, codec = check_reduce(op, codec if codec is not None else comm.codec_for("reduce_scatter"), "reduce_scatter")
    return comm._reduce_scatter(x, None, codec, name)


@reduce_scatter.register_fake
def _reduce_scatter_fake(x, handle, codec=None, op="sum"):
    W = lookup(handle).world_size
    if x.numel() % W:
        raise ValueError(f"reduce_scatter needs an input whose size divides by the world size {W}; x has {x.numel()} values")
    return x.new_empty(reduce_scatter_shape(tuple(x.shape), W))


@torch.library.custom_op("quickreduce::all_gather", mutates_args=())
def all_gather(x: torch.Tensor, handle: int, codec: Optional[str] = None) -> torch.Tensor:
    """Every rank's ``x`` concatenated along dim 0 (Communicator.all_gather)."""
    comm = lookup(handle)
    return collectives.all_gather(comm, x, None, codec)


@all_gather.register_fake
def _all_gather_fake(x, handle, codec=None):
    return x.new_empty(all_gather_shape(tuple(x.shape), lookup(handle).world_size))


@torch.library.custom_op("quickreduce::all_to_all", mutates_args=())
def all_to_all(x: torch.Tensor, handle: int, codec: Optional[str] = None,
               output_split_sizes: Optional[list[int]] = None,
               input_split_sizes: Optional[list[int]] = None) -> torch.Tensor:
    """Rows of ``x`` exchanged between the ranks along dim 0 (Communicator.all_to_all)."""
    comm = lookup(handle)
    return collectives.all_to_all(comm, x, None, codec, output_split_sizes, input_split_sizes)


@all_to_all.register_fake
def _all_to_all_fake(x, handle, codec=None, output_split_sizes=None, input_split_sizes=None):
    lookup(handle)
    return x.new_empty(all_to_all_shape(tuple(x.shape), output_split_sizes))


@torch.library.custom_op("quickreduce::all_reduce_add_rmsnorm", mutates_args=())
def all_reduce_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, handle: int,
                           eps: float = 1e-6, codec: Optional[str] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(RMSNorm(all_reduce(x) + residual) * weight, all_reduce(x) + residual) (Communicator.all_reduce_add_rmsnorm)."""
    from .epilogues import all_reduce_add_rmsnorm as run
    return run(lookup(handle), x, residual, weight, eps, codec)


@all_reduce_add_rmsnorm.register_fake
def _all_reduce_add_rmsnorm_fake(x, residual, weight, handle, eps=1e-6, codec=None):
    from .epilogues import check_args
    lookup(handle)
    check_args(x, residual, weight, eps, None, None, None, None)
    return torch.empty_like(x), torch.empty_like(x)


@torch.library.custom_op("quickreduce::all_reduce_add_rmsnorm_fp8", mutates_args=())
def all_reduce_add_rmsnorm_fp8(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, handle: int,
                               eps: float = 1e-6, codec: Optional[str] = None
                               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """all_reduce_add_rmsnorm, plus the normed rows in FP8 e4m3 and their per-token float32 scales [..., 1]."""
    from .epilogues import all_reduce_add_rmsnorm as run
    return run(lookup(handle), x, residual, weight, eps, codec, fp8="per_token")


@all_reduce_add_rmsnorm_fp8.register_fake
def _all_reduce_add_rmsnorm_fp8_fake(x, residual, weight, handle, eps=1e-6, codec=None):
    from .epilogues import check_args
    lookup(handle)
    check_args(x, residual, weight, eps, None, None, "per_token", None)
    return (torch.empty_like(x), torch.empty_like(x), x.new_empty(x.shape, dtype=torch.float8_e4m3fn),
            x.new_empty(x.shape[:-1] + (1,), dtype=torch.float32))
