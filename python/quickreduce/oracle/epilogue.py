"""The all-reduce's residual-add + RMSNorm (+ FP8) epilogue (docs/codec-spec.md, "Add + RMSNorm
epilogue"), written from the spec: every op one fp32 op with RNE, the sum of squares a pairwise
tree over 8-value lanes padded with zeros to a power of two."""
from __future__ import annotations

import numpy as np

from .codecs import _e4m3, from_f32, to_f32

LANE = 8


def _square_sums(r: np.ndarray) -> np.ndarray:
    """Per row: a lane's squares summed in order, then a pairwise tree over the lanes."""
    rows, hidden = r.shape
    sq = (r * r).astype(np.float32).reshape(rows, hidden // LANE, LANE)
    lane = sq[:, :, 0].copy()
    for i in range(1, LANE):
        lane = (lane + sq[:, :, i]).astype(np.float32)
    width = 1
    while width < lane.shape[1]:
        width *= 2
    tree = np.zeros((rows, width), np.float32)
    tree[:, :lane.shape[1]] = lane
    while tree.shape[1] > 1:
        tree = (tree[:, 0::2] + tree[:, 1::2]).astype(np.float32)
    return tree[:, 0]


def add_rmsnorm(sum_bits, residual_bits, weight_bits, dtype: str, eps: float, fp8: str | None = None,
                fp8_scale: float | None = None):
    """(out bits, residual_out bits, fp8 codes as e4m3 values or None, scales or None) of rows
    [rows, hidden] of T bits; fp8: None, 'per_token' or 'per_tensor' (with fp8_scale)."""
    s = to_f32(np.asarray(sum_bits), dtype)
    rows, hidden = s.shape
    with np.errstate(all="ignore"):
        r = to_f32(from_f32((s + to_f32(np.asarray(residual_bits), dtype)).astype(np.float32), dtype), dtype)
        mean = (_square_sums(r) / np.float32(hidden)).astype(np.float32)
        inv_rms = (np.float32(1) / np.sqrt((mean + np.float32(eps)).astype(np.float32))).astype(np.float32)
        w = to_f32(np.asarray(weight_bits), dtype)[None, :]
        normed = to_f32(from_f32((r * inv_rms[:, None]).astype(np.float32), dtype), dtype)
        y = to_f32(from_f32((normed * w).astype(np.float32), dtype), dtype)
        codes = scales = None
        if fp8 == "per_token":
            amax = np.max(np.where(np.isnan(y), np.float32(0), np.abs(y)), axis=1)
            scales = np.where(amax > 0, amax / np.float32(448), np.float32(1)).astype(np.float32)
        elif fp8 == "per_tensor":
            scales = np.full(rows, np.float32(fp8_scale), np.float32)
        elif fp8 is not None:
            raise ValueError(f"fp8 must be None, 'per_token' or 'per_tensor', got {fp8!r}")
        if scales is not None:
            inv = (np.float32(1) / scales).astype(np.float32)
            codes = _e4m3((y * inv[:, None]).astype(np.float32))
    return from_f32(y, dtype), from_f32(r, dtype), codes, scales
