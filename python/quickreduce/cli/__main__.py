"""`quickreduce <command>`: bench, tune, accuracy, codec-speed, info."""
from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "bench": "benchmark collectives against NCCL and peers (nccl-tests style table, CSV, PNG)",
    "tune": "measure and cache the table `codec='auto'` chooses from",
    "accuracy": "error of every codec against a float64 reference (CPU twin, or --device cuda)",
    "codec-speed": "each codec's encode and decode on one GPU (HBM to HBM, rotated beside plain)",
    "e2e": "a tensor-parallel LLM with each all-reduce provider (GPUs), or each codec's fidelity on a real model (CPU)",
    "info": "version, codecs, GPUs, peer access, settings in effect",
}


# Optional packages -> the extra that installs them (pyproject.toml's [project.optional-dependencies]).
EXTRAS = {"ml_dtypes": "cli", "matplotlib": "cli", "rich": "cli",
          "transformers": "e2e", "gguf": "e2e", "accelerate": "e2e", "safetensors": "e2e"}


def version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version as dist_version

        return dist_version("quickreduce")
    except (ImportError, PackageNotFoundError):  # run from a source tree (PYTHONPATH)
        from quickreduce import __version__

        return __version__


def usage(file=sys.stdout) -> None:
    print("usage: quickreduce [--version] {" + ",".join(COMMANDS) + "} [options]\n", file=file)
    for name, text in COMMANDS.items():
        print(f"  {name:<12} {text}", file=file)
    print("\n`quickreduce <command> --help` describes each command's options.", file=file)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-V", "--version"):
        print(f"quickreduce {version()}")
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        usage()
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        usage(sys.stderr)
        print(f"\nquickreduce: error: unknown command {argv[0]!r} (choose from {', '.join(COMMANDS)})",
              file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(f"quickreduce.cli.{argv[0].replace('-', '_')}")
        return module.main(argv[1:]) or 0
    except ModuleNotFoundError as exc:
        package = (exc.name or "").split(".")[0]
        if package not in EXTRAS:
            raise
        print(f"quickreduce {argv[0]}: needs the optional package {package!r}, which is not installed: "
              f"pip install 'quickreduce[{EXTRAS[package]}]'", file=sys.stderr)
        return 1

if __name__ == "__main__":
    sys.exit(main())
