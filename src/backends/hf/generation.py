"""Generation: a small sampling loop over the KV cache, seeded per request and repetition.

The prompt is encoded once, its cache is copied to n rows, and row r samples with its own torch.Generator
seeded from (request seed, r), so a request's samples do not depend on which other requests share its
batch, nor on n; a round of adaptive repetitions (`first_repetition` in its params, src/adaptive.py) draws
repetitions first..first+n-1 with those same streams. Greedy decoding (temperature 0) runs one row and copies its
text n times.
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

import torch

from src.backends.base import Completion, SamplingParams
from src.backends.hf.forward import LoadedModel, positions


def generate(lm: LoadedModel, tokenizer: Any, encoded: list[list[int]], seeds: Sequence[int], params: SamplingParams,
             batch_size: int) -> list[list[str]]:
    """`params.n` completions per encoded prompt, the prompt's samples drawn with the streams of its seed."""
    greedy = params.temperature <= 0
    rows_per_prompt = 1 if greedy else params.n  # greedy: one decode, copied n times
    first = getattr(params, "first_repetition", 0)  # src/adaptive.py RoundParams: rows are repetitions first..first+n-1
    results: list[list[str] | None] = [None] * len(encoded)
    for batch in lm.batches([len(e) for e in encoded], batch_size, "generate"):
        ids, mask = lm.left_pad([encoded[i] for i in batch])
        pos = positions(mask)
        logits, past = lm.forward(ids, mask, pos, keep=1, use_cache=True)
        expand = torch.arange(len(batch), device=lm.device).repeat_interleave(rows_per_prompt)
        if rows_per_prompt > 1:
            past.reorder_cache(expand)
        logits, mask, last_pos = logits[expand, -1], mask[expand], pos[expand, -1:]
        generators = None if greedy else [  # a round of adaptive repetitions starts at `first_repetition`
            torch.Generator().manual_seed(stream_seed(seeds[i], first + r))
            for i in batch for r in range(rows_per_prompt)
        ]
        new_tokens, done = [], torch.zeros(len(expand), dtype=torch.bool, device=lm.device)
        for step in range(params.max_new_tokens):
            token = pick(logits, params, generators)
            token = torch.where(done, torch.full_like(token, lm.pad_id), token)
            new_tokens.append(token)
            done |= torch.isin(token, lm.eos_ids)
            if bool(done.all()) or step == params.max_new_tokens - 1:
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            last_pos = last_pos + 1
            logits, past = lm.forward(token[:, None], mask, last_pos, keep=1, use_cache=True, past=past)
            logits = logits[:, -1]
        # a row without an end token ran to max_new_tokens: decode marks it truncated
        eos = set(lm.eos_ids.tolist())
        texts = [decode(tokenizer, eos, row) for row in torch.stack(new_tokens, dim=1).tolist()]
        for b, i in enumerate(batch):
            mine = texts[b * rows_per_prompt:(b + 1) * rows_per_prompt]
            results[i] = mine * params.n if greedy else mine
    return results  # type: ignore[return-value]


def decode(tokenizer: Any, eos: set[int], token_ids: list[int]) -> Completion:
    """The text before the first end token; truncated when there is none (generation hit max_new_tokens)."""
    end = next((k for k, t in enumerate(token_ids) if t in eos), None)
    text = tokenizer.decode(token_ids[:end], skip_special_tokens=True)
    return Completion(text, truncated=end is None)


def stream_seed(seed: int, repetition: int) -> int:
    """A 63-bit torch seed for repetition `repetition` of a request seeded `seed`.

    >>> stream_seed(7, 0) != stream_seed(7, 1) and 0 <= stream_seed(7, 0) < 2 ** 63
    True
    """
    digest = hashlib.sha256(f"{seed}|{repetition}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def pick(logits: torch.Tensor, params: SamplingParams, generators: list[torch.Generator] | None) -> torch.Tensor:
    """Next token per row: argmax when greedy, else a draw with the row's own generator (temperature, top-k, top-p)."""
    logits = logits.float()
    if generators is None:
        return logits.argmax(dim=-1)
    probs = torch.softmax(filtered_logits(logits, params), dim=-1)
    # Exponential race (argmax p/E, E ~ Exp(1)) draws from `probs`, one noise vector per row from the row's generator.
    noise = torch.stack([torch.empty(probs.shape[-1]).exponential_(generator=g) for g in generators]).to(probs.device)
    return (probs / noise).argmax(dim=-1)


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
