"""The add + RMSNorm epilogue's arithmetic (docs/codec-spec.md) in the numpy oracle: what an
unfused bf16/fp16 model computes, up to the order of the sum of squares; the argument checks."""
import numpy as np
import pytest
import torch

from quickreduce import oracle
from quickreduce.epilogues import check_args
from quickreduce.oracle.epilogue import _square_sums

TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("tokens,hidden", [(1, 1024), (3, 4096), (2, 8000), (1, 16384)])
def test_matches_unfused_torch(dtype, tokens, hidden):
    g = torch.Generator().manual_seed(hidden + tokens)
    s = torch.randn(tokens, hidden, generator=g).to(TORCH[dtype])
    res = (4 * torch.randn(tokens, hidden, generator=g)).to(TORCH[dtype])
    w = (1 + 0.1 * torch.randn(hidden, generator=g)).to(TORCH[dtype])
    out, r, _, _ = oracle.add_rmsnorm(_bits(s), _bits(res), _bits(w), dtype, 1e-6)
    r_t = s + res  # torch's add: fp32 sum rounded to T, as the spec's
    assert np.array_equal(r, _bits(r_t))
    h = r_t.float()
    y_t = w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(r_t.dtype)  # Hugging Face's LlamaRMSNorm
    y = oracle.to_f32(out, dtype).reshape(tokens, hidden)
    diff = np.abs(y - y_t.float().numpy())
    # only the sum of squares' order differs: at most one rounding of T apart
    assert diff.max() <= np.abs(y).max() * 2.0 ** -7
    assert (diff > 0).mean() < 0.05


def test_sum_of_squares_tree_ignores_padding():
    """The tree pads to a power of two with zeros; padding further changes nothing."""
    rng = np.random.default_rng(0)
    r = rng.standard_normal((3, 8 * 37)).astype(np.float32)
    padded = np.zeros((3, 8 * 64), np.float32)
    padded[:, :8 * 37] = r
    np.testing.assert_array_equal(_square_sums(r), _square_sums(padded))


def test_fp8_per_token_scales_and_codes():
    rng = np.random.default_rng(1)
    s = oracle.from_f32(rng.standard_normal(4 * 1024).astype(np.float32), "bf16").reshape(4, 1024)
    z = np.zeros_like(s)
    w = oracle.from_f32(np.ones(1024, np.float32), "bf16")
    out, _, codes, scales = oracle.add_rmsnorm(s, z, w, "bf16", 1e-6, "per_token")
    y = oracle.to_f32(out, "bf16").reshape(4, 1024)
    np.testing.assert_array_equal(scales, (np.abs(y).max(1) / np.float32(448)).astype(np.float32))
    assert np.abs(codes).max() == 448  # the row's absmax lands on e4m3's largest value
    rel = np.linalg.norm(codes * scales[:, None] - y) / np.linalg.norm(y)
    assert rel < 0.04
    _, _, zero_codes, zero_scales = oracle.add_rmsnorm(z, z, w, "bf16", 1e-6, "per_token")
    assert (zero_scales == 1).all() and (zero_codes == 0).all()


def test_argument_errors():
    x = torch.zeros(4, 1024, dtype=torch.bfloat16)
    w = torch.ones(1024, dtype=torch.bfloat16)
    assert check_args(x, x.clone(), w, 1e-6, None, None, None, None) == (4, 1024)
    with pytest.raises(ValueError, match="multiple of 8"):
        check_args(x[:, :1020].contiguous(), x[:, :1020].contiguous(), w[:1020], 1e-6, None, None, None, None)
    with pytest.raises(ValueError, match="residual must match"):
        check_args(x, x[:2], w, 1e-6, None, None, None, None)
    with pytest.raises(ValueError, match="weight must be"):
        check_args(x, x, w[:10], 1e-6, None, None, None, None)
    with pytest.raises(TypeError, match="float16/bfloat16"):
        check_args(x.float(), x.float(), w.float(), 1e-6, None, None, None, None)
    with pytest.raises(ValueError, match="eps"):
        check_args(x, x, w, -1.0, None, None, None, None)
    with pytest.raises(ValueError, match="fp8 must be"):
        check_args(x, x, w, 1e-6, None, None, "e5m2", None)
    with pytest.raises(ValueError, match="fp8_scale"):
        check_args(x, x, w, 1e-6, None, None, "per_tensor", None)
    with pytest.raises(ValueError, match="different tensors"):
        out = x.clone()
        check_args(x, x.clone(), w, 1e-6, out, out, None, None)
