"""Why int4h cannot reach 0.65x int4's all-reduce error on the "llm" data (issue 30's target): in a block
holding an outlier channel of magnitude A, the rotation spreads the outlier's own rounding error over
the block instead of removing it, so the rotated block's error is about the plain codec's error of the
outlier alone, (W A / 7)^2 / 12, and rotation gains only the other 31 values, which plain int4 rounds to
zero (31 W of error energy). The larger W * A, the closer the ratio gets to 1.
The oracle's codecs (quickreduce.oracle), one block = one outlier at A among 31 N(0, 1) values per rank,
the same channel on every rank; the two-shot's error: W - 1 first shots plus the second shot of the sum.
Run: python lab/probes/outlier_block_bound.py
"""
import numpy as np

from quickreduce.oracle import codecs as oc


def qdq(v, codec):  # fp32 -> fp32 through the codec (bf16 scales), blocks of 32
    return oc._qdq(v.astype(np.float32).reshape(-1), "bf16", codec).reshape(v.shape)


def two_shot_err(xs, codec):
    """||out - sum||^2 of the two-shot: rank 0 owns every block (its values exact), the others' first
    shot quantized, the sum quantized once more; rotated codecs sum in the rotated domain."""
    W = len(xs)
    if codec in oc.ROTATED:
        plain = oc.ROTATED[codec]
        rs = [oc.rotate(x) for x in xs]
        s = rs[0] + sum(qdq(r, plain) for r in rs[1:])
        out = oc.unrotate(qdq(s, plain))
    else:
        s = xs[0] + sum(qdq(x, codec) for x in xs[1:])
        out = qdq(s, codec)
    return float(((out - sum(xs)) ** 2).sum())


rng = np.random.default_rng(0)
blocks = 4096
print("   A   W   int4h/int4 (error norm, blocks with an outlier only)")
for A in (20, 50, 100):
    for W in (2, 4, 8):
        xs = []
        for _ in range(W):
            x = rng.standard_normal((blocks, 32)).astype(np.float32)
            x[:, 5] *= A
            xs.append(x)
        e4, e4h = two_shot_err(xs, "int4"), two_shot_err(xs, "int4h")
        print(f"{A:4d} {W:3d}   {np.sqrt(e4h / e4):.3f}")
