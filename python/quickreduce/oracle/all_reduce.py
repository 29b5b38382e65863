"""The oracle's all-reduce (docs/codec-spec.md, "All-reduce")."""
from __future__ import annotations

import numpy as np

from .codecs import _qdq, from_f32, to_f32


def owners(n: int, world: int, slice_values: int | None = None) -> np.ndarray:
    """The rank that reduces each of n values: (i // slice_values) % world. slice_values None: the
    two-shot's own layout for this size (`two_shot_slice_values`)."""
    if slice_values is None:
        from .. import _C  # the layout rule only; the arithmetic here is independent of it
        slice_values = _C.two_shot_slice_values(n, world)
    return (np.arange(n) // slice_values) % world


def all_reduce(inputs: list[np.ndarray], dtype: str, codec: str, slice_values: int | None = None) -> np.ndarray:
    """Two-shot all-reduce emulation: fp32 sum in fixed rank order of each rank's contribution,
    then one more Q/D of the sum, output to_T. Value i is reduced by rank (i // slice_values) % W,
    which adds its own value exactly; every other rank's value arrives as D(Q(x)). slice_values
    None: the two-shot's own layout for this size (`two_shot_slice_values`). Returns T bits."""
    if not inputs:
        raise ValueError("need at least one rank")
    n = np.asarray(inputs[0]).size
    owner = owners(n, len(inputs), slice_values)
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
