"""The oracle's segment collectives (docs/codec-spec.md, "Segments" to "Reduce-scatter").

All-gather, all-to-all and reduce-scatter move *segments* (a contiguous run of one rank's input
destined to one rank); each segment is encoded on its own, its blocks of 32 aligned to the
segment's first element, one quantization a value. Inputs and outputs are 1-D raw bits of the
tensor dtype (np.uint16 for fp16/bf16, np.uint32 for fp32); the arithmetic is numpy float32.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .codecs import BLOCK, ROTATED, _blocks, _plain_qdq, _qdq, as_bits, from_f32, rotate, to_f32, unrotate


def segment_dq(v: np.ndarray, start: int, n: int, dtype: str, codec: str) -> np.ndarray:
    """DQ(seg): the blockwise D(Q(.)) of the fp32 values v[start:start + n], blocks aligned to
    v[start] (a tail block padded with zeros for the absmax only), as n fp32 values."""
    seg = np.asarray(v, dtype=np.float32)[start:start + n]
    if seg.size != n:
        raise ValueError(f"segment [{start}, {start + n}) runs past the {np.asarray(v).size} values")
    return _qdq(seg, dtype, codec)


def _ranks(inputs: Sequence, dtype: str) -> list[np.ndarray]:
    if len(inputs) < 1:
        raise ValueError("need at least one rank")
    return [as_bits(x, dtype).reshape(-1) for x in inputs]


def reduce_chunk(values: list[np.ndarray], owner: int, start: int, n: int, dtype: str, codec: str) -> np.ndarray:
    """Rank `owner`'s fp32 sum of values [start, start + n) of every rank (fp32 values, one array a
    rank): its own values exact, every other rank's segment through DQ once, added in rank order
    starting from rank 0's term (acc = c_0; acc += c_s for s = 1..W-1)."""
    if codec in ROTATED:  # every term rotated blockwise, summed rotated, rotated back once
        acc = None
        with np.errstate(all="ignore"):
            for s, v in enumerate(values):
                blk = rotate(_blocks(v[start:start + n]))
                if s != owner:
                    blk = _plain_qdq(blk.reshape(-1), dtype, ROTATED[codec]).reshape(-1, BLOCK)
                acc = blk if acc is None else (acc + blk).astype(np.float32)
        return unrotate(acc).reshape(-1)[:n] if n else np.zeros(0, np.float32)
    acc = None
    with np.errstate(all="ignore"):
        for s, v in enumerate(values):
            term = v[start:start + n] if s == owner else segment_dq(v, start, n, dtype, codec)
            acc = term.astype(np.float32, copy=True) if acc is None else (acc + term).astype(np.float32)
    return acc


def all_gather(inputs: Sequence[np.ndarray], dtype: str, codec: str) -> np.ndarray:
    """out[r*k + i] = to_T(DQ(x_r)_i): every rank's output (they are identical), T bits. Each rank's
    k values are one segment (blocks from its first value), the caller's own included."""
    xs = _ranks(inputs, dtype)
    k = xs[0].size
    if any(x.size != k for x in xs):
        raise ValueError("all-gather inputs must have the same length")
    return np.concatenate([from_f32(_qdq(to_f32(x, dtype), dtype, codec), dtype) for x in xs])


def even_splits(sizes: Sequence[int], world: int) -> list[list[int]]:
    """The even all-to-all layout: every segment holds len(x) / W values (len(x) must divide)."""
    out = []
    for r, n in enumerate(sizes):
        if n % world:
            raise ValueError(f"even all-to-all splits need len(x) divisible by {world}; rank {r} has {n} values")
        out.append([n // world] * world)
    return out


def all_to_all(inputs: Sequence[np.ndarray], dtype: str, codec: str,
               splits: Sequence[Sequence[int]] | None = None) -> list[np.ndarray]:
    """Rank r sends splits[r][d] values to rank d (its input's consecutive runs, in d order); rank
    d's output holds the segments it receives in source-rank order, each to_T(DQ(seg)), the
    caller's own segment exact (it never crosses the link). splits None: even splits. Returns
    every rank's output, T bits."""
    xs = _ranks(inputs, dtype)
    world = len(xs)
    if splits is None:
        splits = even_splits([x.size for x in xs], world)
    splits = [[int(v) for v in row] for row in splits]
    if len(splits) != world or any(len(row) != world for row in splits):
        raise ValueError(f"splits must be {world} rows of {world} sizes")
    for r, row in enumerate(splits):
        if any(v < 0 for v in row):
            raise ValueError(f"rank {r}'s splits must not be negative: {row}")
        if sum(row) != xs[r].size:
            raise ValueError(f"rank {r}'s splits add up to {sum(row)}, its input has {xs[r].size} values")
    values = [to_f32(x, dtype) for x in xs]
    outs = []
    for d in range(world):
        parts = []
        for r in range(world):  # out_d[sum(out_split_d[:r]) + i], out_split_d[r] == splits[r][d]
            start = sum(splits[r][:d])
            seg = values[r][start:start + splits[r][d]] if r == d else segment_dq(values[r], start, splits[r][d], dtype, codec)
            parts.append(from_f32(seg, dtype))
        outs.append(np.concatenate(parts) if parts else np.zeros(0, xs[0].dtype))
    return outs


def reduce_scatter(inputs: Sequence[np.ndarray], dtype: str, codec: str) -> list[np.ndarray]:
    """Each input holds W*k values; rank r receives out_r[i] = to_T(acc_i), acc the fp32 rank-order
    sum of block r (values [r*k, r*k + k)) of every rank, rank r's own values exact and every
    other rank's block r through DQ once. Returns every rank's k values, T bits."""
    xs = _ranks(inputs, dtype)
    world, n = len(xs), xs[0].size
    if any(x.size != n for x in xs):
        raise ValueError("reduce-scatter inputs must have the same length")
    if n % world:
        raise ValueError(f"reduce-scatter inputs hold W*k values; {n} is not divisible by W = {world}")
    k = n // world
    values = [to_f32(x, dtype) for x in xs]
    return [from_f32(reduce_chunk(values, r, r * k, k, dtype, codec), dtype) for r in range(world)]
