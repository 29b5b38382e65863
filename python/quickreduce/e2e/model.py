"""One rank of a Megatron-style tensor-parallel Llama decoder, in plain torch.

Per layer: RMSNorm -> column-parallel fused QKV (this rank's query heads and its kv heads) ->
rotary embedding -> attention (torch SDPA) -> row-parallel o_proj -> all-reduce -> residual;
RMSNorm -> column-parallel fused gate/up -> SwiGLU -> row-parallel down -> all-reduce -> residual.
The two all-reduces per layer are the only communication: they go through `self.reducer`, any
callable that takes this rank's partial sum and returns the sum over the ranks (a quickreduce
Communicator, NCCL, an exact reference, or the identity for a no-communication baseline). The
embedding and the LM head are replicated on every rank (no vocab-parallel gather), so the
reducer sees every byte the model communicates.

Weights are a dict of tensors in torch's Linear layout ([out, in]). `full_random_weights` and
`shard_weights` make the unsharded model and cut it (the CPU tests compare the two);
`random_rank_weights` draws one rank's shards directly (speed runs: no rank ever holds the whole
model), each from its own seed, kv heads from the kv head's seed, so ranks that replicate a kv
head hold the same values.

Attention: prefill starts at position 0 and is causal (kv heads repeated to the query heads, so
any SDPA backend runs it); decode takes one token per sequence at a position held in a device
tensor and attends the whole cache under a mask, so one captured CUDA graph serves every step.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .config import ModelConfig, ShardPlan

Reducer = Callable[[torch.Tensor], torch.Tensor]


def no_reduction(partial: torch.Tensor) -> torch.Tensor:
    """The identity: one rank (W=1), or the no-communication baseline of a speed run."""
    return partial


# --------------------------------------------------------------------------- weights

def full_random_weights(config: ModelConfig, seed: int = 0, dtype: torch.dtype = torch.float32,
                        device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """The unsharded model's weights: N(0, 1/fan_in) matrices, norms near 1 (not exactly 1, so a
    test notices a norm weight applied to the wrong slice)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    d, hd, i = config.hidden, config.dim_per_head, config.intermediate

    def matrix(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=g, dtype=torch.float64) / cols ** 0.5).to(dtype).to(device)

    def norm(n: int) -> torch.Tensor:
        return (1 + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)).to(dtype).to(device)

    weights = {"embed": torch.randn(config.vocab, d, generator=g, dtype=torch.float64).to(dtype).to(device)}
    for layer in range(config.layers):
        p = f"layers.{layer}."
        weights[p + "attn_norm"] = norm(d)
        weights[p + "wq"] = matrix(config.heads * hd, d)
        weights[p + "wk"] = matrix(config.kv_heads * hd, d)
        weights[p + "wv"] = matrix(config.kv_heads * hd, d)
        weights[p + "wo"] = matrix(d, config.heads * hd)
        weights[p + "mlp_norm"] = norm(d)
        weights[p + "w_gate"] = matrix(i, d)
        weights[p + "w_up"] = matrix(i, d)
        weights[p + "w_down"] = matrix(d, i)
        if config.qk_norm:
            weights[p + "q_norm"] = norm(hd)
            weights[p + "k_norm"] = norm(hd)
    weights["final_norm"] = norm(d)
    if not config.tie_embeddings:
        weights["lm_head"] = matrix(config.vocab, d)
    return weights


def shard_weights(full: dict[str, torch.Tensor], plan: ShardPlan) -> dict[str, torch.Tensor]:
    """Rank `plan.rank`'s slices of the unsharded weights, in the layout TensorParallelDecoder takes."""
    c, hd = plan.config, plan.config.dim_per_head
    q = slice(plan.q_head_start * hd, (plan.q_head_start + plan.q_heads) * hd)
    kv = slice(plan.kv_head_start * hd, (plan.kv_head_start + plan.kv_heads) * hd)
    mlp = slice(plan.mlp_start, plan.mlp_start + plan.mlp_width)
    shards = {"embed": full["embed"], "final_norm": full["final_norm"],
              "lm_head": full["embed"] if c.tie_embeddings else full["lm_head"]}
    for layer in range(c.layers):
        p = f"layers.{layer}."
        shards[p + "attn_norm"] = full[p + "attn_norm"]
        shards[p + "wqkv"] = torch.cat([full[p + "wq"][q], full[p + "wk"][kv], full[p + "wv"][kv]]).contiguous()
        shards[p + "wo"] = full[p + "wo"][:, q].contiguous()
        shards[p + "mlp_norm"] = full[p + "mlp_norm"]
        shards[p + "w_gate_up"] = torch.cat([full[p + "w_gate"][mlp], full[p + "w_up"][mlp]]).contiguous()
        shards[p + "w_down"] = full[p + "w_down"][:, mlp].contiguous()
        if c.qk_norm:
            shards[p + "q_norm"] = full[p + "q_norm"]
            shards[p + "k_norm"] = full[p + "k_norm"]
    return shards


