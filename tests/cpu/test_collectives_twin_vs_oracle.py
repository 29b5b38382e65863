"""The segment collectives and the fp32 all-reduce (docs/codec-spec.md, "Segments" to "All-reduce
of fp32 tensors"): the C++ CPU twin (quickreduce._C) against the numpy oracle, bit for bit.

Equality is on values: NaN == NaN (payloads may differ) and -0 == +0 (the sign of a decoded zero
is unspecified); everything else must be identical, the raw bits' width (uint16 for fp16/bf16,
uint32 for fp32) included. A missing _C is a failure; a _C built before the segment collectives
existed skips the twin tests ("twin not built yet"). The oracle is also checked on its own
(independent expectations for the exact codecs, error levels for the lossy ones).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quickreduce import oracle

DTYPES = oracle.ALL_DTYPES   # fp16, bf16, fp32
CODECS = oracle.ALL_CODECS   # the passthrough under each of its names, lossless and the lossy codecs
EXACT = [c for c in CODECS if c in oracle.EXACT]
LOSSY = sorted(oracle.DIVISOR)
WORLDS = [2, 4, 8]
SIZES = [1, 7, 33, 1000, 4097]  # values per segment (all-gather, all-to-all) or per rank's block


@pytest.fixture(scope="module")
def C():
    try:
        import quickreduce._C as mod
    except ImportError as e:  # CI builds the extension: not having it is an error
        pytest.fail(f"quickreduce._C cannot be imported: {e}")
    if not hasattr(mod, "twin_all_gather"):  # TODO: remove once the segment collectives' twin is in every build
        pytest.skip("twin not built yet")
    return mod


# ---- helpers ------------------------------------------------------------------------------------

def assert_same(got, exp, dtype, what=""):
    got, exp = np.asarray(got), np.asarray(exp)
    want = np.dtype(oracle.bits_dtype(dtype))
    assert exp.dtype == want, f"{what}: oracle returned {exp.dtype}, want {want}"
    assert got.dtype == want, f"{what}: twin returned {got.dtype}, want {want}"
    assert got.shape == exp.shape, f"{what}: shape {got.shape} != {exp.shape}"
    g, e = oracle.to_f32(got, dtype), oracle.to_f32(exp, dtype)
    gn, en = np.isnan(g), np.isnan(e)
    with np.errstate(invalid="ignore"):
        bad = (gn != en) | (~gn & ~en & (g != e))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        w = 2 * want.itemsize
        raise AssertionError(
            f"{what}: {int(bad.sum())}/{bad.size} mismatches; first at index {i}: "
            f"expected {e[i]!r} (0x{int(exp[i]):0{w}x}), got {g[i]!r} (0x{int(got[i]):0{w}x})")


def assert_same_ranks(got, exp, dtype, what=""):
    got = list(got)
    assert len(got) == len(exp), f"{what}: {len(got)} outputs, want {len(exp)}"
    for r, (g, e) in enumerate(zip(got, exp)):
        assert_same(g, e, dtype, f"{what} rank {r}")


def bits_of(values, dtype):
    return oracle.from_f32(np.asarray(values, dtype=np.float32), dtype)


def gauss(rng, n, dtype, scale=1.0):
    return bits_of(rng.standard_normal(n) * scale, dtype)


def gauss_ranks(rng, world, n, dtype):
    """One Gaussian input a rank, each at its own magnitude (10^-3 .. 10^3)."""
    return [gauss(rng, n, dtype, 10.0 ** rng.uniform(-3, 3)) for _ in range(world)]


def random_splits(rng, world, max_seg, zero_frac=0.3):
    """W x W sizes in [0, max_seg], about zero_frac of them 0; one rank sends nothing at all."""
    s = rng.integers(0, max_seg + 1, (world, world))
    s[rng.random((world, world)) < zero_frac] = 0
    s[rng.integers(world)] = 0
    return s.tolist()


def split_sizes(rng, n, world):
    """n values cut into W runs at random points (some runs may be empty)."""
    cuts = np.sort(rng.integers(0, n + 1, world - 1))
    return np.diff(np.r_[0, cuts, n]).astype(int).tolist()


def edge_cases(dtype):
    """name -> 1-D raw bits of awkward blocks for this dtype (NaN/Inf in one block, extremes of
    magnitude, -0.0, blocks whose scale underflows S(T))."""
    rng = np.random.default_rng(7)
    big = {"fp16": 65504.0, "bf16": 3.38e38, "fp32": 3.4028235e38}[dtype]
    huge_one = {"fp16": 1e4, "bf16": 1e30, "fp32": 1e37}[dtype]
    # a magnitude whose block scale (absmax / divisor, in S(T)) is subnormal or zero in S(T)
    tiny = {"fp16": 1e-7, "bf16": 2.0 ** -125, "fp32": 1e-39}[dtype]
    cases = {
        "zeros": np.zeros(64, np.float32),
        "neg_zeros": np.full(40, -0.0, np.float32),
        "mixed_zeros": np.r_[np.tile([0.0, -0.0], 20), rng.standard_normal(9)],
        "constant": np.full(70, 3.0),
        "one_huge": np.r_[np.full(31, 1e-3), huge_one, rng.standard_normal(20)],
        "max": np.r_[np.full(16, big), np.full(16, -big), rng.standard_normal(32)],
        "max_with_tiny": np.r_[big, rng.standard_normal(31) * 1e-3, -big],
        "tiny": np.r_[np.full(33, tiny), -tiny, 0.0, -0.0],
        "tiny_and_normal": np.r_[rng.standard_normal(32) * tiny, rng.standard_normal(40)],
        "nan_block": np.r_[rng.standard_normal(40), np.nan, rng.standard_normal(60)],
        "inf_blocks": np.r_[rng.standard_normal(10), np.inf, rng.standard_normal(40), -np.inf, rng.standard_normal(50)],
        "nan_tail": np.r_[rng.standard_normal(64), 1.0, np.nan],
        "wide": rng.standard_normal(97) * 10.0 ** rng.uniform(-20 if dtype != "fp16" else -4, 4, 97),
    }
    out = {k: bits_of(v, dtype) for k, v in cases.items()}
    tiny_bits = {"fp16": [1, 0x8001, 0x3FF, 0x400], "bf16": [1, 0x8001, 0x7F, 0x80],
                 "fp32": [1, 0x80000001, 0x7FFFFF, 0x800000]}[dtype]  # subnormals and the smallest normal
    out["subnormals"] = np.resize(np.array(tiny_bits, oracle.bits_dtype(dtype)), 45)
    if dtype == "fp32":  # values bf16 cannot hold: the passthrough must keep all 32 bits
        ulps = np.arange(50, dtype=np.float32) * np.float32(2.0 ** -23)
        out["fp32_mantissa"] = (np.float32(1) + ulps).view(np.uint32)
    return out


def segment_blocks_nonfinite(x, dtype):
    """Per block of 32 (from x[0]): does it hold a NaN or +-Inf?"""
    f = ~np.isfinite(oracle.to_f32(x, dtype))
    nb = -(-f.size // 32)
    return np.pad(f, (0, nb * 32 - f.size)).reshape(nb, 32).any(axis=1)


# ---- twin vs oracle: Gaussian data, every collective x codec x dtype x W x size -------------------

@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", CODECS)
def test_all_gather(C, codec, dtype, world):
    rng = np.random.default_rng([1, world, DTYPES.index(dtype)])
    for k in SIZES:
        xs = gauss_ranks(rng, world, k, dtype)
        assert_same(C.twin_all_gather(xs, dtype, codec), oracle.all_gather(xs, dtype, codec),
                    dtype, f"all_gather k={k} W={world} {dtype} {codec}")


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", CODECS)
def test_reduce_scatter(C, codec, dtype, world):
    rng = np.random.default_rng([2, world, DTYPES.index(dtype)])
    for k in SIZES:
        xs = gauss_ranks(rng, world, world * k, dtype)
        assert_same_ranks(C.twin_reduce_scatter(xs, dtype, codec), oracle.reduce_scatter(xs, dtype, codec),
                          dtype, f"reduce_scatter k={k} W={world} {dtype} {codec}")


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", CODECS)
def test_all_to_all_even(C, codec, dtype, world):
    rng = np.random.default_rng([3, world, DTYPES.index(dtype)])
    for k in SIZES:
        xs = gauss_ranks(rng, world, world * k, dtype)
        splits = [[k] * world for _ in range(world)]
        exp = oracle.all_to_all(xs, dtype, codec)  # splits None: even
        assert_same_ranks(C.twin_all_to_all(xs, dtype, codec, splits), exp,
                          dtype, f"all_to_all even k={k} W={world} {dtype} {codec}")


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", CODECS)
def test_all_to_all_uneven(C, codec, dtype, world):
    rng = np.random.default_rng([4, world, DTYPES.index(dtype)])
    layouts = [random_splits(rng, world, m) for m in (1, 40, 100, 1100)]
    only_one = [[0] * world for _ in range(world)]
    only_one[world - 1][0] = 77  # a single non-empty segment
    layouts.append(only_one)
    for splits in layouts:
        xs = [gauss(rng, sum(row), dtype, 10.0 ** rng.uniform(-3, 3)) for row in splits]
        assert_same_ranks(C.twin_all_to_all(xs, dtype, codec, splits), oracle.all_to_all(xs, dtype, codec, splits),
                          dtype, f"all_to_all W={world} {dtype} {codec} splits={splits}")


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("codec", CODECS)
def test_all_reduce_fp32(C, codec, world):
    rng = np.random.default_rng([5, world])
    # chunks of K = 32 ceil(N / 32W): N = 1 leaves W - 1 chunks empty, 32W(3) + 5 a short last one
    for n in SIZES + [32 * world * 3 + 5, 32 * world]:
        xs = gauss_ranks(rng, world, n, "fp32")
        assert_same(C.twin_all_reduce(xs, "fp32", codec), oracle.all_reduce(xs, "fp32", codec),
                    "fp32", f"all_reduce fp32 N={n} W={world} {codec}")


def test_fp32_all_reduce_chunk_layout(C):
    for n in (0, 1, 31, 32, 33, 64, 65, 1000, 4097, 1 << 20, (1 << 20) + 1):
        for world in (2, 3, 4, 8):
            assert C.fp32_all_reduce_chunk(n, world) == oracle.fp32_chunk(n, world), (n, world)


def test_twin_all_to_all_refuses_splits_that_do_not_add_up(C):
    xs = [np.zeros(8, np.uint16)] * 2
    with pytest.raises(ValueError):
        C.twin_all_to_all(xs, "bf16", "int4", [[4, 4], [4, 3]])


# ---- twin vs oracle: special values -------------------------------------------------------------

def _edge_inputs(rng, x, world, dtype, collective):
    """(label, inputs, extra) variants for one edge array: on rank 1 among Gaussians, and on every
    rank (sums that overflow T). extra: the all-to-all's splits."""
    for label in ("rank1", "all"):
        if collective == "reduce_scatter":
            base = np.tile(x, world)  # every rank's block r holds the whole edge array
        else:
            base = x
        xs = [base.copy() if label == "all" or r == 1 else gauss(rng, base.size, dtype) for r in range(world)]
        splits = [split_sizes(rng, base.size, world) for _ in range(world)] if collective == "all_to_all" else None
        yield label, xs, splits


