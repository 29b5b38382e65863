"""The oracle's number formats and blockwise codecs (docs/codec-spec.md, "Blocks" to "Lossless").

Values travel as raw bits of the tensor dtype T: uint16 for "fp16" and "bf16", uint32 for "fp32".
Block scales are stored in the scale type S(T): T itself for fp16 and bf16, bf16 for fp32. All
codec arithmetic is numpy float32 (never float64), so every operation is one IEEE fp32 op with RNE,
as the spec requires. The CPU twin and the kernels must match this bit for bit (up to the sign of
zeros and NaN payloads).
"""
from __future__ import annotations

import numpy as np

BLOCK = 32
# The passthrough's names: all three are the same codec (values travel exact in the tensor's own
# dtype, whatever the name says).
PASSTHROUGH = ("fp16", "bf16", "fp32")
# Codecs whose round trip is to_T alone: the passthrough, and the lossless packing.
EXACT = PASSTHROUGH + ("lossless",)
DIVISOR = {"int8": 127, "int6": 31, "int4": 7, "fp8": 448, "fp4": 6}
# The 16-bit dtypes' codec names as the all-reduce tests iterate them ("bf16": passthrough alias).
CODECS = ("fp16", "bf16", "fp8", "int8", "int6", "int4", "fp4", "lossless", "int4h", "int6h")
# Rotated codecs (docs/codec-spec.md, "Rotated codecs"): the plain codec each quantizes with.
ROTATED = {"int4h": "int4", "int6h": "int6"}
ROTATION_SIGNS = 0xB9B9B9B9  # bit i: value i of a block is negated before the transform (8 bits, repeated)
ALL_CODECS = CODECS + ("fp32",)  # every accepted name, the "fp32" alias of the passthrough included
# The 16-bit tensor dtypes (the two-shot all-reduce and twin_round_trip take these only).
DTYPES = ("fp16", "bf16")
ALL_DTYPES = DTYPES + ("fp32",)  # every tensor dtype (the segment collectives, the fp32 all-reduce)
_BITS = {"fp16": np.uint16, "bf16": np.uint16, "fp32": np.uint32}
_F32_MAX = np.float32(np.finfo(np.float32).max)
_F32_MIN = np.float32(np.finfo(np.float32).tiny)
# tiny blocks (docs/codec-spec.md): S's smallest normal, and the power of two such a block is lifted by
_SMALLEST_NORMAL = {"fp16": np.float32(2.0 ** -14), "bf16": np.float32(2.0 ** -126)}
_TINY_LIFT = {"fp16": np.float32(2.0 ** 24), "bf16": np.float32(2.0 ** 32)}


# ---- T <-> fp32 -------------------------------------------------------------------------------

def bits_dtype(dtype: str) -> type:
    """The numpy type of T's raw bits: np.uint16 for fp16/bf16, np.uint32 for fp32."""
    try:
        return _BITS[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}") from None


def scale_dtype(dtype: str) -> str:
    """S(T), the type a block scale is stored in: T for fp16/bf16, bf16 for fp32."""
    bits_dtype(dtype)  # validates
    return "bf16" if dtype == "fp32" else dtype


def as_bits(x, dtype: str) -> np.ndarray:
    """x as an array of T's raw bits (its shape kept). Float arrays and integer arrays of the other
    raw width (uint32 bits given for a 16-bit dtype, or the reverse) are refused: casting them
    would silently turn values or bit patterns of another type into garbage."""
    want = bits_dtype(dtype)
    a = np.asarray(x)
    if a.dtype.kind == "f" or (a.dtype.kind in "ui" and a.dtype.itemsize in (2, 4)
                               and a.dtype.itemsize != np.dtype(want).itemsize):
        raise TypeError(f"{dtype} tensors travel as {np.dtype(want).name} raw bits, got a {a.dtype} array")
    return a.astype(want, copy=False)


def to_f32(bits: np.ndarray, dtype: str) -> np.ndarray:
    """float(x) of raw T bits (exact)."""
    bits = as_bits(bits, dtype)
    if dtype == "fp16":
        return bits.view(np.float16).astype(np.float32)
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float32).copy()  # fp32: the bits are the value


