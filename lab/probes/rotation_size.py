"""How large must the rotation be for the rotated codecs to meet issue 30's ratios in the all-reduce?

The shipped int4h/int6h rotate each block of 32 (a 32-point Walsh-Hadamard transform). In a single
round trip that meets the targets (int4h <= 0.65x plain int4's error, int6h <= 0.6x on heavy tails and
outlier channels), but the two-shot all-reduce quantizes twice and, on the README's tables, lands at
int4h 0.65-0.77x. This probe simulates the two-shot (W ranks, the owner's own values exact, fp32 sums
in rank order, the sum re-quantized, scales per block of 32 always) with a sign-flipped Hadamard
rotation over R = 32, 64, 128, 256 values (R / 32 scale blocks share one rotation; R = 256 is a whole
warp's 8 values a thread), on quickreduce.cli.accuracy's data (gaussian, student_t, llm).

Approximations (ratios, not the codecs' bits): round to nearest, fp32 block scales absmax / qmax.
Run: python3 lab/probes/rotation_size.py (with quickreduce installed; 16 s).

Session 16: R = 32 is the best of the four everywhere. Student-t, int4, W = 2/4/8: 0.653 / 0.666 /
0.683 at R = 32, 0.687 / 0.695 / 0.710 at R = 256; int6 0.617-0.652 at 32, 0.649-0.679 at 256; llm
int4 0.85-0.90 at 32 (this approximation; the codec's own table says 0.73-0.77), 0.97-1.04 at 256;
Gaussian 1.00 at every R. A wider rotation spreads one block's outlier over several scale blocks and
raises all their scales: a larger transform is not the way to the all-reduce's ratios.
"""
import numpy as np

from quickreduce.cli.accuracy import make_input
from quickreduce.oracle.codecs import to_f32

NUMEL = 32 * 4096 * 8
SIGNS = np.where(np.random.default_rng(7).random(256) < 0.5, -1.0, 1.0).astype(np.float32)


def hadamard(n: int) -> np.ndarray:
    h = np.ones((1, 1), np.float32)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def rotate(x, r, inverse=False):
    if r == 0:
        return x
    h = hadamard(r)
    v = x.reshape(-1, r)
    return ((v @ h) * SIGNS[:r]).reshape(-1) if inverse else ((v * SIGNS[:r]) @ h).reshape(-1)


def quantize(x, qmax):
    b = x.reshape(-1, 32)
    scale = np.abs(b).max(1, keepdims=True) / qmax
    scale[scale == 0] = 1
    return (np.clip(np.rint(b / scale), -qmax, qmax) * scale).reshape(-1)


def all_reduce(xs, qmax, r):
    """Two-shot: every non-owned part crosses once quantized, the sum once more; returns the output."""
    w = len(xs)
    part = len(xs[0]) // w
    out = np.empty_like(xs[0])
    for owner in range(w):
        sl = slice(owner * part, (owner + 1) * part)
        acc = np.zeros(part, np.float32)
        for src in range(w):
            v = rotate(xs[src][sl], r)
            acc += v if src == owner else quantize(v, qmax)
        out[sl] = rotate(quantize(acc, qmax), r, inverse=True)
    return out


def main():
    print("error relative to plain (rel. L2 error of the all-reduce); R = rotation size, 0 = plain")
    sizes = (0, 32, 64, 128, 256)
    print(f"{'data':10} {'codec':6} {'W':>2} " + " ".join(f"{'R=' + str(r):>8}" for r in sizes))
    for data in ("gaussian", "student_t", "llm"):
        for name, qmax in (("int4", 7), ("int6", 31)):
            for w in (2, 4, 8):
                xs = [to_f32(make_input(data, "bf16", k, NUMEL, 1), "bf16").astype(np.float32) for k in range(w)]
                exact = np.sum(np.stack(xs).astype(np.float64), 0)
                errs = []
                for r in sizes:
                    y = all_reduce(xs, qmax, r)
                    errs.append(np.linalg.norm(y - exact) / np.linalg.norm(exact))
                print(f"{data:10} {name:6} {w:>2} " + " ".join(f"{e / errs[0]:8.3f}" for e in errs))


if __name__ == "__main__":
    main()