# the 16-bit all-reduce's edges are tests/cpu/test_twin_vs_oracle.py's
_EDGE_CASES = [(c, d) for c in ("all_gather", "all_to_all", "reduce_scatter") for d in DTYPES] + \
    [("all_reduce", "fp32")]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("collective,dtype", _EDGE_CASES)
def test_edges(C, collective, dtype, codec):
    rng = np.random.default_rng([6, DTYPES.index(dtype)])
    for world in (2, 8):
        for name, x in edge_cases(dtype).items():
            for label, xs, splits in _edge_inputs(rng, x, world, dtype, collective):
                what = f"{collective} edge '{name}' on {label} W={world} {dtype} {codec}"
                if collective == "all_gather":
                    got = C.twin_all_gather(xs, dtype, codec)
                    exp = oracle.all_gather(xs, dtype, codec)
                    assert_same(got, exp, dtype, what)
                    if codec not in oracle.EXACT:  # a non-finite value spreads to its segment block
                        o = oracle.to_f32(got, dtype).reshape(world, -1)
                        for r in range(world):
                            for b in np.flatnonzero(segment_blocks_nonfinite(xs[r], dtype)):
                                assert np.isnan(o[r, 32 * b: 32 * b + 32]).all(), f"{what}: rank {r} block {b}"
                elif collective == "all_to_all":
                    assert_same_ranks(C.twin_all_to_all(xs, dtype, codec, splits),
                                      oracle.all_to_all(xs, dtype, codec, splits), dtype, f"{what} splits={splits}")
                elif collective == "reduce_scatter":
                    assert_same_ranks(C.twin_reduce_scatter(xs, dtype, codec), oracle.reduce_scatter(xs, dtype, codec),
                                      dtype, what)
                else:
                    assert_same(C.twin_all_reduce(xs, dtype, codec), oracle.all_reduce(xs, dtype, codec), dtype, what)


