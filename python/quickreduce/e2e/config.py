"""Decoder shapes (presets, JSON files) and how tensor parallelism cuts them over ranks.

A `ModelConfig` is the shape of a Llama-style decoder: hidden size, attention heads, key/value
heads (grouped-query attention), MLP width, vocabulary, layer count, rotary base. The presets are
the published shapes of Llama-3-8B, Llama-3-70B and a Qwen3-32B-like model (Qwen3-32B's shapes, its
per-head q/k RMSNorm included); `layers=` cuts any of them short so a big model's layers fit a GPU.

A `ShardPlan` is one rank's slice under Megatron-style tensor parallelism: query heads and the MLP
width split evenly over the ranks; key/value heads split too when there are at least as many as
ranks, and are replicated otherwise (each group of W / kv_heads ranks holds the one kv head its
query heads read).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModelConfig:
    name: str
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    layers: int
    head_dim: int = 0  # 0: hidden // heads
    rope_theta: float = 500_000.0
    rms_eps: float = 1e-5
    qk_norm: bool = False  # Qwen3: RMSNorm over each query and key head before the rotary embedding
    tie_embeddings: bool = False  # the LM head is the embedding matrix

    def __post_init__(self) -> None:
        for field in ("hidden", "heads", "kv_heads", "intermediate", "vocab", "layers"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"model {self.name!r}: {field} must be a positive integer, got {value!r}")
        if not isinstance(self.head_dim, int) or self.head_dim < 0:
            raise ValueError(f"model {self.name!r}: head_dim must be a non-negative integer, got {self.head_dim!r}")
        if self.head_dim == 0 and self.hidden % self.heads:
            raise ValueError(f"model {self.name!r}: hidden {self.hidden} is not a multiple of {self.heads} heads; "
                             "give head_dim")
        if self.heads % self.kv_heads:
            raise ValueError(f"model {self.name!r}: {self.heads} query heads do not group evenly over "
                             f"{self.kv_heads} kv heads")
        if self.dim_per_head % 2:
            raise ValueError(f"model {self.name!r}: head_dim {self.dim_per_head} must be even (rotary pairs)")
        if self.rope_theta <= 0 or self.rms_eps <= 0:
            raise ValueError(f"model {self.name!r}: rope_theta and rms_eps must be positive")

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def with_layers(self, layers: int | None) -> "ModelConfig":
        """This shape with `layers` decoder layers (None: unchanged)."""
        if layers is None:
            return self
        return dataclasses.replace(self, layers=layers)

    def parameters(self) -> int:
        """Weights in the whole (unsharded) model."""
        d, hd = self.hidden, self.dim_per_head
        attention = d * hd * (2 * self.heads + 2 * self.kv_heads) + 2 * d
        mlp = 3 * d * self.intermediate
        head = 0 if self.tie_embeddings else self.vocab * d
        return self.layers * (attention + mlp) + self.vocab * d + head + d


PRESETS: dict[str, ModelConfig] = {
    "llama3-8b": ModelConfig("llama3-8b", hidden=4096, heads=32, kv_heads=8, intermediate=14336,
                             vocab=128256, layers=32, rope_theta=500_000.0, rms_eps=1e-5),
    "llama3-70b": ModelConfig("llama3-70b", hidden=8192, heads=64, kv_heads=8, intermediate=28672,
                              vocab=128256, layers=80, rope_theta=500_000.0, rms_eps=1e-5),
    "qwen3-32b-like": ModelConfig("qwen3-32b-like", hidden=5120, heads=64, kv_heads=8, head_dim=128,
                                  intermediate=25600, vocab=151936, layers=64, rope_theta=1_000_000.0,
                                  rms_eps=1e-6, qk_norm=True),
}

# Hugging Face config.json keys -> ours, so `--model path/to/config.json` takes a real model's file.
_HF_KEYS = {"hidden_size": "hidden", "num_attention_heads": "heads", "num_key_value_heads": "kv_heads",
            "intermediate_size": "intermediate", "vocab_size": "vocab", "num_hidden_layers": "layers",
            "head_dim": "head_dim", "rope_theta": "rope_theta", "rms_norm_eps": "rms_eps",
            "tie_word_embeddings": "tie_embeddings"}


def load_model_config(spec: str, layers: int | None = None) -> ModelConfig:
    """A preset name, or a JSON file: our field names (see ModelConfig), or a Hugging Face
    config.json (hidden_size, num_attention_heads, ...; Qwen3 model_type turns qk_norm on)."""
    if spec in PRESETS:
        return PRESETS[spec].with_layers(layers)
    path = Path(spec)
    if path.suffix != ".json" and not path.exists():
        raise ValueError(f"unknown model {spec!r}: choose a preset ({', '.join(PRESETS)}) or give a JSON file")
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"model config file {spec!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"model config file {spec!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"model config file {spec!r} must hold a JSON object")
    return config_from_dict(data, default_name=path.stem).with_layers(layers)


def config_from_dict(data: dict[str, Any], default_name: str = "custom") -> ModelConfig:
    if "hidden_size" in data:  # a Hugging Face config.json: take what we model, ignore the rest
        fields = {ours: data[theirs] for theirs, ours in _HF_KEYS.items() if data.get(theirs) is not None}
        fields.setdefault("kv_heads", data.get("num_attention_heads"))
        rope = data.get("rope_parameters") or data.get("rope_scaling") or {}
        if "rope_theta" not in fields and isinstance(rope, dict) and "rope_theta" in rope:
            fields["rope_theta"] = rope["rope_theta"]
        fields["qk_norm"] = str(data.get("model_type", "")).startswith("qwen3")
        fields["name"] = data.get("_name_or_path") or data.get("model_type") or default_name
    else:
        known = {f.name for f in dataclasses.fields(ModelConfig)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown model config keys {unknown}; known: {sorted(known)}")
        fields = dict(data)
        fields.setdefault("name", default_name)
    missing = [k for k in ("hidden", "heads", "kv_heads", "intermediate", "vocab", "layers") if k not in fields]
    if missing:
        raise ValueError(f"model config lacks {missing}")
    for key in ("rope_theta", "rms_eps"):
        if key in fields:
            fields[key] = float(fields[key])
    return ModelConfig(**fields)


@dataclass(frozen=True)
class ShardPlan:
    """What rank `rank` of `world_size` holds. Ranges are [start, start + count) in the full model."""

    config: ModelConfig
    world_size: int
    rank: int

    def __post_init__(self) -> None:
        c, w = self.config, self.world_size
        if not isinstance(w, int) or w < 1 or not 0 <= self.rank < w:
            raise ValueError(f"rank {self.rank} of world size {w} is not a rank")
        if c.heads % w:
            raise ValueError(f"model {c.name!r}: {c.heads} attention heads do not split over {w} ranks "
                             "(tensor parallelism needs heads % world_size == 0)")
        if c.intermediate % w:
            raise ValueError(f"model {c.name!r}: MLP width {c.intermediate} does not split over {w} ranks")
        if c.kv_heads >= w and c.kv_heads % w:
            raise ValueError(f"model {c.name!r}: {c.kv_heads} kv heads do not split over {w} ranks")
        if c.kv_heads < w and w % c.kv_heads:
            raise ValueError(f"model {c.name!r}: {c.kv_heads} kv heads cannot be replicated evenly over {w} ranks")

    @property
    def q_heads(self) -> int:
        return self.config.heads // self.world_size

    @property
    def q_head_start(self) -> int:
        return self.rank * self.q_heads

    @property
    def kv_replicated(self) -> bool:
        """Fewer kv heads than ranks: each rank holds one, shared with world_size / kv_heads ranks."""
        return self.config.kv_heads < self.world_size

    @property
    def kv_heads(self) -> int:
        return 1 if self.kv_replicated else self.config.kv_heads // self.world_size

    @property
    def kv_head_start(self) -> int:
        if self.kv_replicated:
            return self.rank // (self.world_size // self.config.kv_heads)
        return self.rank * self.kv_heads

    @property
    def mlp_width(self) -> int:
        return self.config.intermediate // self.world_size

    @property
    def mlp_start(self) -> int:
        return self.rank * self.mlp_width