def from_f32(f: np.ndarray, dtype: str) -> np.ndarray:
    """to_T(f): RNE fp32 -> T bits, overflow -> inf, NaN -> NaN (fp32: the identity)."""
    f = np.asarray(f, dtype=np.float32)
    if dtype == "fp32":
        return f.view(np.uint32).copy()
    if dtype == "fp16":
        with np.errstate(over="ignore"):  # overflow -> inf is the contract
            return f.astype(np.float16).view(np.uint16)  # numpy's float->half: RNE from fp32 bits
    if dtype == "bf16":
        b = f.view(np.uint32).astype(np.uint64)
        rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
        qnan = ((b >> 16) & 0x8000) | 0x7FC0  # keeps the sign; rounding could carry NaN into inf
        return np.where(np.isnan(f), qnan, rounded).astype(np.uint16)
    raise ValueError(f"unknown dtype {dtype!r}")


def round_to(f, dtype: str) -> np.ndarray:
    """fp32 values -> T bits -> fp32 values (helper for callers that draw data in fp32)."""
    return to_f32(from_f32(f, dtype), dtype)


# ---- element codecs (u = v * inv, already scaled) -----------------------------------------------

def _e4m3(u: np.ndarray) -> np.ndarray:
    """RNE to OCP e4m3fn with satfinite, as fp32 values. ml_dtypes overflows to NaN, so clip first
    (np.clip keeps NaN as NaN; +-inf becomes +-448 as satfinite demands)."""
    import ml_dtypes  # lazy: only fp8 needs it

    c = np.clip(u, np.float32(-448), np.float32(448))
    return c.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)


def _e2m1(u: np.ndarray) -> np.ndarray:
    """RNE to e2m1 {0,.5,1,1.5,2,3,4,6}; ties go to the even code; saturate at 6; NaN -> 0."""
    a = np.abs(u)
    # A tie stays down where the lower grid point has the even code (0, 1, 2, 4 are codes
    # 0, 2, 4, 6) and goes up otherwise: hence '<=' below even codes and '<' below odd ones.
    m = np.select(
        [a <= 0.25, a < 0.75, a <= 1.25, a < 1.75, a <= 2.5, a < 3.5, a <= 5.0, a > 5.0],
        [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0],
        default=0.0,  # NaN
    ).astype(np.float32)
    return np.where(np.signbit(u), -m, m).astype(np.float32)


def fp4_unit_scale_inputs() -> np.ndarray:
    """Every fp16 value in [-6, 6] (zeros, subnormals and ties included) as fp32, 31 to a block of
    32 led by a 6.0: each block's fp4 scale is then exactly 1 (fl(1/6) * 6 rounds to 1), so the
    codec sees u = v and must return e2m1(v) for every fp16 input (tests of the fp4 encode)."""
    v = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    v = v[np.isfinite(v) & (np.abs(v) <= 6)]
    v = np.concatenate([v, np.zeros(-len(v) % 31, np.float32)]).reshape(-1, 31)
    return np.concatenate([np.full((len(v), 1), 6, np.float32), v], axis=1).reshape(-1)


# ---- block quantize + dequantize ----------------------------------------------------------------