# ---- twin vs oracle: any bits -------------------------------------------------------------------

_fast = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _any_values(rng, n, dtype):
    """Uniform random bit patterns (NaN, Inf, subnormals, every magnitude) in some runs, Gaussians
    at a random scale in others."""
    width = np.dtype(oracle.bits_dtype(dtype))
    raw = rng.integers(0, 1 << (8 * width.itemsize), n, dtype=np.uint64).astype(width)
    g = gauss(rng, n, dtype, 10.0 ** rng.uniform(-6, 6))
    pick = np.repeat(rng.random(-(-n // 16)) < 0.5, 16)[:n]
    return np.where(pick, raw, g).astype(width)


_collective_case = dict(seed=st.integers(0, 2 ** 32 - 1), world=st.integers(2, 8),
                        dtype=st.sampled_from(DTYPES), codec=st.sampled_from(CODECS))


@_fast
@given(n=st.integers(0, 150), **_collective_case)
def test_all_gather_any_bits(C, n, seed, world, dtype, codec):
    rng = np.random.default_rng(seed)
    xs = [_any_values(rng, n, dtype) for _ in range(world)]
    assert_same(C.twin_all_gather(xs, dtype, codec), oracle.all_gather(xs, dtype, codec),
                dtype, f"all_gather seed={seed} W={world} n={n} {dtype} {codec}")


@_fast
@given(k=st.integers(0, 100), **_collective_case)
def test_reduce_scatter_any_bits(C, k, seed, world, dtype, codec):
    rng = np.random.default_rng(seed)
    xs = [_any_values(rng, world * k, dtype) for _ in range(world)]
    assert_same_ranks(C.twin_reduce_scatter(xs, dtype, codec), oracle.reduce_scatter(xs, dtype, codec),
                      dtype, f"reduce_scatter seed={seed} W={world} k={k} {dtype} {codec}")


@_fast
@given(data=st.data(), **_collective_case)
def test_all_to_all_any_bits(C, data, seed, world, dtype, codec):
    splits = data.draw(st.lists(st.lists(st.integers(0, 80), min_size=world, max_size=world),
                                min_size=world, max_size=world), label="splits")
    rng = np.random.default_rng(seed)
    xs = [_any_values(rng, sum(row), dtype) for row in splits]
    assert_same_ranks(C.twin_all_to_all(xs, dtype, codec, splits), oracle.all_to_all(xs, dtype, codec, splits),
                      dtype, f"all_to_all seed={seed} W={world} {dtype} {codec} splits={splits}")


@_fast
@given(n=st.integers(0, 600), seed=st.integers(0, 2 ** 32 - 1), world=st.integers(2, 8),
       codec=st.sampled_from(CODECS))
def test_all_reduce_fp32_any_bits(C, n, seed, world, codec):
    rng = np.random.default_rng(seed)
    xs = [_any_values(rng, n, "fp32") for _ in range(world)]
    assert_same(C.twin_all_reduce(xs, "fp32", codec), oracle.all_reduce(xs, "fp32", codec),
                "fp32", f"all_reduce fp32 seed={seed} W={world} N={n} {codec}")


# ---- the oracle on its own ----------------------------------------------------------------------

def _values_indep(bits, dtype):
    """T bits -> fp32 values without the oracle (ml_dtypes / numpy casts)."""
    import ml_dtypes
    bits = np.asarray(bits)
    if dtype == "fp32":
        return bits.view(np.float32).copy()
    kind = np.float16 if dtype == "fp16" else ml_dtypes.bfloat16
    return bits.view(kind).astype(np.float32)


def _to_T_indep(f, dtype):
    """fp32 values -> T bits (RNE) without the oracle."""
    import ml_dtypes
    f = np.asarray(f, np.float32)
    if dtype == "fp32":
        return f.view(np.uint32).copy()
    with np.errstate(over="ignore"):
        return f.astype(np.float16 if dtype == "fp16" else ml_dtypes.bfloat16).view(np.uint16)


def _finite_data(rng, n, dtype):
    """Gaussians at mixed magnitudes, a few exact zeros of both signs (no NaN: comparisons are bitwise)."""
    x = gauss(rng, n, dtype, 10.0 ** rng.uniform(-3, 3))
    x[rng.random(n) < 0.05] = bits_of([-0.0], dtype)[0]
    x[rng.random(n) < 0.05] = 0
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", EXACT)
def test_oracle_all_gather_exact_is_concatenation(codec, dtype):
    rng = np.random.default_rng(21)
    for world, k in [(2, 1), (3, 33), (8, 1000)]:
        xs = [_finite_data(rng, k, dtype) for _ in range(world)]
        np.testing.assert_array_equal(oracle.all_gather(xs, dtype, codec), np.concatenate(xs))
    if dtype == "fp32":  # fp32's passthrough is the identity on bits: NaN payloads included
        xs = [np.array([0x7FC00001, 0xFFFFFFFF, 0x7F800000], np.uint32), np.array([1, 2, 3], np.uint32)]
        np.testing.assert_array_equal(oracle.all_gather(xs, dtype, codec), np.concatenate(xs))


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", ["fp16", "lossless"])
def test_oracle_reduce_scatter_exact_is_rank_order_sum(codec, dtype, world):
    rng = np.random.default_rng(22)
    k = 257
    xs = [_finite_data(rng, world * k, dtype) for _ in range(world)]
    for x in xs:  # -0 on every rank: the sum starts from rank 0's term, so an all -0 sum stays -0
        x[:5] = bits_of([-0.0] * 5, dtype)
    vals = [_values_indep(x, dtype) for x in xs]
    with np.errstate(over="ignore"):
        for r, got in enumerate(oracle.reduce_scatter(xs, dtype, codec)):
            acc = vals[0][r * k:(r + 1) * k].copy()
            for v in vals[1:]:
                acc = (acc + v[r * k:(r + 1) * k]).astype(np.float32)
            np.testing.assert_array_equal(got, _to_T_indep(acc, dtype), err_msg=f"rank {r}")
    assert (oracle.reduce_scatter(xs, dtype, codec)[0][:5] == bits_of([-0.0] * 5, dtype)).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", EXACT)
def test_oracle_all_to_all_exact_is_permutation(codec, dtype):
    rng = np.random.default_rng(23)
    for world in (2, 5, 8):
        splits = random_splits(rng, world, 70)
        xs = [_finite_data(rng, sum(row), dtype) for row in splits]
        offs = [np.r_[0, np.cumsum(row)] for row in splits]
        got = oracle.all_to_all(xs, dtype, codec, splits)
        for d in range(world):
            exp = np.concatenate([xs[r][offs[r][d]:offs[r][d + 1]] for r in range(world)])
            np.testing.assert_array_equal(got[d], exp, err_msg=f"W={world} rank {d} splits={splits}")
    xs = [np.arange(6, dtype=oracle.bits_dtype(dtype)) + 100 * r for r in range(3)]  # even: 2 values a segment
    got = oracle.all_to_all(xs, dtype, codec)
    np.testing.assert_array_equal(got[1], np.array([2, 3, 102, 103, 202, 203], oracle.bits_dtype(dtype)))


# Rel-L2 error bands on unit Gaussians (one quantization a value: all-gather, the reduce-scatter's
# first shot; two for the fp32 all-reduce). Measured: fp8 ~.024, int8 ~.0055, int6 ~.022, int4 ~.097,
# fp4 ~.10 (all-gather); ~1.3x that for the all-reduce.
BANDS = {"fp8": (0.01, 0.05), "int8": (0.002, 0.012), "int6": (0.01, 0.05), "int4": (0.05, 0.2), "fp4": (0.05, 0.2)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", LOSSY)
def test_oracle_lossy_error_levels(codec, dtype):
    rng = np.random.default_rng(24)
    world, k = 4, 1 << 13
    xs = [gauss(rng, world * k, dtype) for _ in range(world)]
    f64 = [oracle.to_f32(x, dtype).astype(np.float64) for x in xs]
    lo, hi = BANDS[codec]

    def rel(out_bits, ref):
        out = np.concatenate([oracle.to_f32(o, dtype) for o in out_bits]) if isinstance(out_bits, list) \
            else oracle.to_f32(out_bits, dtype)
        return np.linalg.norm(out - ref) / np.linalg.norm(ref)

    errs = {
        "all_gather": rel(oracle.all_gather([x[:k] for x in xs], dtype, codec), np.concatenate([f[:k] for f in f64])),
        "all_to_all": rel(oracle.all_to_all(xs, dtype, codec),
                          np.concatenate([f[d * k:(d + 1) * k] for d in range(world) for f in f64])),
        "reduce_scatter": rel(oracle.reduce_scatter(xs, dtype, codec), sum(f64)),
    }
    if dtype == "fp32":
        errs["all_reduce"] = rel(oracle.all_reduce(xs, dtype, codec), sum(f64))
    for what, e in errs.items():
        top = hi * 1.5 if what == "all_reduce" else hi  # two quantizations
        assert lo < e < top, f"{what} {dtype} {codec}: rel-L2 {e:.3g} outside ({lo}, {top})"
    # the owner's values skip the link: reduce-scatter's error is below W independent round trips'
    assert errs["reduce_scatter"] < errs["all_gather"]


def test_oracle_segment_blocks_start_at_the_segment():
    """Rank 1's 40 values [big, 39 small]: its segment's block 0 (values 0..31) shares big's scale,
    so int4 zeroes the small ones; block 1 (values 32..39) has its own scale and keeps them. Blocks
    on the output's grid (rank 1 at 40..79) would have split them 24/16 instead."""
    small = np.float32(1e-3) * (1 + np.arange(39, dtype=np.float32) / 64)
    x1 = bits_of(np.r_[1000.0, small], "bf16")
    out = oracle.to_f32(oracle.all_gather([bits_of(np.ones(40), "bf16"), x1], "bf16", "int4"), "bf16")[40:]
    assert abs(out[0] - 1000) < 10 and (out[1:32] == 0).all()
    kept = out[32:]
    np.testing.assert_allclose(kept, oracle.to_f32(x1, "bf16")[32:], rtol=0.1)
    assert (kept != 0).all()
    # all-to-all: the same rule for a segment starting mid-input
    got = oracle.all_to_all([np.r_[bits_of(np.ones(7), "bf16"), x1], bits_of(np.ones(47), "bf16")], "bf16", "int4",
                            [[7, 40], [40, 7]])[1][:40]
    np.testing.assert_array_equal(oracle.to_f32(got, "bf16"), out)


@pytest.mark.parametrize("codec", LOSSY)
def test_oracle_fp32_scales_are_bf16(codec):
    """An fp32 tensor's block scale is stored in bf16: on bf16-representable values the fp32 and
    bf16 paths decode to the same fp32 values (before to_T); fp32's range fits; a block whose
    scale falls below bf16's normal range is lifted (spec: tiny blocks), not flushed to zeros."""
    rng = np.random.default_rng(25)
    v = oracle.to_f32(gauss(rng, 4096, "bf16", 10.0 ** rng.uniform(-30, 30)), "bf16")
    np.testing.assert_array_equal(oracle._qdq(v, "fp32", codec), oracle._qdq(v, "bf16", codec))
    huge = np.float32([3e38, -1e38] + [1e37] * 30)
    d = oracle._qdq(huge, "fp32", codec)
    assert np.isfinite(d).all() and abs(d[0] / huge[0] - 1) < 0.1
    absmax = np.float32(2.0 ** -124)  # a normal fp32; absmax / divisor < FLT_MIN for every divisor >= 6
    tiny = np.float32([absmax, absmax / 2])
    step = absmax / np.float32(oracle.DIVISOR[codec])  # the codec's grid, no longer flushed to 0
    np.testing.assert_allclose(oracle._qdq(tiny, "fp32", codec), tiny, rtol=0, atol=step)
    # the scale for fp32 data is bf16(absmax * fl(1/divisor)), computed here with ml_dtypes
    import ml_dtypes
    a = np.float32(1.2345678)
    r = np.float32(1) / np.float32(oracle.DIVISOR[codec])
    s = np.float32(a * r).astype(ml_dtypes.bfloat16).astype(np.float32)
    top = oracle._qdq(np.float32([a, 0]), "fp32", codec)[0]
    assert top / s == np.rint(top / s) and abs(top - a) <= 2 * s, (top, s)  # a whole code times s


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("codec", LOSSY + ["fp32", "lossless"])
def test_oracle_fp32_all_reduce_ownership(codec, world):
    """Value i is reduced by rank i // K (K = 32 ceil(N / 32W)), which adds its own value exactly:
    with every other rank at zero, each value takes one round trip (the all-gather's) on the
    global grid; with dense inputs every non-owner's value takes one more (the first shot)."""
    rng = np.random.default_rng([26, world])
    n = 32 * world * 5 - 15  # K = 160: every chunk non-empty, the last one ends in a partial block
    k = oracle.fp32_chunk(n, world)
    assert k == 160 and (world - 1) * k < n <= world * k
    owner = np.arange(n) // k
    dense = [gauss(rng, n, "fp32") for _ in range(world)]
    xs = [np.where(owner == r, dense[r], np.uint32(0)).astype(np.uint32) for r in range(world)]
    owned = np.choose(owner, dense).astype(np.uint32)

    def values(bits):  # compare values: a decoded zero may be -0 and a sum with it +0
        return oracle.to_f32(bits, "fp32")

    np.testing.assert_array_equal(values(oracle.all_reduce(xs, "fp32", codec)),
                                  values(oracle.round_trip(owned, "fp32", codec)))
    # dense inputs, as the 16-bit all-reduce is written but with owner i // K: blockwise D(Q(.)) over
    # the whole tensor (the global grid) equals each chunk's own, since K % 32 == 0
    acc = None
    with np.errstate(all="ignore"):
        for r, x in enumerate(dense):
            v = oracle.to_f32(x, "fp32")
            term = np.where(owner == r, v, oracle._qdq(v, "fp32", codec)).astype(np.float32)
            acc = term if acc is None else (acc + term).astype(np.float32)
    np.testing.assert_array_equal(values(oracle.all_reduce(dense, "fp32", codec)),
                                  oracle._qdq(acc, "fp32", codec))
    if codec in oracle.EXACT:  # exact codecs: the fp32 rank-order sum
        acc = _values_indep(dense[0], "fp32")
        for x in dense[1:]:
            acc = (acc + _values_indep(x, "fp32")).astype(np.float32)
        np.testing.assert_array_equal(oracle.all_reduce(dense, "fp32", codec), acc.view(np.uint32))


def test_oracle_fp32_chunks():
    assert [oracle.fp32_chunk(n, 8) for n in (0, 1, 256, 257)] == [0, 32, 32, 64]
    assert oracle.fp32_chunk(1000, 3) == 352  # ceil(1000 / 96) = 11 blocks; chunk 2 = [704, 1000)
    for codec, tol in (("fp32", 0.0), ("int4", 0.1)):  # N = 1: chunk 0 holds it, 7 chunks are empty
        out = oracle.to_f32(oracle.all_reduce([bits_of([1.0], "fp32")] * 8, "fp32", codec), "fp32")
        assert out.shape == (1,) and abs(out[0] - 8.0) <= tol, (codec, out)
    assert oracle.all_reduce([np.zeros(0, np.uint32)] * 4, "fp32", "fp8").size == 0


def test_oracle_exchange_rejects_bad_calls():
    x16, x32 = np.zeros(12, np.uint16), np.zeros(12, np.uint32)
    with pytest.raises(ValueError):
        oracle.all_to_all([x16, x16], "bf16", "int4", [[6, 6], [6, 5]])  # rank 1's sizes add up to 11
    with pytest.raises(ValueError):
        oracle.all_to_all([x16[:5], x16[:5]], "bf16", "int4")  # even splits of 5 values over 2 ranks
    with pytest.raises(ValueError):
        oracle.reduce_scatter([x16] * 5, "bf16", "int4")  # 12 values are not W*k for W = 5
    with pytest.raises(ValueError):
        oracle.all_gather([x16, x16[:4]], "bf16", "int4")
    with pytest.raises(TypeError):
        oracle.all_gather([x16, x16], "fp32", "int4")  # fp32 travels as uint32 bits
    with pytest.raises(TypeError):
        oracle.reduce_scatter([x32, x32], "bf16", "int4")
    with pytest.raises(TypeError):
        oracle.all_gather([np.zeros(4, np.float32)] * 2, "fp32", "fp32")  # values, not bits
    with pytest.raises(ValueError):
        oracle.all_reduce([x32, x32], "fp32", "int4", slice_values=32)


def test_oracle_nonfinite_spreads_to_segment_block():
    x = bits_of(np.r_[np.ones(40), np.inf, np.ones(30)], "fp32")
    for codec in LOSSY:
        out = oracle.to_f32(oracle.all_gather([x, x], "fp32", codec), "fp32")
        for r in range(2):
            y = out[71 * r: 71 * r + 71]
            assert np.isnan(y[32:64]).all() and np.isfinite(y[:32]).all() and np.isfinite(y[64:]).all(), codec
