"""The oracle's all-reduce (docs/codec-spec.md, "All-reduce" and "All-reduce of fp32 tensors")."""
from __future__ import annotations

import numpy as np

from .codecs import BLOCK, ROTATED, _blocks, _plain_qdq, _qdq, as_bits, from_f32, rotate, to_f32, unrotate
from .exchange import reduce_chunk, segment_dq


def owners(n: int, world: int, slice_values: int | None = None) -> np.ndarray:
    """The rank that reduces each of n values: (i // slice_values) % world. slice_values None: the
    two-shot's own layout for this size (`two_shot_slice_values`)."""
    if slice_values is None:
        from .. import _C  # the layout rule only; the arithmetic here is independent of it
        slice_values = _C.two_shot_slice_values(n, world)
    return (np.arange(n) // slice_values) % world


def fp32_chunk(n: int, world: int) -> int:
    """K = 32 * ceil(n / (32 W)): values per rank's chunk in the fp32 all-reduce (value i is
    reduced by rank i // K; K is a multiple of 32, so chunks sit on the global block grid)."""
    return BLOCK * -(-n // (BLOCK * world))


def all_reduce_fp32(inputs: list[np.ndarray], codec: str) -> np.ndarray:
    """The fp32 all-reduce: reduce-scatter then all-gather over W chunks of K = fp32_chunk(N, W)
    values (chunk c = [cK, min((c+1)K, N)), possibly empty). The owner c sums its chunk in fp32 in
    rank order, its own values exact and every other rank's through DQ once; every rank then holds
    DQ(owner's sum) (the all-gather's single quantization; to_T is the identity). uint32 bits."""
    if not inputs:
        raise ValueError("need at least one rank")
    xs = [as_bits(x, "fp32").reshape(-1) for x in inputs]
    world, n = len(xs), xs[0].size
    if any(x.size != n for x in xs):
        raise ValueError("all ranks must have the same length")
    values = [to_f32(x, "fp32") for x in xs]
    out = np.zeros(n, np.float32)
    k = fp32_chunk(n, world)
    for c in range(world):
        start = min(n, c * k)
        length = min(n, start + k) - start
        acc = reduce_chunk(values, c, start, length, "fp32", codec)  # first shot: the reduce-scatter
        out[start:start + length] = segment_dq(acc, 0, length, "fp32", codec)  # second: the all-gather's DQ
    return from_f32(out, "fp32")


def all_reduce(inputs: list[np.ndarray], dtype: str, codec: str, slice_values: int | None = None) -> np.ndarray:
    """Two-shot all-reduce emulation: fp32 sum in fixed rank order of each rank's contribution,
    then one more Q/D of the sum, output to_T. Value i is reduced by rank (i // slice_values) % W,
    which adds its own value exactly; every other rank's value arrives as D(Q(x)). slice_values
    None: the two-shot's own layout for this size (`two_shot_slice_values`). Returns T bits.
    dtype "fp32": `all_reduce_fp32` (chunked ownership; slice_values does not apply)."""
    if not inputs:
        raise ValueError("need at least one rank")
    if dtype == "fp32":
        if slice_values is not None:
            raise ValueError("the fp32 all-reduce has chunked ownership (fp32_chunk); slice_values does not apply")
        return all_reduce_fp32(inputs, codec)
    n = np.asarray(inputs[0]).size
    owner = owners(n, len(inputs), slice_values)
    if codec in ROTATED:
        return _all_reduce_rotated(inputs, dtype, codec, owner)
    r = None
    with np.errstate(all="ignore"):
        for rank, x in enumerate(inputs):
            x = np.asarray(x, dtype=np.uint16).reshape(-1)
            if x.size != n:
                raise ValueError("all ranks must have the same length")
            exact = to_f32(x, dtype)
            term = np.where(owner == rank, exact, _qdq(exact, dtype, codec)).astype(np.float32)
            r = term if r is None else r + term  # fp32 add, rank order, starting from rank 0's term
    return from_f32(_qdq(r, dtype, codec), dtype)


def _all_reduce_rotated(inputs, dtype: str, codec: str, owner: np.ndarray) -> np.ndarray:
    """The two-shot with a rotated codec: every contribution rotated blockwise (the owner's exact
    values too), summed in the rotated domain, quantized once more, rotated back once."""
    n = owner.size
    block_owner = _blocks(owner.astype(np.float32))[:, 0]  # a slice is whole blocks: one owner each
    base = ROTATED[codec]
    acc = None
    with np.errstate(all="ignore"):
        for rank, x in enumerate(inputs):
            x = np.asarray(x, dtype=np.uint16).reshape(-1)
            if x.size != n:
                raise ValueError("all ranks must have the same length")
            blk = rotate(_blocks(to_f32(x, dtype)))
            q = _plain_qdq(blk.reshape(-1), dtype, base).reshape(-1, BLOCK)
            term = np.where((block_owner == rank)[:, None], blk, q).astype(np.float32)
            acc = term if acc is None else (acc + term).astype(np.float32)
        second = _plain_qdq(acc.reshape(-1), dtype, base).reshape(-1, BLOCK)
        return from_f32(unrotate(second).reshape(-1)[:n], dtype)
