"""quickreduce in a model, end to end (`quickreduce e2e`; docs/e2e.md).

- config.py     decoder shapes: presets (llama3-8b, llama3-70b, qwen3-32b-like), JSON files, and
                how tensor parallelism cuts them over ranks (ShardPlan)
- model.py      one rank of a Megatron-style tensor-parallel Llama decoder in plain torch; its two
                all-reduces per layer go through a pluggable reducer; KV cache, CUDA-graph decode
- reducers.py   reference reductions (exact float64, fp32 rank order), correct float64 rounding,
                ranks as threads for CPU tests
- providers.py  the speed run's all-reduce providers, built on `quickreduce bench`'s adapters
- speed.py      the per-rank speed runner: token check, prefill and decode timings (GPU)
- report.py     speed tables, CSV, plot (no GPU)
- fidelity.py   a real pretrained model (SmolLM2-135M, shipped in a wheel) run tensor-parallel with
                each codec through the CPU twin, against the exact reduction
- metrics.py    perplexity, top-1 agreement, KL, greedy agreement
"""
from .config import PRESETS, ModelConfig, ShardPlan, load_model_config
from .model import KVCache, TensorParallelDecoder, full_random_weights, greedy_generate, no_reduction, \
    random_rank_weights, shard_weights
from .reducers import GatheredSum, ThreadGroup, exact_sum, rank_order_fp32_sum, round_float64

__all__ = ["GatheredSum", "KVCache", "ModelConfig", "PRESETS", "ShardPlan", "TensorParallelDecoder", "ThreadGroup",
           "exact_sum", "full_random_weights", "greedy_generate", "load_model_config", "no_reduction",
           "random_rank_weights", "rank_order_fp32_sum", "round_float64", "shard_weights"]
