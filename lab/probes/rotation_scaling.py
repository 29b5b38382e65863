"""Can the rotated codecs drop their power-of-two scalings and keep the spec's bits (issue 30's cost)?

The spec (docs/codec-spec.md, "Rotated codecs") rotates r = H (2^-5 s . x) and back x = s . 2^3 H (2^-3 r):
8 FMUL a lane forward, 16 back, on an encode the ncu profile of session 17 found bound by its
instruction count (int4h 1.61x int4's instructions on H200). A power of two commutes with every fp32
rounding of the normal range, so the scalings could go where nothing overflows and nothing rounds as
a subnormal. This probe checks that on the oracle's own arithmetic, bit for bit, over blocks of every
magnitude a bf16 or fp16 tensor holds (gaussian and heavy-tailed, an outlier per block, subnormal
inputs, values near the dtype's largest):

- forward: H(2^-5 s x) against 2^-5 H(s x) (the 2^-5 then folded into the block's inverse scale);
- inverse of one decoded block (the two-shot's gather, all-gather, all-to-all, codec-speed):
  2^3 H(2^-3 r) against H(r), r = D(Q(rotated block));
- inverse of a sum of W decoded blocks in the rotated domain (reduce-scatter), W = 8.

It prints, for each check and magnitude class, how many blocks differ and the largest input where
one does. Run: python3 lab/probes/rotation_scaling.py (quickreduce installed; 10 s).

Session 17: fp16, int4 and int6, every magnitude (1e-7 to 6e4), gaussian and heavy-tailed: 0 blocks
differ in all three checks: for fp16 tensors all the scalings can go, bit for bit. bf16: 0 from 1e-38
to 1e30; forward differs where a block's values pass ~1e36 (unscaled sums overflow: 6 of 4096 blocks
at 1e36 with outliers, 2571 at 1e37, all at 1e38), the inverse of one block only at 1e38 (39-78);
the inverse of a W = 8 sum from 1e37 (367-4094), and int6's inverse at 1e-40 (bf16 subnormals: 1303
gaussian blocks, 3914 for the sum), where 2^-3 r rounds as an fp32 subnormal. So bf16 needs a
per-block guard: forward, redo the block scaled when the unscaled block max is not finite (an
overflow shows as inf or NaN there); inverse, keep the scalings where the block scale is outside
about [2^-100, 2^100].
"""
import numpy as np

from quickreduce.oracle.codecs import BLOCK, _SIGNS, _hadamard, _plain_qdq, rotate, round_to, unrotate

BLOCKS = 4096
RNG = np.random.default_rng(17)
LARGEST = {"bf16": 3.3895314e38, "fp16": 65504.0}


def draw(dtype: str, magnitude: float, heavy: bool) -> np.ndarray:
    """BLOCKS x 32 values of the dtype (as fp32), about `magnitude`, one 30x outlier a block if heavy."""
    v = (RNG.standard_t(3, (BLOCKS, BLOCK)) if heavy else RNG.standard_normal((BLOCKS, BLOCK))).astype(np.float64)
    if heavy:
        v[np.arange(BLOCKS), RNG.integers(0, BLOCK, BLOCKS)] *= 30.0
    v = np.clip(v * magnitude, -LARGEST[dtype], LARGEST[dtype]).astype(np.float32)
    return round_to(v.reshape(-1), dtype).reshape(BLOCKS, BLOCK)  # rounded to the dtype


def differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) != b.view(np.uint32)).any(axis=1)


def main() -> None:
    classes = {"bf16": [1e-40, 1e-38, 1e-36, 1e-30, 1.0, 1e30, 1e36, 1e37, 1e38],
               "fp16": [1e-7, 1e-5, 1e-3, 1.0, 100.0, 3e3, 6e4]}
    with np.errstate(all="ignore"):
        for dtype, mags in classes.items():
            for codec in ("int4", "int6"):
                print(f"{dtype} {codec}: blocks that differ of {BLOCKS} (forward / inverse one block / inverse W=8 sum)")
                for mag in mags:
                    row = []
                    for heavy in (False, True):
                        x = draw(dtype, mag, heavy)
                        signed = x * _SIGNS
                        fwd = differs(_hadamard(signed * np.float32(0.03125)), _hadamard(signed) * np.float32(0.03125))
                        r = rotate(x)
                        dec = _plain_qdq(r.reshape(-1), dtype, codec).reshape(BLOCKS, BLOCK)
                        inv = differs(unrotate(dec), _hadamard(dec) * _SIGNS)
                        acc = np.zeros_like(dec)
                        for _ in range(8):
                            acc = acc + _plain_qdq(rotate(draw(dtype, mag, heavy)).reshape(-1), dtype, codec).reshape(BLOCKS, BLOCK)
                        inv_sum = differs(unrotate(acc), _hadamard(acc) * _SIGNS)
                        row.append(f"{'t3+outlier' if heavy else 'gaussian'} {fwd.sum()}/{inv.sum()}/{inv_sum.sum()}")
                    print(f"  ~{mag:8.0e}: " + ",  ".join(row))


if __name__ == "__main__":
    main()
