"""The tensor-parallel decoder of `quickreduce e2e` on the CPU: a sharded forward (ranks as threads,
an exact-sum reducer) equals the unsharded one; decode with the KV cache equals recomputing
the whole prefix; shapes, presets and config files; the reference reductions and their rounding."""
import json
import math
import random

import pytest
import torch

from quickreduce.e2e import (PRESETS, ModelConfig, ShardPlan, TensorParallelDecoder, ThreadGroup, exact_sum,
                             full_random_weights, greedy_generate, load_model_config, random_rank_weights,
                             rank_order_fp32_sum, round_float64, shard_weights)
from quickreduce.e2e.reducers import RoundingStats

TINY = ModelConfig("tiny", hidden=64, heads=8, kv_heads=4, intermediate=96, vocab=97, layers=2, rope_theta=10_000.0)
# kv heads fewer than ranks at W=4 (replicated), per-head q/k norms, tied embeddings, head_dim != hidden/heads
TINY_GQA = ModelConfig("tiny-gqa", hidden=48, heads=8, kv_heads=2, head_dim=8, intermediate=64, vocab=89, layers=3,
                       rope_theta=10_000.0, qk_norm=True, tie_embeddings=True)


def _prompt(config, batch=2, length=7, seed=0):
    return torch.randint(config.vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def _rank_model(config, full, world, rank, reducer):
    plan = ShardPlan(config, world, rank)
    return TensorParallelDecoder(plan, shard_weights(full, plan), reducer)


def _sharded(config, full, world, fn):
    """fn(model) on every rank of a W-rank thread group; every rank's result."""
    group = ThreadGroup(world)
    return group.run(lambda rank: fn(_rank_model(config, full, world, rank, group.reducer(rank)))), group


@pytest.mark.parametrize("config", [TINY, TINY_GQA], ids=["kv-sharded", "gqa-qknorm-tied"])
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-4)])
def test_sharded_prefill_equals_unsharded(config, world, dtype, tol):
    full = full_random_weights(config, seed=3, dtype=dtype)
    tokens = _prompt(config)
    reference = _rank_model(config, full, 1, 0, lambda x: x).prefill(tokens, all_logits=True)
    outputs, group = _sharded(config, full, world, lambda m: m.prefill(tokens, all_logits=True))
    assert group.calls == 2 * config.layers  # o_proj and down per layer, nothing else
    scale = reference.abs().max()
    for rank, out in enumerate(outputs):
        assert out.shape == (2, 7, config.vocab)
        assert (out - reference).abs().max() <= tol * scale, f"rank {rank}"


def test_sharded_forward_uses_the_reduction():
    """The same comparison fails when the reducer is wrong, so the test above can fail."""
    full = full_random_weights(TINY, seed=3, dtype=torch.float64)
    tokens = _prompt(TINY)
    reference = _rank_model(TINY, full, 1, 0, lambda x: x).prefill(tokens, all_logits=True)
    group = ThreadGroup(2, reduction=lambda partials: partials[0])  # drops rank 1's share
    out = group.run(lambda r: _rank_model(TINY, full, 2, r, group.reducer(r)).prefill(tokens, all_logits=True))
    assert (out[0] - reference).abs().max() > 1e-3


@pytest.mark.parametrize("config", [TINY, TINY_GQA], ids=["kv-sharded", "gqa-qknorm-tied"])
def test_decode_with_cache_equals_recomputing_the_prefix(config):
    full = full_random_weights(config, seed=5, dtype=torch.float64)
    model = _rank_model(config, full, 1, 0, lambda x: x)
    tokens = _prompt(config, length=6)
    cache = model.new_cache(2, 10)
    model.prefill(tokens, cache)
    positions = torch.full((2,), 6)
    for step in range(3):
        nxt = torch.tensor([(step * 7 + 1) % config.vocab, (step * 11 + 2) % config.vocab])
        logits = model.decode(nxt, positions, cache)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        recomputed = model.prefill(tokens)
        assert torch.allclose(logits, recomputed, rtol=0, atol=1e-10 * recomputed.abs().max())
        positions = positions + 1


@pytest.mark.parametrize("world", [2, 4])
def test_sharded_greedy_generation_equals_unsharded(world):
    full = full_random_weights(TINY_GQA, seed=7, dtype=torch.float64)
    prompt = _prompt(TINY_GQA, length=5)
    reference = greedy_generate(_rank_model(TINY_GQA, full, 1, 0, lambda x: x), prompt, 6)
    outputs, _ = _sharded(TINY_GQA, full, world, lambda m: greedy_generate(m, prompt, 6))
    assert reference.shape == (2, 6)
    for out in outputs:
        assert torch.equal(out, reference)


