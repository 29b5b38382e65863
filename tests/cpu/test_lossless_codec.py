"""The lossless codec's packing (csrc/codecs/lossless.hpp), run on the CPU through the same code the
kernels use: every block comes back bit for bit, and it packs exactly when a numpy model of the
rule says it should."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quickreduce import _C

WINDOW = 30  # largest e_max - e a 5-bit code holds (code 31: exponent field 0)


def packs_oracle(bits: np.ndarray) -> np.ndarray:
    """Per block of 32 (tail zero-padded): every value's exponent field is 0 or within WINDOW of
    the block's largest."""
    n = bits.size
    padded = np.zeros(-(-n // 32) * 32, dtype=np.uint16)
    padded[:n] = bits
    e = ((padded.astype(np.uint32) >> 7) & 0xFF).reshape(-1, 32)
    e_max = e.max(axis=1, keepdims=True)
    return ((e == 0) | (e_max - e <= WINDOW)).all(axis=1)


def check(bits: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    out, packs = _C.lossless_pack_round_trip(bits)
    np.testing.assert_array_equal(out, bits)  # lossless, whichever form a block takes
    np.testing.assert_array_equal(packs.astype(bool), packs_oracle(bits))
    return packs.astype(bool)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_gaussian_data_packs():
    rng = np.random.default_rng(0)
    packs = check(bf16_bits(rng.standard_normal(1 << 18)))
    assert packs.mean() > 0.999  # why 5-bit codes: a 15-binade window left ~0.3% of blocks out


def test_edge_blocks():
    specials = np.array([0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC0, 0x7F7F, 0xFF7F, 0x3F80],
                        dtype=np.uint16)  # +-0, subnormals, +-inf, NaN, +-max, 1.0
    blocks = [
        np.zeros(32, np.uint16),                                          # all zeros: packs
        np.full(32, 0x3F80, np.uint16),                                   # constant
        np.concatenate([[0x7F7F], np.full(31, 0x0080, np.uint16)]),       # max and the smallest normal
        np.concatenate([[0x7FC0], np.full(31, 0x3F80, np.uint16)]),       # a NaN among ones
        np.tile(specials, 4)[:32],
        bf16_bits(np.ldexp(1.0, np.arange(-14, 18))),                     # exponents 31 apart: one too many
        bf16_bits(np.ldexp(1.0, np.r_[np.arange(-13, 18), 0]) * -1.5),    # 30 apart: packs
    ]
    packs = check(np.concatenate(blocks))
    assert packs.tolist() == [True, True, False, False, False, False, True]


@pytest.mark.parametrize("n", [1, 7, 31, 33, 1000])
def test_tails(n):
    rng = np.random.default_rng(n)
    check(bf16_bits(rng.standard_normal(n) * 100))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=300))
def test_any_bits(values):
    check(np.array(values, dtype=np.uint16))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 0xFF), min_size=1, max_size=300), st.integers(0, 0xFF))
def test_narrow_exponents(mantissas, e_base):
    """Values whose exponents sit near each other (real data): the packed path round-trips."""
    rng = np.random.default_rng(len(mantissas))
    e = np.clip(e_base - rng.integers(0, 40, len(mantissas)), 0, 255).astype(np.uint32)
    m = np.array(mantissas, dtype=np.uint32)
    check(((m & 0x80) << 8 | e << 7 | (m & 0x7F)).astype(np.uint16))
