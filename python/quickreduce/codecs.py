"""Codec names and profile numbers, read from the C++ registry (csrc/codecs/codec_list.hpp)."""
from __future__ import annotations

from . import _C

PASSTHROUGH_NAMES = ("fp16", "bf16", "fp32", "none")


def codec_names() -> list[str]:
    """Codec names in profile order: profile 1 is 'fp16' (passthrough), 2 'fp8', ... 6 'fp4', 7 'lossless'."""
    return list(_C.codec_names())


PASSTHROUGH_BITS = {"fp16": 16, "bf16": 16, "fp32": 32}


def exact_codecs() -> list[str]:
    """Registry codecs whose result has the passthrough's bits ('fp16', 'lossless'), in profile order."""
    return [n for n in codec_names() if _C.codec_info(n)["kind"] == "exact"]


def scaled_codecs(rotated: bool = True) -> list[str]:
    """The lossy codecs (one 16-bit scale per 32 values) in profile order; rotated=False leaves out the
    rotated ones (int4h, int6h)."""
    return [n for n in codec_names() if _C.codec_info(n)["kind"] == "scaled"
            and (rotated or not _C.codec_info(n)["rotated_of"])]


def rotated_codecs() -> dict[str, str]:
    """Rotated codec -> the plain codec it transforms ({'int4h': 'int4', 'int6h': 'int6'})."""
    return {n: _C.codec_info(n)["rotated_of"] for n in codec_names() if _C.codec_info(n)["rotated_of"]}


def codec_info(name: str) -> dict:
    """{'name', 'profile', 'id', 'bits_per_value', 'ratio', 'kind', 'rotated_of'} of one codec: kind is
    'exact' (the passthrough's bits) or 'scaled' (lossy, a scale per 32 values); rotated_of names the
    plain codec a rotated one transforms ('' otherwise); bits_per_value is what a value
    costs on the wire (its code and its share of the block scale), ratio is bits_per_value / 16 (the
    wire against a 16-bit tensor). The passthrough names answer for the passthrough in that dtype
    ('fp16', 'bf16': 16 bits; 'fp32': 32 bits; 'none' as 'fp16'). 'auto' and 'auto:<codec>' choose a
    codec per call (by size, dtype and the machine's tuning table), so they have no info: ValueError."""
    if not isinstance(name, str):
        raise TypeError(f"codec must be a string, got {type(name).__name__}")
    lowered = name.lower()
    accepted = codec_names() + [n for n in PASSTHROUGH_NAMES if n != "fp16"]
    if lowered not in accepted:
        why = ("picks a codec per call (by size, dtype and the machine's tuning table), so it has no single "
               "codec's info; " if _names_auto(lowered) else "is unknown; ")
        raise ValueError(f"codec_info: {name!r} {why}codec_info takes one of {accepted}")
    info = dict(_C.codec_info(canonical(lowered)))
    if lowered in PASSTHROUGH_BITS:
        bits = PASSTHROUGH_BITS[lowered]
        info.update(name=lowered, bits_per_value=float(bits), ratio=bits / 16)
    return info


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


AUTO = "auto"
AUTO_PREFIX = AUTO + ":"


def parse_codec_request(name: str, check: bool = True) -> tuple[bool, str | None]:
    """How a codec argument reads, as ``(is_auto, codec)``: ``"auto"`` is ``(True, None)`` (the exact
    method the tuning table ranks fastest); ``"auto:<codec>"`` is ``(True, canonical(<codec>))`` (the
    table's fastest method at most as lossy as that bound); any other name is ``(False, canonical(name))``.
    Case-insensitive. TypeError for a non-string, ValueError for an unknown codec (also after ``auto:``).
    ``check=False`` only splits the lower-cased text (no canonical name, no check, no call into the
    extension: what torch.compile traces without a graph break)."""
    if not isinstance(name, str):
        raise TypeError(f"codec must be a string, got {type(name).__name__}")
    lowered = name.lower()
    if lowered == AUTO:
        return True, None
    is_auto = lowered.startswith(AUTO_PREFIX)
    codec = lowered[len(AUTO_PREFIX):] if is_auto else lowered
    return is_auto, (canonical(codec) if check else codec)


def _names_auto(lowered: str) -> bool:
    """Whether a lower-case codec name is ``auto`` or ``auto:...`` (known codec after the colon or not)."""
    return lowered == AUTO or lowered.startswith(AUTO_PREFIX)


def codec_id(name: str) -> int:
    return int(_C.codec_id(canonical(name)))


def profile_to_codec(profile: int) -> str:
    """The seeds' profile numbers: 1=fp16, 2=fp8, 3=int8, 4=int6, 5=int4, 6=fp4; ours: 7=lossless,
    8=int4h, 9=int6h (rotated)."""
    names = codec_names()
    if not isinstance(profile, int) or not 1 <= profile <= len(names):
        raise ValueError(f"profile must be an int in 1..{len(names)} ({', '.join(f'{i+1}={n}' for i, n in enumerate(names))}), got {profile!r}")
    return names[profile - 1]
