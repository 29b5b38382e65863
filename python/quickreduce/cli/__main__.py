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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: quickreduce {" + ",".join(COMMANDS) + "} [options]\n")
        for name, text in COMMANDS.items():
            print(f"  {name:<12} {text}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(f"quickreduce.cli.{argv[0].replace('-', '_')}")
    return module.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
