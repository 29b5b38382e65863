"""Process-wide defaults read from QUICKREDUCE_* environment variables (as vLLM's knobs work).

| variable                   | default | meaning                                                   |
|----------------------------|---------|-----------------------------------------------------------|
| QUICKREDUCE_MAX_SIZE_MB    | 128     | largest message (MiB) a Communicator accepts by default    |
| QUICKREDUCE_QUANTIZATION   | FP      | default codec: FP, FP8, INT8, INT6, INT4, FP4, LOSSLESS, INT6H, INT4H (or AUTO, AUTO:<codec>) |
| QUICKREDUCE_QUANTIZATION_<COLLECTIVE> | (unset) | the same for one collective only: ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL |
| QUICKREDUCE_TIMEOUT_S      | 10      | how long a kernel waits for a peer before giving up        |
| QUICKREDUCE_TUNE_FILE      | (unset) | tuning table to use instead of the cached/built-in one     |
| QUICKREDUCE_PDL            | 1       | 1: launch with programmatic dependent launch (overlaps the previous kernel's tail) |
| QUICKREDUCE_FUSED_EPILOGUE | 1       | 1: all_reduce_add_rmsnorm runs the one-shot and the epilogue in one kernel where the shape allows |
| QUICKREDUCE_ALLOW_SHARED_GPU | 0     | 1: ranks may share a GPU, for testing on one GPU (their kernels take turns: slow) |
| QUICKREDUCE_PACKET_SEGMENT_MAX_KB | 2048 | largest segment (KiB) reduce-scatter, all-gather and all-to-all send as flag-in-data packets (a codec's also within 2 MiB in from all peers; 0: never) |
"""
from __future__ import annotations

import os

from . import codecs

DEFAULT_MAX_SIZE_MB = 128
DEFAULT_TIMEOUT_S = 10.0

# vLLM's QUICK_REDUCE_QUANTIZATION spellings -> our codec names.
_QUANTIZATION_NAMES = {"FP": "fp16", "NONE": "fp16", "FP16": "fp16", "BF16": "bf16", "FP32": "fp32", "FP8": "fp8",
                       "INT8": "int8", "INT6": "int6", "INT4": "int4", "FP4": "fp4", "LOSSLESS": "lossless", "AUTO": "auto",
                       "INT6H": "int6h", "INT4H": "int4h"}  # ours: the Hadamard-rotated codecs


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if value <= 0:
        raise ValueError(f"{name}={raw!r} must be positive")
    return value


def max_size_bytes() -> int:
    mb = _env_float("QUICKREDUCE_MAX_SIZE_MB", DEFAULT_MAX_SIZE_MB)
    return int(mb * (1 << 20)) // 16 * 16


def timeout_s() -> float:
    return _env_float("QUICKREDUCE_TIMEOUT_S", DEFAULT_TIMEOUT_S)


COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")


def default_codec(collective: str | None = None) -> str:
    """The default codec, per collective when QUICKREDUCE_QUANTIZATION_<COLLECTIVE> is set (e.g.
    QUICKREDUCE_QUANTIZATION_ALL_TO_ALL=FP8 turns low precision on for all-to-all only)."""
    if collective is not None:
        if collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r}; one of {COLLECTIVES}")
        name = "QUICKREDUCE_QUANTIZATION_" + collective.upper()
        if os.environ.get(name, "").strip():
            return _codec_from_env(name, os.environ[name])
    return _codec_from_env("QUICKREDUCE_QUANTIZATION", os.environ.get("QUICKREDUCE_QUANTIZATION", "FP"))


def _codec_from_env(name: str, raw: str) -> str:
    raw = raw.strip()
    upper = raw.upper()
    if upper in _QUANTIZATION_NAMES:
        return _QUANTIZATION_NAMES[upper]
    if raw.lower().startswith(codecs.AUTO_PREFIX):
        try:
            return codecs.AUTO_PREFIX + codecs.parse_codec_request(raw)[1]
        except ValueError as e:
            raise ValueError(f"{name}={raw!r}: {e}") from None
    raise ValueError(f"{name}={raw!r}: expected one of {sorted(_QUANTIZATION_NAMES)} or auto:<codec>")


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw not in ("0", "1", "true", "false", "yes", "no"):
        raise ValueError(f"{name}={raw!r}: expected 0 or 1")
    return raw in ("1", "true", "yes")


DEFAULT_PACKET_SEGMENT_MAX_KB = 2048  # the kernel's most (kPacketMaxSegmentBytes)


def packet_segment_max_bytes() -> int:
    """Largest segment the collectives send on the flag-in-data path (0: never; above 2 MiB the
    kernel's own limit applies). Every rank must use the same value."""
    raw = os.environ.get("QUICKREDUCE_PACKET_SEGMENT_MAX_KB", "")
    if raw == "":
        return DEFAULT_PACKET_SEGMENT_MAX_KB << 10
    try:
        kb = int(raw)
    except ValueError:
        raise ValueError(f"QUICKREDUCE_PACKET_SEGMENT_MAX_KB={raw!r} is not a whole number") from None
    if kb < 0:
        raise ValueError(f"QUICKREDUCE_PACKET_SEGMENT_MAX_KB={raw!r} must be >= 0")
    return kb << 10


def pdl() -> bool:
    return _env_bool("QUICKREDUCE_PDL", True)


def fused_epilogue() -> bool:
    return _env_bool("QUICKREDUCE_FUSED_EPILOGUE", True)


def allow_shared_gpu() -> bool:
    """Ranks on one GPU work (peer memory maps within a device) but their kernels are time-sliced,
    so a call costs a context switch: a testing aid for one-GPU machines, never a way to run."""
    return _env_bool("QUICKREDUCE_ALLOW_SHARED_GPU", False)
