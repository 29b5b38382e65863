"""`quickreduce info`: what this installation and machine offer: version, codecs, build, GPUs,
peer access between them, QUICKREDUCE_* settings and the tuning table `auto` would use."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..tuning import driver_version, load_table
from .launch import multicast_settings


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("quickreduce")
    except Exception:  # noqa: BLE001 - not installed as a distribution (e.g. PYTHONPATH)
        import quickreduce

        return getattr(quickreduce, "__version__", "unknown")


def _build_info(module: Any) -> dict[str, Any]:
    """Whatever build facts the extension exposes; it need not expose any."""
    info = {}
    for name in ("build_info", "__build_info__", "BUILD_INFO", "cuda_archs", "cuda_version",
                 "git_revision", "MAX_WORLD_SIZE"):
        value = getattr(module, name, None)
        if value is None:
            continue
        try:
            info[name] = value() if callable(value) else value
        except Exception as exc:  # noqa: BLE001
            info[name] = f"<error: {exc}>"
    return info


def collect() -> list[tuple[str, str]]:
    """(label, text) lines; every probe is guarded, so info works on a broken install too."""
    lines: list[tuple[str, str]] = [("quickreduce", _version())]
    try:
        import quickreduce as qr

        lines.append(("codecs", ", ".join(qr.codec_names())))
        extension = getattr(qr, "_C", None)
        if extension is None:
            import importlib

            extension = importlib.import_module("quickreduce._C")
        for key, value in _build_info(extension).items():
            lines.append((f"build {key}", str(value)))
        limits = {w: extension.one_shot_max_bytes(w) >> 20 for w in (2, 4, 8)}
        lines.append(("one-shot limit", ", ".join(f"{mib} MiB on {w} GPUs" for w, mib in limits.items())))
    except Exception as exc:  # noqa: BLE001
        lines.append(("extension", f"not usable: {type(exc).__name__}: {exc}"))

    try:
        import torch
    except ImportError:
        lines.append(("torch", "not installed"))
        return lines
    lines.append(("torch", f"{torch.__version__} (CUDA {torch.version.cuda})"))
    lines.append(("driver", driver_version()))
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count:
        try:
            version = torch.cuda.nccl.version()  # a tuple in recent torch, an int before
            lines.append(("NCCL", ".".join(map(str, version)) if isinstance(version, tuple)
                          else str(version)))
        except Exception:  # noqa: BLE001
            pass
    lines.append(("GPUs", str(count)))
    for i in range(count):
        p = torch.cuda.get_device_properties(i)
        lines.append((f"  cuda:{i}", f"{p.name}, sm_{p.major}{p.minor}, {p.multi_processor_count} "
                                     f"SMs, {p.total_memory / 2**30:.0f} GiB"))
    if count > 1:
        lines.append(("P2P access", "row can read/write column's memory"))
        lines.append(("", "     " + " ".join(f"{j:>3}" for j in range(count))))
        for i in range(count):
            marks = ["  -" if i == j else ("yes" if torch.cuda.can_device_access_peer(i, j)
                                           else " NO") for j in range(count)]
            lines.append(("", f"{i:>3}: " + " ".join(marks)))
    for name in sorted(n for n in os.environ if n.startswith("QUICKREDUCE_")):
        lines.append((f"env {name}", os.environ[name]))
    for name, value in multicast_settings():  # NVLink multicast, as NCCL/torch/NVSHMEM will see it
        lines.append((f"env {name}", value))
    if count:
        table = load_table(torch.cuda.get_device_name(0), count)
        measured = "measured" if table.measured else "not measured"
        lines.append((f"tuning (x{count})", f"{table.source} [{measured}]"))
        if table.note:
            lines.append(("", table.note))
    return lines


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog="quickreduce info", description=__doc__)


def main(argv: list[str] | None = None) -> int:
    build_parser().parse_args(argv)
    lines = collect()
    width = max(len(label) for label, _ in lines)
    for label, text in lines:
        print(f"{label:<{width}}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
