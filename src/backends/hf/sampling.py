"""The sampling filter (temperature, top-k, top-p) on logits: what generation samples from, and what exact
first-token sampling in scoring reads the label tokens' share of. Below both, so neither sits above the other
for it."""

from __future__ import annotations

import torch

from src.backends.base import SamplingParams


def filtered_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Logits divided by the temperature, with tokens outside top-k / top-p set to -inf (float, rows = positions).
    `generate` samples from their softmax; exact first-token sampling reads the label tokens' share of it."""
    logits = logits / params.temperature
    if params.top_k is not None and 0 < params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_logits, dim=-1)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the better tokens; the best one always stays
        drop = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, order, before >= params.top_p)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits
