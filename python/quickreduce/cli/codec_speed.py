"""`quickreduce codec-speed`: what each codec costs on one GPU, where no link plays a part.

Each codec encodes a tensor in HBM into its wire form and decodes it back, with the lanes the
collectives use (the rotated codecs rotate in registers and shuffles, as in the all-reduce). Timed
with CUDA events around a CUDA graph of many calls, median of several replays, on a tensor several
times the L2; the output of each codec is checked bit for bit against the CPU twin's round trip on
a sample, so a number is only printed for a codec that computes what the spec says.

    quickreduce codec-speed --numel 256M --dtype bf16
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys

import numpy as np

from .. import _C
from ..codecs import codec_id, rotated_codecs, scaled_codecs
from .report import parse_size

SCALED_CODECS = tuple(scaled_codecs())
ROTATED_PLAIN = rotated_codecs()
CHECK_VALUES = 1 << 20  # the sample compared with the twin (the twin is slow on big tensors)


def _time_ms(torch, fn, calls: int, replays: int) -> float:
    """Median milliseconds per call of fn over a captured graph of `calls` calls."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()  # warm up outside capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(calls):
                fn()
    times = []
    for _ in range(replays + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times[1:])  # the first replay warms the graph


def _codec_pass(x, wire, out, codec: str, encode: bool, decode: bool) -> None:
    """Encode x (a 1-D fp16/bf16 CUDA tensor) into wire and/or decode wire into out, on the
    current stream."""
    import torch

    dtype_id = {torch.bfloat16: _C.DTYPE_BFLOAT16, torch.float16: _C.DTYPE_FLOAT16}[x.dtype]
    _C.codec_speed(x.data_ptr(), wire.data_ptr(), out.data_ptr(), x.numel(), dtype_id, codec_id(codec),
                   torch.cuda.current_stream().cuda_stream, encode, decode)


def _wire_for(x, codec: str):
    import torch

    return torch.empty(_C.codec_wire_bytes(x.numel(), codec_id(codec)), dtype=torch.uint8, device=x.device)


def gpu_round_trip(x, codec: str):
    """to_T(D(Q(x))) of a 1-D fp16/bf16 CUDA tensor, encoded and decoded on the GPU (blocks from
    x[0]; numel a multiple of 8)."""
    import torch

    out = torch.empty_like(x)
    _codec_pass(x, _wire_for(x, codec), out, codec, True, True)
    return out


def twin_mismatch(x, out, codec: str) -> str | None:
    """None if the GPU's round trip `out` of x has the CPU twin's values (a zero's sign is free,
    as the spec says), else where it differs."""
    import torch

    dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}[x.dtype]
    bits = x.view(torch.int16).cpu().numpy().view(np.uint16)
    got = out.view(torch.int16).cpu().numpy().view(np.uint16)
    want = np.asarray(_C.twin_round_trip(bits, dtype, codec))
    same = (got == want) | (((got | want) & 0x7FFF) == 0)
    if same.all():
        return None
    bad = int(np.argmax(~same))
    return f"{codec} {dtype}: value {bad} (input {bits[bad]:#06x}): gpu {got[bad]:#06x}, twin {want[bad]:#06x}"


def run(numel: int, dtype_name: str, codecs: list[str], calls: int, replays: int) -> list[dict]:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("codec-speed needs a CUDA GPU")
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(numel, generator=gen, device="cuda", dtype=torch.float32).to(torch_dtype)
    out = torch.empty_like(x)
    rows = []
    for name in codecs:
        wire = _wire_for(x, name)

        def launch(encode: bool, decode: bool) -> None:
            _codec_pass(x, wire, out, name, encode, decode)

        launch(True, True)
        torch.cuda.synchronize()
        problem = twin_mismatch(x[:CHECK_VALUES], out[:CHECK_VALUES], name)
        if problem:
            raise SystemExit(f"codec-speed: the GPU differs from the CPU twin: {problem}")
        enc = _time_ms(torch, lambda: launch(True, False), calls, replays)
        dec = _time_ms(torch, lambda: launch(False, True), calls, replays)
        nbytes = x.numel() * x.element_size()
        rows.append({"codec": name, "dtype": dtype_name, "numel": numel, "wire_bytes": wire.numel(),
                     "encode_us": enc * 1e3, "decode_us": dec * 1e3, "round_trip_us": (enc + dec) * 1e3,
                     "encode_GBps": nbytes / (enc * 1e-3) / 1e9, "decode_GBps": nbytes / (dec * 1e-3) / 1e9,
                     "matches_twin": True})
        del wire
    plain = {r["codec"]: r for r in rows}
    for r in rows:
        base = plain.get(ROTATED_PLAIN.get(r["codec"], ""))
        r["vs_plain"] = r["round_trip_us"] / base["round_trip_us"] if base else float("nan")
    return rows


def _print(rows: list[dict], device: str) -> None:
    print(f"# quickreduce codec-speed: {device}, {rows[0]['numel']} {rows[0]['dtype']} values, one GPU "
          "(encode: HBM tensor -> wire form in HBM; decode: back; CUDA graph, median)")
    print(f"# {'codec':>6} {'wire MB':>9} {'encode us':>10} {'GB/s':>7} {'decode us':>10} {'GB/s':>7} "
          f"{'trip us':>9} {'vs plain':>8}  twin")
    for r in rows:
        ratio = "" if r["vs_plain"] != r["vs_plain"] else f"{r['vs_plain']:.3f}"
        print(f"  {r['codec']:>6} {r['wire_bytes'] / 1e6:9.1f} {r['encode_us']:10.1f} {r['encode_GBps']:7.0f} "
              f"{r['decode_us']:10.1f} {r['decode_GBps']:7.0f} {r['round_trip_us']:9.1f} {ratio:>8}  ok")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quickreduce codec-speed", description=__doc__.split("\n\n")[0])
    p.add_argument("--numel", type=parse_size, default=parse_size("256M"),
                   help="values in the tensor (K/M/G suffixes; default 256M: 512 MB of bf16, ~10x the L2)")
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16", help="tensor dtype (default bf16)")
    p.add_argument("--codecs", default=",".join(SCALED_CODECS),
                   help=f"comma-separated, from {','.join(SCALED_CODECS)}")
    p.add_argument("--calls", type=int, default=20, help="calls per captured graph")
    p.add_argument("--replays", type=int, default=7, help="timed graph replays, median (default 7)")
    p.add_argument("--csv", help="write the rows here")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    codecs = [c for c in args.codecs.split(",") if c]
    unknown = [c for c in codecs if c not in SCALED_CODECS]
    if unknown:
        p.error(f"codec-speed times the block-scaled codecs only; not {unknown}")
    if args.numel <= 0 or args.numel % 8:
        p.error("--numel must be a positive multiple of 8")
    import torch

    rows = run(args.numel, args.dtype, codecs, args.calls, args.replays)
    _print(rows, torch.cuda.get_device_name())
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
