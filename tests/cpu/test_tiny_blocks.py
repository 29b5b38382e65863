"""Tiny-magnitude blocks are kept, not flushed (docs/codec-spec.md, "Tiny blocks"): a block whose
scale would fall below its 16-bit format's smallest normal is lifted by a power of two, so fp16
blocks near 1e-6 and bf16 blocks near 1e-37 come back with the same relative error as blocks of
magnitude 1; the twin and the oracle agree on them bit for bit."""

import numpy as np
import pytest

from quickreduce import _C
from quickreduce import oracle

SCALED = ("fp8", "int8", "int6", "int6h", "int4", "int4h", "fp4")
# magnitudes whose block scale underflows S(T) for every scaled codec (fp8's divisor 448 is the largest)
TINY = {"fp16": (1e-6, 3e-7), "bf16": (1e-37, 3e-38), "fp32": (1e-37, 1e-40)}


def _relative_error(x_bits, dtype, codec):
    out = oracle.to_f32(np.asarray(_C.twin_round_trip(x_bits, dtype, codec)) if dtype != "fp32"
                        else oracle.round_trip(x_bits, dtype, codec), dtype).astype(np.float64)
    ref = oracle.to_f32(x_bits, dtype).astype(np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("dtype", ("fp16", "bf16"))
@pytest.mark.parametrize("codec", SCALED)
def test_tiny_blocks_keep_their_relative_error(dtype, codec):
    rng = np.random.default_rng(7)
    g = rng.standard_normal(32 * 256).astype(np.float32)
    normal = _relative_error(oracle.from_f32(g, dtype), dtype, codec)
    for magnitude in TINY[dtype]:
        x = oracle.from_f32(g * np.float32(magnitude), dtype)
        err = _relative_error(x, dtype, codec)
        # the input itself is coarser near fp16's subnormals (1e-6 has ~4 significant bits there)
        assert err < 2.0 * normal + 0.02, (magnitude, err, normal)
        twin = oracle.to_f32(np.asarray(_C.twin_round_trip(x, dtype, codec)), dtype)
        assert np.array_equal(twin, oracle.to_f32(oracle.round_trip(x, dtype, codec), dtype))  # values: a zero's sign is free


@pytest.mark.parametrize("codec", ("fp8", "int8", "int4", "int4h"))
def test_tiny_blocks_beside_normal_blocks(codec):
    """A tiny block next to normal ones: each block keeps its own magnitude; normal blocks'
    bits are exactly what they were without the rule (their scale has no flag)."""
    rng = np.random.default_rng(3)
    g = rng.standard_normal(32 * 4).astype(np.float32)
    g[32:64] *= np.float32(1e-37)
    x = oracle.from_f32(g, "bf16")
    out = oracle.to_f32(oracle.round_trip(x, "bf16", codec), "bf16")
    tiny = out[32:64].astype(np.float64) / 1e-37
    assert np.max(np.abs(tiny - g[32:64] / np.float32(1e-37))) < 0.2 * np.max(np.abs(g[32:64] / np.float32(1e-37)))
    alone = oracle.to_f32(oracle.round_trip(oracle.from_f32(g[:32], "bf16"), "bf16", codec), "bf16")
    assert np.array_equal(out[:32], alone)


def test_fp32_tiny_blocks_in_the_collectives():
    """fp32 tensors take a bf16 scale: fp32 blocks down to its subnormals keep their values."""
    rng = np.random.default_rng(5)
    g = rng.standard_normal(32 * 8).astype(np.float32) * np.float32(1e-39)
    xs = [g.view(np.uint32), (-g).view(np.uint32)]
    out = np.asarray(_C.twin_all_gather(xs, "fp32", "int8")).view(np.float32).astype(np.float64)
    ref = np.concatenate([g, -g]).astype(np.float64)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 0.05
