"""Could a per-block choice of rotated or plain reach issue 30's accuracy targets in the all-reduce?
An upper bound on what such a codec can gain: each block's round trip takes whichever of the plain
and the rotated codec has the smaller error for that block (an oracle choice, free of the flag bit
and of the extra transform the owner would need when ranks choose differently), in every shot of the
two-shot (the W - 1 first shots of the owner's block, then the sum's). Data as `quickreduce accuracy`
makes it (student-t, llm); error relative L2 against the exact sum, against plain int4 / int6.
Run: python lab/probes/per_block_choice_bound.py
"""
import numpy as np

from quickreduce.cli.accuracy import make_input
from quickreduce.oracle import codecs as oc


def best_of(x, plain, rotated):  # x [blocks, 32] fp32 -> each block's better round trip
    a = oc._qdq(x.reshape(-1), "bf16", plain).reshape(x.shape)
    b = oc._qdq(x.reshape(-1), "bf16", rotated).reshape(x.shape)
    ea, eb = ((a - x) ** 2).sum(1), ((b - x) ** 2).sum(1)
    return np.where((eb < ea)[:, None], b, a)


def qdq(x, codec):
    return oc._qdq(x.reshape(-1), "bf16", codec).reshape(x.shape)


def two_shot(xs, rt):  # rank 0 owns every block; the others' first shots, then the sum's
    s = xs[0] + sum(rt(x) for x in xs[1:])
    return rt(s)


numel = 262144
for data in ("student_t", "llm"):
    for W in (2, 4, 8):
        xs = [oc.to_f32(make_input(data, "bf16", r, numel, 0), "bf16").reshape(-1, 32) for r in range(W)]
        ref = sum(x.astype(np.float64) for x in xs)
        err = lambda out: np.linalg.norm(out - ref) / np.linalg.norm(ref)
        row = []
        for plain, rot in (("int4", "int4h"), ("int6", "int6h")):
            e_plain = err(two_shot(xs, lambda x: qdq(x, plain)))
            e_rot = err(two_shot(xs, lambda x: qdq(x, rot)))
            e_best = err(two_shot(xs, lambda x: best_of(x, plain, rot)))
            row.append(f"{rot}/{plain} {e_rot / e_plain:.3f}  best-of/{plain} {e_best / e_plain:.3f}")
        print(f"{data:9s} W={W}  " + "   ".join(row), flush=True)
