# Session 18 (issue 30): the rotated codecs' error with the 32-bit sign pattern against lane-invariant
# 8-bit ones (lab/wip/rotation-lane-signs.patch), on the oracle. Run: python3 lab/probes/rotation_sign_pattern.py
# Single-quantization error of int4h / int6h with the 32-bit sign pattern against a lane-invariant
# 8-bit one, on the data shapes of the accuracy report: Gaussian, student-t (3), outlier channels.
import numpy as np
import quickreduce.oracle.codecs as oc

rng = np.random.default_rng(0)
n = 1 << 20
def datasets():
    g = rng.standard_normal(n).astype(np.float32)
    t = rng.standard_t(3, n).astype(np.float32)
    ch = rng.standard_normal((n // 4096, 4096)).astype(np.float32)
    cols = rng.choice(4096, 16, replace=False)
    ch[:, cols] *= rng.uniform(20, 100, 16).astype(np.float32)
    const = np.repeat(rng.standard_normal(n // 32).astype(np.float32), 32)  # constant blocks
    return {"gaussian": g, "student_t3": t, "outlier_channels": ch.reshape(-1), "constant_blocks": const}

def rel(x, y):
    return float(np.linalg.norm(x - y) / np.linalg.norm(x))

data = datasets()
for name, pattern in (("0x9E3779B9", 0x9E3779B9), ("0xB9B9B9B9", 0xB9B9B9B9), ("0x9E9E9E9E", 0x9E9E9E9E)):
    oc._SIGNS = np.array([-1.0 if (pattern >> i) & 1 else 1.0 for i in range(32)], np.float32)
    row = []
    for dname, x in data.items():
        xb = oc.round_to(x, "bf16")
        for codec, plain in (("int4h", "int4"), ("int6h", "int6")):
            e_rot = rel(xb, oc._qdq(xb, "bf16", codec))
            e_pl = rel(xb, oc._qdq(xb, "bf16", plain))
            row.append(f"{dname}/{codec}: {e_rot:.4f} ({e_rot / e_pl:.3f}x)")
    print(name); print("  " + "\n  ".join(row))
