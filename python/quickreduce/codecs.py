"""Codec names and profile numbers, read from the C++ registry (csrc/codecs/codec_list.hpp)."""
from __future__ import annotations

from . import _C

PASSTHROUGH_NAMES = ("fp16", "bf16", "fp32", "none")


def codec_names() -> list[str]:
    """Codec names in profile order: profile 1 is 'fp16' (passthrough), 2 'fp8', ... 6 'fp4', 7 'lossless'."""
    return list(_C.codec_names())


def codec_info(name: str) -> dict:
    """{'name', 'profile', 'id', 'bits_per_value', 'ratio'} of a codec name."""
    return dict(_C.codec_info(canonical(name)))


def canonical(name: str) -> str:
    """Lower-case codec name; 'bf16'/'fp32'/'none' are the passthrough codec 'fp16' (exact in the tensor's dtype)."""
    if not isinstance(name, str):
        raise TypeError(f"codec must be a string, got {type(name).__name__}")
    lowered = name.lower()
    if lowered in PASSTHROUGH_NAMES:
        return "fp16"
    if lowered not in codec_names():
        raise ValueError(f"unknown codec {name!r}; choose from {codec_names() + ['bf16', 'auto', 'auto:<codec>']}")
    return lowered


def codec_id(name: str) -> int:
    return int(_C.codec_id(canonical(name)))


def profile_to_codec(profile: int) -> str:
    """The seeds' profile numbers: 1=fp16, 2=fp8, 3=int8, 4=int6, 5=int4, 6=fp4; ours: 7=lossless,
    8=int4h, 9=int6h (rotated)."""
    names = codec_names()
    if not isinstance(profile, int) or not 1 <= profile <= len(names):
        raise ValueError(f"profile must be an int in 1..{len(names)} ({', '.join(f'{i+1}={n}' for i, n in enumerate(names))}), got {profile!r}")
    return names[profile - 1]
