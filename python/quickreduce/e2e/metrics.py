"""How far a model run with a lossy reduction is from the same run reduced exactly.

All functions take plain tensors: log-probabilities [positions, vocab] (fp32), targets
[positions], greedy continuations [prompts, tokens]; none needs a model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def next_token_logprobs(logits: torch.Tensor) -> torch.Tensor:
    """[T, V] logits of one window -> [T - 1, V] fp32 log-probabilities of tokens 1..T-1."""
    if logits.dim() != 2 or logits.shape[0] < 2:
        raise ValueError(f"expected [tokens >= 2, vocab] logits, got {tuple(logits.shape)}")
    return torch.log_softmax(logits[:-1].float(), dim=-1)


def token_nll(logprobs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood (nats) of each target under its row of log-probabilities."""
    if logprobs.shape[0] != targets.shape[0]:
        raise ValueError(f"{logprobs.shape[0]} rows of log-probabilities for {targets.shape[0]} targets")
    return -logprobs.gather(1, targets.long().view(-1, 1)).squeeze(1)


def perplexity(nll: torch.Tensor) -> float:
    """exp(mean NLL) over all positions (nats)."""
    if nll.numel() == 0:
        raise ValueError("perplexity of no tokens")
    return math.exp(float(nll.double().mean()))


def top1_agreement(logprobs: torch.Tensor, reference: torch.Tensor) -> float:
    """Share of positions whose most likely next token is the reference run's."""
    if logprobs.shape != reference.shape:
        raise ValueError(f"shapes differ: {tuple(logprobs.shape)} vs {tuple(reference.shape)}")
    return float((logprobs.argmax(-1) == reference.argmax(-1)).double().mean())


def mean_kl(logprobs: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean over positions of KL(reference || this), in nats: how much probability mass moved."""
    if logprobs.shape != reference.shape:
        raise ValueError(f"shapes differ: {tuple(logprobs.shape)} vs {tuple(reference.shape)}")
    kl = (reference.exp() * (reference - logprobs)).sum(-1)
    return float(kl.double().mean().clamp_min(0.0))


@dataclass(frozen=True)
class GreedyAgreement:
    identical: int  # prompts whose whole continuation equals the reference's
    prompts: int
    prefix_share: float  # mean over prompts of (tokens before the first difference) / tokens

    def __str__(self) -> str:
        return (f"{self.identical}/{self.prompts} identical, {100 * self.prefix_share:.1f}% of tokens before the "
                "first difference")


def greedy_agreement(tokens: torch.Tensor, reference: torch.Tensor) -> GreedyAgreement:
    """Compare greedy continuations [prompts, new tokens] with the reference run's. After the first
    different token the two runs continue from different text, so only the common prefix counts."""
    if tokens.shape != reference.shape or tokens.dim() != 2:
        raise ValueError(f"expected equal [prompts, tokens] shapes, got {tuple(tokens.shape)} and "
                         f"{tuple(reference.shape)}")
    prompts, length = tokens.shape
    same = tokens == reference
    # index of the first difference (length where there is none)
    first = torch.where(same.all(1), torch.full((prompts,), length), (~same).int().argmax(1))
    return GreedyAgreement(identical=int(same.all(1).sum()), prompts=prompts,
                           prefix_share=float(first.double().mean() / length))
