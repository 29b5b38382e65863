"""The device codecs on one GPU, no second rank (quickreduce codec-speed's kernels): every
block-scaled codec's GPU round trip has the CPU twin's values on data of every magnitude, tiny
blocks (spec: lifted, not flushed) and non-finite values included; the timing path runs."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from quickreduce.cli import codec_speed  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _mixed_magnitudes(dtype) -> torch.Tensor:
    """Blocks of 32 at magnitudes from the format's smallest subnormals to near its largest,
    with NaN/Inf blocks and a ragged tail."""
    g = torch.Generator().manual_seed(11)
    exps = list(range(-40, 38, 3)) if dtype == torch.bfloat16 else list(range(-26, 16))
    if dtype == torch.bfloat16:  # fp32's ends: subnormal products inside the rotation, and blocks whose
        exps += [-133, -130, -127, -124, -121, -118, 100, 118, 121, 122, 124, 126, 127]  # unscaled transform overflows
    blocks = [torch.randn(32, generator=g).clamp(-1.9, 1.9) * (2.0 ** e) for e in exps for _ in range(4)]
    special = torch.randn(32, generator=g)
    special[5] = float("nan")
    inf = torch.randn(32, generator=g)
    inf[9] = float("inf")
    x = torch.cat(blocks + [special, inf, torch.randn(16, generator=g)])  # 16: a short tail block
    return x.to(dtype).cuda()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", codec_speed.SCALED_CODECS)
def test_gpu_round_trip_equals_twin(dtype, codec):
    x = _mixed_magnitudes(DTYPES[dtype])
    out = codec_speed.gpu_round_trip(x, codec)
    torch.cuda.synchronize()
    assert codec_speed.twin_mismatch(x, out, codec) is None, codec_speed.twin_mismatch(x, out, codec)


def test_codec_speed_runs_and_times():
    rows = codec_speed.run(1 << 20, "bf16", ["int4", "int4h"], calls=4, replays=3)
    assert [r["codec"] for r in rows] == ["int4", "int4h"]
    assert all(r["encode_us"] > 0 and r["decode_us"] > 0 for r in rows)
    assert rows[1]["vs_plain"] > 0