def _seed(base: int, *parts: object) -> int:
    """A seed from readable parts; crc32, not hash(): str hashes differ between processes."""
    return zlib.crc32(repr((base,) + parts).encode()) * 2654435761 % (1 << 63)


def random_rank_weights(plan: ShardPlan, seed: int = 0, dtype: torch.dtype = torch.bfloat16,
                        device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """One rank's shards drawn directly on `device` (N(0, 1/fan_in), norms 1): for speed runs.
    Replicated tensors (embedding, LM head, norms) and kv heads come from seeds every rank shares;
    the rest from the rank's own."""
    c, hd, d = plan.config, plan.config.dim_per_head, plan.config.hidden

    def draw(rows: int, cols: int, *key: object, scale: float | None = None) -> torch.Tensor:
        g = torch.Generator(device=device).manual_seed(_seed(seed, *key))
        x = torch.randn(rows, cols, generator=g, device=device, dtype=torch.float32)
        return x.mul_(cols ** -0.5 if scale is None else scale).to(dtype)

    ones = torch.ones(d, dtype=dtype, device=device)
    shards = {"embed": draw(c.vocab, d, "embed", scale=1.0), "final_norm": ones}
    shards["lm_head"] = shards["embed"] if c.tie_embeddings else draw(c.vocab, d, "lm_head")
    kv_range = range(plan.kv_head_start, plan.kv_head_start + plan.kv_heads)
    for layer in range(c.layers):
        p = f"layers.{layer}."
        wq = draw(plan.q_heads * hd, d, layer, "wq", plan.rank)
        wk = torch.cat([draw(hd, d, layer, "wk", head) for head in kv_range])
        wv = torch.cat([draw(hd, d, layer, "wv", head) for head in kv_range])
        shards[p + "wqkv"] = torch.cat([wq, wk, wv])
        shards[p + "wo"] = draw(d, plan.q_heads * hd, layer, "wo", plan.rank)
        shards[p + "w_gate_up"] = draw(2 * plan.mlp_width, d, layer, "w_gate_up", plan.rank)
        shards[p + "w_down"] = draw(d, plan.mlp_width, layer, "w_down", plan.rank)
        shards[p + "attn_norm"] = shards[p + "mlp_norm"] = ones
        if c.qk_norm:
            shards[p + "q_norm"] = shards[p + "k_norm"] = torch.ones(hd, dtype=dtype, device=device)
    return shards


# --------------------------------------------------------------------------- the model

@dataclass
class KVCache:
    """Keys and values of every layer: [batch, kv heads of this rank, length, head_dim] each."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    @property
    def length(self) -> int:
        return self.keys[0].shape[2]

    @property
    def batch(self) -> int:
        return self.keys[0].shape[0]


def _work_dtype(x: torch.Tensor) -> torch.dtype:
    """fp32 for the 16-bit dtypes (as Llama computes norms and rotary), float64 kept for tests."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm: normalized in fp32, back to x's dtype, then scaled."""
    xf = x.to(_work_dtype(x))
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return xf.to(x.dtype) * weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in the half-split layout (Hugging Face's rotate_half), computed in fp32.
    x: [B, T, heads, hd]; cos/sin: [B or 1, T, 1, hd]."""
    xf = x.to(_work_dtype(x))
    x1, x2 = xf.chunk(2, dim=-1)
    return (xf * cos + torch.cat([-x2, x1], dim=-1) * sin).to(x.dtype)


class TensorParallelDecoder:
    """Rank `plan.rank`'s share of the decoder; see the module docstring. Inference only."""

    def __init__(self, plan: ShardPlan, weights: dict[str, torch.Tensor], reducer: Reducer = no_reduction):
        self.plan = plan
        self.config = plan.config
        self.reducer = reducer
        self.weights = weights
        missing = [k for k in self._expected_keys() if k not in weights]
        if missing:
            raise ValueError(f"weights lack {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        self.dtype = weights["embed"].dtype
        self.device = weights["embed"].device
        hd = self.config.dim_per_head
        self._split = [plan.q_heads * hd, plan.kv_heads * hd, plan.kv_heads * hd]
        self._rope_cos = self._rope_sin = torch.empty(0, hd, device=self.device)

    def _expected_keys(self) -> list[str]:
        per_layer = ["attn_norm", "wqkv", "wo", "mlp_norm", "w_gate_up", "w_down"]
        per_layer += ["q_norm", "k_norm"] if self.config.qk_norm else []
        return ["embed", "final_norm", "lm_head"] + [f"layers.{i}.{k}" for i in range(self.config.layers)
                                                     for k in per_layer]

    # ---- buffers

    def new_cache(self, batch: int, length: int) -> KVCache:
        """A zeroed KV cache for `batch` sequences of up to `length` tokens (rotary table sized too)."""
        shape = (batch, self.plan.kv_heads, length, self.config.dim_per_head)
        self.ensure_positions(length)
        return KVCache([torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.config.layers)],
                       [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.config.layers)])

    def ensure_positions(self, length: int) -> None:
        """Grow the rotary cos/sin table to `length` positions (before any CUDA-graph capture)."""
        if self._rope_cos.shape[0] >= length:
            return
        hd = self.config.dim_per_head
        inv_freq = 1.0 / self.config.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        angles = torch.arange(length, dtype=torch.float64)[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)
        work = torch.float64 if self.dtype == torch.float64 else torch.float32
        self._rope_cos = angles.cos().to(work).to(self.device)
        self._rope_sin = angles.sin().to(work).to(self.device)

    # ---- forward

    @torch.no_grad()
    def prefill(self, tokens: torch.Tensor, cache: KVCache | None = None, all_logits: bool = False) -> torch.Tensor:
        """Run prompts [B, T] from position 0; fills cache[:, :, :T] when given. Returns fp32 logits
        of the last position [B, vocab], or of every position [B, T, vocab] with all_logits."""
        batch, length = tokens.shape
        if cache is not None and (cache.batch != batch or cache.length < length):
            raise ValueError(f"cache holds {cache.batch} x {cache.length} tokens; prefill needs {batch} x {length}")
        self.ensure_positions(length)
        cos = self._rope_cos[:length][None, :, None, :]
        sin = self._rope_sin[:length][None, :, None, :]
        x = F.embedding(tokens, self.weights["embed"])
        for layer in range(self.config.layers):
            x = self._layer(x, layer, cos, sin, cache, positions=None)
        if not all_logits:
            x = x[:, -1:]
        logits = self._head(x)
        return logits if all_logits else logits[:, 0]

    @torch.no_grad()
    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One token per sequence (tokens [B]) at `positions` [B] (a device tensor: CUDA-graph
        friendly); writes its keys/values there and attends cache[..., :position + 1]. Returns fp32
        logits [B, vocab]."""
        cos = self._rope_cos[positions][:, None, None, :]
        sin = self._rope_sin[positions][:, None, None, :]
        x = F.embedding(tokens[:, None], self.weights["embed"])
        for layer in range(self.config.layers):
            x = self._layer(x, layer, cos, sin, cache, positions=positions)
        return self._head(x)[:, 0]

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        x = rms_norm(x, self.weights["final_norm"], self.config.rms_eps)
        return F.linear(x, self.weights["lm_head"]).float()

    def _layer(self, x, layer, cos, sin, cache, positions):
        w = self.weights
        p = f"layers.{layer}."
        eps = self.config.rms_eps
        x = x + self.reducer(self._attention(rms_norm(x, w[p + "attn_norm"], eps), layer, cos, sin, cache, positions))
        h = F.linear(rms_norm(x, w[p + "mlp_norm"], eps), w[p + "w_gate_up"])
        gate, up = h.chunk(2, dim=-1)
        return x + self.reducer(F.linear(F.silu(gate) * up, w[p + "w_down"]))

    def _attention(self, x, layer, cos, sin, cache, positions):
        """This rank's heads' attention output through its o_proj slice: the partial sum."""
        w, p = self.weights, f"layers.{layer}."
        batch, length, _ = x.shape
        hd, hq, hk = self.config.dim_per_head, self.plan.q_heads, self.plan.kv_heads
        q, k, v = F.linear(x, w[p + "wqkv"]).split(self._split, dim=-1)
        q, k, v = q.view(batch, length, hq, hd), k.view(batch, length, hk, hd), v.view(batch, length, hk, hd)
        if self.config.qk_norm:
            q = rms_norm(q, w[p + "q_norm"], self.config.rms_eps)
            k = rms_norm(k, w[p + "k_norm"], self.config.rms_eps)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, heads, T, hd]
        if positions is None:  # prefill from position 0: causal over the prompt itself
            if cache is not None:
                cache.keys[layer][:, :, :length].copy_(k)
                cache.values[layer][:, :, :length].copy_(v)
            if hq != hk:
                k, v = k.repeat_interleave(hq // hk, dim=1), v.repeat_interleave(hq // hk, dim=1)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # decode: one query per sequence against the whole cache, later slots masked
            index = positions.view(batch, 1, 1, 1).expand(batch, hk, 1, hd)
            keys = cache.keys[layer].scatter_(2, index, k)
            values = cache.values[layer].scatter_(2, index, v)
            # Query head j reads kv head j // (hq / hk): group the queries per kv head, so no
            # backend needs grouped-query support and no key is copied.
            grouped = q.reshape(batch, hk, hq // hk, hd)
            slots = torch.arange(cache.length, device=x.device)
            mask = (slots[None, :] <= positions[:, None]).view(batch, 1, 1, cache.length)
            out = F.scaled_dot_product_attention(grouped, keys, values, attn_mask=mask)
            out = out.reshape(batch, hq, 1, hd)
        out = out.transpose(1, 2).reshape(batch, length, hq * hd)
        return F.linear(out, w[p + "wo"])


# --------------------------------------------------------------------------- generation

def capture_graph(run: Callable[[], torch.Tensor], after_capture: Callable[[], None] | None = None
                  ) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """(graph, output) of run() captured in a CUDA graph, after one run on a side stream so lazy
    initializations happen outside the capture; after_capture() once the capture ends."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = run()
    if after_capture is not None:
        after_capture()
    return graph, output


class GraphedDecodeStep:
    """One decode step captured in a CUDA graph; call it with tokens and positions to replay.

    Warm-up and capture write the last cache slot (position length - 1), which generation never
    reads before writing: give the cache one slot more than the tokens it will hold."""

    def __init__(self, model: TensorParallelDecoder, cache: KVCache, after_capture: Callable[[], None] | None = None):
        batch = cache.batch
        self.tokens = torch.zeros(batch, dtype=torch.long, device=model.device)
        self.positions = torch.full((batch,), cache.length - 1, dtype=torch.long, device=model.device)
        self.graph, self.logits = capture_graph(lambda: model.decode(self.tokens, self.positions, cache), after_capture)

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        self.tokens.copy_(tokens)
        self.positions.copy_(positions)
        self.graph.replay()
        return self.logits

    def replay(self) -> None:
        self.graph.replay()


class GraphedPrefill:
    """A prefill of fixed prompts [B, T] (no cache, last-position logits) captured in a CUDA graph;
    replay() runs it again."""

    def __init__(self, model: TensorParallelDecoder, prompt: torch.Tensor,
                 after_capture: Callable[[], None] | None = None):
        self.graph, self.logits = capture_graph(lambda: model.prefill(prompt), after_capture)

    def replay(self) -> None:
        self.graph.replay()


def greedy_generate(model: TensorParallelDecoder, prompt: torch.Tensor, new_tokens: int, *,
                    graph: bool = False, after_capture: Callable[[], None] | None = None) -> torch.Tensor:
    """Greedy continuation [B, new_tokens] of prompts [B, T]: prefill, then one decode step per
    token (replayed from a CUDA graph with `graph`)."""
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be at least 1, got {new_tokens}")
    batch, length = prompt.shape
    cache = model.new_cache(batch, length + new_tokens)  # + 1 spare slot for the graph's warm-up
    token = model.prefill(prompt, cache).argmax(-1)
    out = [token]
    step = GraphedDecodeStep(model, cache, after_capture) if graph else None
    positions = torch.full((batch,), length, dtype=torch.long, device=model.device)
    for _ in range(new_tokens - 1):
        logits = step(token, positions) if step is not None else model.decode(token, positions, cache)
        token = logits.argmax(-1)
        out.append(token)
        positions = positions + 1
    return torch.stack(out, dim=1)
