"""The packed one-shot's wire format (csrc/codecs/lossless_group.hpp), run on the CPU through the
code the kernel uses: every group comes back bit for bit, it packs exactly when a numpy model of
the rule says so, and what goes on the wire keeps the arrival rule (every word sent has bit 31,
nothing else is written)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quickreduce import _C

GROUP = 40
WINDOW = 14  # largest E - e a 4-bit code holds (k = 0: exponent field 0)
ARRIVED, PACKED_FORM = 1 << 31, 1 << 30


def packs_oracle(bits: np.ndarray) -> np.ndarray:
    """Per group of 40 (tail zero-padded): every exponent field is 0 or within WINDOW of the largest."""
    padded = np.zeros(-(-bits.size // GROUP) * GROUP, dtype=np.uint16)
    padded[:bits.size] = bits
    e = ((padded.astype(np.int32) >> 7) & 0xFF).reshape(-1, GROUP)
    return ((e == 0) | (e.max(axis=1, keepdims=True) - e <= WINDOW)).all(axis=1)


def check(bits: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    out, packed, wire = _C.lossless_group_round_trip(bits)
    packed = packed.astype(bool)
    np.testing.assert_array_equal(out, bits)  # lossless, whichever form a group takes
    np.testing.assert_array_equal(packed, packs_oracle(bits))
    sent = np.where(packed, 16, 24)
    words = np.arange(24)[None, :]
    marked = (wire & ARRIVED) != 0
    assert (marked == (words < sent[:, None])).all()  # sent words marked, the rest left empty (0)
    assert (wire[words.repeat(len(wire), 0) >= sent[:, None]] == 0).all()
    np.testing.assert_array_equal((wire[:, 3] & PACKED_FORM) != 0, packed)  # the form flag
    return packed


def bf16_bits(x) -> np.ndarray:
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_gaussian_data_mostly_packs():
    rng = np.random.default_rng(0)
    packed = check(bf16_bits(rng.standard_normal(GROUP * 20000)))
    assert packed.mean() > 0.99  # a value 15 binades under its group's largest is rare


def test_edge_groups():
    specials = np.array([0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC0, 0x7F7F, 0xFF7F, 0x3F80],
                        dtype=np.uint16)  # +-0, subnormals, +-inf, NaN, +-max, 1.0
    groups = [
        np.zeros(GROUP, np.uint16),                                         # all zeros: packs
        np.full(GROUP, 0x8000, np.uint16),                                  # all -0.0: packs, signs kept
        np.full(GROUP, 0xBF80, np.uint16),                                  # constant -1
        np.concatenate([[0x7F7F], np.full(GROUP - 1, 0x0080, np.uint16)]),  # max and the smallest normal
        np.concatenate([[0x7FC0], np.full(GROUP - 1, 0x3F80, np.uint16)]),  # a NaN among ones
        np.tile(specials, 4),
        bf16_bits(np.ldexp(1.0, np.r_[np.arange(-15, 1), np.zeros(24, int)])),   # exponents 15 apart: raw
        bf16_bits(np.ldexp(1.0, np.r_[np.arange(-14, 1), np.zeros(25, int)]) * -1.5),  # 14 apart: packs
        bf16_bits(np.r_[np.ldexp(1.0, -120), np.zeros(39)]),                # small E, subnormal-free
        np.r_[np.uint16(0x0005), np.full(GROUP - 1, 0x0380, np.uint16)],    # a subnormal beside e = 7
    ]
    packed = check(np.concatenate(groups))
    assert packed.tolist() == [True, True, True, False, False, False, False, True, True, True]


@pytest.mark.parametrize("n", [1, 7, 39, 41, 1000])
def test_tails(n):
    rng = np.random.default_rng(n)
    check(bf16_bits(rng.standard_normal(n) * 100))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=400))
def test_any_bits(values):
    check(np.array(values, dtype=np.uint16))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 0xFF), min_size=1, max_size=400), st.integers(0, 0xFF), st.integers(1, 20))
def test_narrow_exponents(mantissas, e_base, spread):
    """Values whose exponents sit near each other (real data): mostly the packed form."""
    rng = np.random.default_rng(len(mantissas))
    e = np.clip(e_base - rng.integers(0, spread, len(mantissas)), 0, 255).astype(np.uint32)
    m = np.array(mantissas, dtype=np.uint32)
    check(((m & 0x80) << 8 | e << 7 | (m & 0x7F)).astype(np.uint16))