def test_shard_plan_slices():
    plan = ShardPlan(TINY_GQA, 4, 3)  # 8 heads, 2 kv heads: 2 query heads a rank, kv heads replicated
    assert (plan.q_heads, plan.q_head_start, plan.kv_heads, plan.kv_replicated) == (2, 6, 1, True)
    assert [ShardPlan(TINY_GQA, 4, r).kv_head_start for r in range(4)] == [0, 0, 1, 1]
    plan = ShardPlan(TINY, 2, 1)
    assert (plan.kv_heads, plan.kv_head_start, plan.mlp_width, plan.mlp_start) == (2, 2, 48, 48)


def test_shard_plan_refuses_what_does_not_split():
    with pytest.raises(ValueError, match="8 attention heads do not split over 3 ranks"):
        ShardPlan(TINY, 3, 0)
    odd_kv = ModelConfig("odd", hidden=96, heads=12, kv_heads=3, intermediate=48, vocab=10, layers=1)
    with pytest.raises(ValueError, match="3 kv heads cannot be replicated evenly over 4 ranks"):
        ShardPlan(odd_kv, 4, 0)
    with pytest.raises(ValueError, match="MLP width 100 does not split over 8 ranks"):
        ShardPlan(ModelConfig("m", hidden=64, heads=8, kv_heads=8, intermediate=100, vocab=5, layers=1), 8, 0)
    with pytest.raises(ValueError, match="rank 2 of world size 2"):
        ShardPlan(TINY, 2, 2)


def test_random_rank_weights_replicated_parts_agree():
    """Ranks that share a kv head (kv_heads < W) draw it from the same seed; their own parts differ."""
    w = [random_rank_weights(ShardPlan(TINY_GQA, 4, r), seed=1, dtype=torch.float32) for r in range(4)]
    hd = TINY_GQA.dim_per_head
    q = 2 * hd  # each rank's wqkv: 2 query heads, then 1 k head, then 1 v head
    kv = lambda ws: ws["layers.0.wqkv"][q:]  # noqa: E731
    assert torch.equal(kv(w[0]), kv(w[1])) and torch.equal(kv(w[2]), kv(w[3]))
    assert not torch.equal(kv(w[0]), kv(w[2]))
    assert not torch.equal(w[0]["layers.0.wqkv"][:q], w[1]["layers.0.wqkv"][:q])
    assert torch.equal(w[0]["embed"], w[3]["embed"])
    assert w[0]["layers.1.wqkv"].shape == (4 * hd, TINY_GQA.hidden)
    assert w[0]["layers.1.w_gate_up"].shape == (2 * 16, TINY_GQA.hidden)
    # the model accepts them and runs
    logits = TensorParallelDecoder(ShardPlan(TINY_GQA, 4, 0), w[0]).prefill(_prompt(TINY_GQA))
    assert logits.shape == (2, TINY_GQA.vocab) and torch.isfinite(logits).all()


def test_presets_have_the_published_sizes():
    assert 7.9e9 < PRESETS["llama3-8b"].parameters() < 8.1e9
    assert 70.0e9 < PRESETS["llama3-70b"].parameters() < 71.0e9
    assert 32.0e9 < PRESETS["qwen3-32b-like"].parameters() < 33.5e9
    assert load_model_config("llama3-8b", layers=2).layers == 2
    for name, config in PRESETS.items():
        for world in (2, 4, 8):
            ShardPlan(config, world, world - 1)  # every preset splits over 2, 4 and 8 GPUs