def _blocks(v: np.ndarray) -> np.ndarray:
    """fp32 values as [blocks, 32], the tail padded with zeros."""
    v = np.asarray(v, dtype=np.float32).reshape(-1)
    out = np.zeros(-(-v.size // BLOCK) * BLOCK, np.float32)
    out[:v.size] = v
    return out.reshape(-1, BLOCK)


def _hadamard(blk: np.ndarray) -> np.ndarray:
    """32-point Walsh-Hadamard of each row, butterflies h = 1, 2, 4, 8, 16: (a, b) -> (a + b, a - b)
    in fp32 for every pair (i, i + h) with i & h == 0."""
    u = blk.astype(np.float32, copy=True)
    for h in (1, 2, 4, 8, 16):
        lo = np.array([i for i in range(BLOCK) if not i & h])
        a, b = u[:, lo].copy(), u[:, lo + h].copy()
        u[:, lo], u[:, lo + h] = a + b, a - b
    return u


_SIGNS = np.array([-1.0 if (ROTATION_SIGNS >> i) & 1 else 1.0 for i in range(BLOCK)], np.float32)


def rotate(blk: np.ndarray) -> np.ndarray:
    """r = H (2^-5 s . x) of each row of 32 (exact sign flips and power-of-two scaling, before the
    butterflies so no partial sum exceeds max|x|)."""
    with np.errstate(all="ignore"):
        return _hadamard((blk * _SIGNS) * np.float32(0.03125)).astype(np.float32)


def unrotate(blk: np.ndarray) -> np.ndarray:
    """x = s . 2^3 H (2^-3 r) of each row of 32."""
    with np.errstate(all="ignore"):
        return ((_hadamard(blk * np.float32(0.125)) * np.float32(8.0)) * _SIGNS).astype(np.float32)


def _qdq(v: np.ndarray, dtype: str, codec: str) -> np.ndarray:
    """D(Q(v)) of fp32 values v, blockwise from v[0]; rotated codecs: unrot(D(Q(rot(v)))), the
    padding of a tail block rotated in with the rest."""
    if codec in ROTATED:
        v = np.asarray(v, dtype=np.float32).reshape(-1)
        blk = rotate(_blocks(v))
        back = unrotate(_plain_qdq(blk.reshape(-1), dtype, ROTATED[codec]).reshape(-1, BLOCK))
        return back.reshape(-1)[:v.size]
    return _plain_qdq(v, dtype, codec)


def _plain_qdq(v: np.ndarray, dtype: str, codec: str) -> np.ndarray:
    """D(Q(v)) of fp32 values v (any length), blockwise from v[0], as fp32 values (T: the tensor
    dtype, which fixes the scale type S(T) and the passthrough's rounding)."""
    v = np.asarray(v, dtype=np.float32).reshape(-1)
    bits_dtype(dtype)  # validates
    if codec in EXACT:
        return round_to(v, dtype)  # "quantize" is to_T, decode is exact
    if codec not in DIVISOR:
        raise ValueError(f"unknown codec {codec!r}")
    n = v.size
    nb = -(-n // BLOCK)
    blk = np.zeros(nb * BLOCK, dtype=np.float32)  # tail padded with zeros (only for absmax)
    blk[:n] = v
    blk = blk.reshape(nb, BLOCK)

    # bitwise max of |v|: NaN (exponent all ones, mantissa != 0) beats +inf, as the spec says
    absbits = blk.view(np.uint32) & np.uint32(0x7FFFFFFF)
    absmax = absbits.max(axis=1).view(np.float32)
    div = np.float32(DIVISOR[codec])
    sdt = scale_dtype(dtype)
    with np.errstate(all="ignore"):
        r = np.float32(1) / div
        q = absmax * r  # fp32 multiply by fl(1/divisor)
        s = round_to(q, sdt)  # the scale is stored in S(T): bf16 for fp32 tensors
        # tiny blocks (spec): a scale below S's smallest normal is taken of the block lifted by 2^K
        tiny = np.isfinite(absmax) & (absmax > 0) & (s < _SMALLEST_NORMAL[sdt])
        lift = np.where(tiny, _TINY_LIFT[sdt], np.float32(1)).astype(np.float32)
        s = np.where(tiny, round_to((absmax * lift) * r, sdt), s)
        blk = blk * lift[:, None]  # exact: a power of two on values far below the overflow
        sf = np.where(np.isfinite(absmax), s, np.float32(np.nan)).astype(np.float32)
        ok = (sf >= _F32_MIN) & (sf <= _F32_MAX)  # spec: below FLT_MIN, 1/sf would overflow
        inv = np.where(ok, np.float32(1) / np.where(ok, sf, np.float32(1)), np.float32(0))
        inv = inv.astype(np.float32)
        u = blk * inv[:, None]  # fp32 multiply
        if codec == "fp8":
            code = _e4m3(u)
        elif codec == "fp4":
            code = _e2m1(u.astype(np.float16).astype(np.float32))  # spec: u rounded to fp16 first
        else:
            qmax = div
            # fminf/fmaxf: a NaN operand returns the other one (np.fmin/np.fmax semantics)
            code = np.rint(np.fmin(np.fmax(u, -qmax), qmax)).astype(np.float32)
        dec = (code * sf[:, None]) * (np.float32(1) / lift)[:, None]  # dropped back: exact but where fp32 subnormal
    return dec.reshape(-1)[:n].astype(np.float32)


def round_trip(x: np.ndarray, dtype: str, codec: str) -> np.ndarray:
    """to_T(D(Q(x))) of 1-D T bits x (blocks from x[0]), returned as T bits."""
    return from_f32(_qdq(to_f32(x, dtype), dtype, codec), dtype)