def test_model_config_files(tmp_path):
    ours = tmp_path / "mine.json"
    ours.write_text(json.dumps({"hidden": 64, "heads": 8, "kv_heads": 2, "intermediate": 96, "vocab": 10, "layers": 3}))
    config = load_model_config(str(ours), layers=1)
    assert (config.name, config.layers, config.kv_heads) == ("mine", 1, 2)
    hf = tmp_path / "config.json"
    hf.write_text(json.dumps({"model_type": "qwen3", "hidden_size": 5120, "num_attention_heads": 64,
                              "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 25600,
                              "vocab_size": 151936, "num_hidden_layers": 64, "rope_theta": 1000000,
                              "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"}))
    config = load_model_config(str(hf))
    assert config.qk_norm and config.dim_per_head == 128 and config.rope_theta == 1e6
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hidden": 64, "heads": 8, "kv_heads": 2, "intermediate": 96, "vocab": 10,
                               "layers": 3, "experts": 8}))
    with pytest.raises(ValueError, match="unknown model config keys \\['experts'\\]"):
        load_model_config(str(bad))
    with pytest.raises(ValueError, match="does not exist"):
        load_model_config(str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="unknown model 'llama9'"):
        load_model_config("llama9")
    with pytest.raises(ValueError, match="do not group evenly"):
        ModelConfig("x", hidden=64, heads=8, kv_heads=3, intermediate=8, vocab=8, layers=1)
    with pytest.raises(ValueError, match="layers must be a positive integer"):
        ModelConfig("x", hidden=64, heads=8, kv_heads=8, intermediate=8, vocab=8, layers=0)


# --------------------------------------------------------------------------- reductions

def _nearest(x: float, mantissa_bits: int, smallest_ulp: float) -> float:
    """Round x to `mantissa_bits` significant bits (subnormals: to a multiple of `smallest_ulp`),
    ties to even: the test oracle (no overflow handling: the values stay in range)."""
    if x == 0:
        return 0.0
    _, e = math.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1
    ulp = max(math.ldexp(1.0, e - mantissa_bits), smallest_ulp)
    return round(x / ulp) * ulp  # x / ulp is exact (a power-of-two scale); round() is ties-to-even


@pytest.mark.parametrize("dtype,bits,smallest", [(torch.bfloat16, 8, 2.0 ** -133), (torch.float16, 11, 2.0 ** -24)])
def test_round_float64_is_correctly_rounded(dtype, bits, smallest):
    rng = random.Random(0)
    values = []
    for _ in range(3000):
        e = rng.randint(-30, 10)  # fp16's subnormals included
        values.append(rng.uniform(-1, 1) * 2.0 ** e)
    # ties and near-ties: halfway points between neighbours, nudged by one float64 ulp either way
    for _ in range(500):
        m = rng.randint(2 ** (bits - 1), 2 ** bits - 1) + 0.5
        tie = m * 2.0 ** (rng.randint(-8, 8) - bits)
        values += [tie, math.nextafter(tie, math.inf), math.nextafter(tie, -math.inf), -tie]
    x = torch.tensor(values, dtype=torch.float64)
    got = round_float64(x, dtype).to(torch.float64).tolist()
    want = [_nearest(v, bits, smallest) for v in values]
    assert got == want
    if dtype == torch.bfloat16:  # why the helper exists: torch goes through fp32 and rounds twice
        assert not torch.equal(x.to(dtype), round_float64(x, dtype))
    assert round_float64(x, torch.float32).equal(x.to(torch.float32))


def _bf16_partials(world, n, seed, spread):
    g = torch.Generator().manual_seed(seed)
    scale = 2.0 ** torch.randint(-spread, spread + 1, (world, n), generator=g)
    return list((torch.randn(world, n, generator=g, dtype=torch.float64) * scale).to(torch.bfloat16))


def test_two_ranks_fp32_rank_order_sum_is_exact():
    """The fact the W=2 token identity rests on: to_bf16(fp32(a + b)) == correctly rounded a + b."""
    partials = _bf16_partials(2, 200_000, seed=1, spread=12)
    assert torch.equal(rank_order_fp32_sum(partials), exact_sum(partials))


def test_rounding_stats_find_where_four_ranks_differ():
    partials = _bf16_partials(4, 200_000, seed=2, spread=12)
    exact, fp32 = exact_sum(partials), rank_order_fp32_sum(partials)
    stats = RoundingStats()
    stats.add(partials, exact, fp32)
    assert stats.differing == int((exact != fp32).sum()) > 0
    e = stats.example
    assert sum(e["partials"]) == pytest.approx(e["sum_float64"], rel=1e-15)
    assert e["exact_rounded"] != e["fp32_rank_order_rounded"]
    assert "round differently" in stats.describe()


def test_thread_group_raises_a_ranks_error_without_hanging():
    group = ThreadGroup(3, timeout_s=30)

    def body(rank):
        if rank == 1:
            raise KeyError("rank 1 broke")
        return group.reducer(rank)(torch.ones(4))

    with pytest.raises(KeyError, match="rank 1 broke"):
        group.run(body)
