"""Generation: a small sampling loop over the KV cache, seeded per request and repetition.

Row r of a prompt samples with its own torch.Generator seeded from (request seed, r), so a request's samples do
not depend on which other requests share its batch, nor on n; a round of adaptive repetitions (`first_repetition`
in its params, src/answering/adaptive.py) draws repetitions first..first+n-1 with those same streams. Greedy decoding
(temperature 0) runs one row and copies its text n times.

Two layouts give the same tokens (tests/test_generation_sharing.py):

- shared (`generate_shared`, used when the backend packs prefixes): the prompts are packed into prefix trees
  (`packing`), so the text the variants of a question share is fed once and nothing is padded; a pack's KV cache
  is computed once and every sample row decodes against it through a tree attention mask, each row appending one
  token per step to the same cache. The prompt cache is never copied per row, so memory grows with the rows'
  generated tokens only (R x max_new_tokens per prompt), not with R x prompt length; a finished row stops being fed.
- padded (`generate_padded`): left-padded batches of `batch_size` prompts, each prompt's cache copied to its rows.

Memory: the KV cache holds `kv_bytes_per_token` bytes per token fed (layers x 2 x kv heads x head dim x dtype
bytes: 46 KiB for SmolLM2-135M in float32), and a pack's pass holds its (tokens x tokens) attention scores per
head; `budget.tokens_for_memory` turns a memory budget (`model.memory_gb`) into the tokens per pack that fit it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from src.backends.base import Completion, SamplingParams
from src.backends.hf.forward import LoadedModel, positions
from src.backends.hf.packing import PrefixPack, additive_mask, pack_batches, packing_refusal, tree_sees
from src.backends.hf.sampling import filtered_logits
from src.common.digests import seed_of

PICK_ROWS = 32  # rows sampled at once: each holds ~6 vocabulary-wide float tensors (1.2 MiB for SmolLM2's 49,152)


def generate(
    lm: LoadedModel,
    tokenizer: Any,
    encoded: list[list[int]],
    seeds: Sequence[int],
    params: SamplingParams,
    batch_size: int | None,
    *,
    share_prefix: bool = False,
    pack_tokens: int = 1024,
) -> list[list[str]]:
    """`params.n` completions per encoded prompt: prefix-shared when `share_prefix` and the model allows it (its
    sliding window covers the prompts and their new tokens), else in padded batches."""
    longest = max(len(e) for e in encoded) + params.max_new_tokens
    if share_prefix and packing_refusal(lm.model.config, longest) is None:
        return generate_shared(lm, tokenizer, encoded, seeds, params, pack_tokens)
    return generate_padded(lm, tokenizer, encoded, seeds, params, batch_size)


def generate_padded(
    lm: LoadedModel,
    tokenizer: Any,
    encoded: list[list[int]],
    seeds: Sequence[int],
    params: SamplingParams,
    batch_size: int | None,
) -> list[list[str]]:
    """`params.n` completions per encoded prompt in left-padded batches, each prompt's cache copied to its rows; a
    batch's sample rows x (prompt + new tokens) within the token budget."""
    greedy = params.temperature <= 0
    rows_per_prompt = 1 if greedy else params.n  # greedy: one decode, copied n times
    eos = set(lm.eos_ids.tolist())

    def run(batch: list[int]) -> list[Completion]:
        ids, mask = lm.left_pad([encoded[i] for i in batch])
        pos = positions(mask)
        logits, past = lm.forward(ids, mask, pos, keep=1, use_cache=True)
        expand = torch.arange(len(batch), device=lm.device).repeat_interleave(rows_per_prompt)
        if rows_per_prompt > 1:
            past.reorder_cache(expand)
        logits, mask, last_pos = logits[expand, -1], mask[expand], pos[expand, -1:]
        generators = row_generators([seeds[i] for i in batch], params)
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
        return [decode(tokenizer, eos, row) for row in torch.stack(new_tokens, dim=1).tolist()]

    results: list[list[str] | None] = [None] * len(encoded)
    for batch, texts in lm.prompt_batches(
        [len(e) for e in encoded],
        batch_size,
        run,
        "generate",
        rows=lambda i: rows_per_prompt,
        extra=params.max_new_tokens,
    ):
        for b, i in enumerate(batch):
            mine = texts[b * rows_per_prompt : (b + 1) * rows_per_prompt]
            results[i] = mine * params.n if greedy else mine
    return results  # type: ignore[return-value]  # every prompt's slot is filled above


def generate_shared(
    lm: LoadedModel,
    tokenizer: Any,
    encoded: list[list[int]],
    seeds: Sequence[int],
    params: SamplingParams,
    pack_tokens: int,
) -> list[list[str]]:
    """`params.n` completions per encoded prompt, the prompts packed into prefix trees of at most `pack_tokens`
    nodes (and the token budget), their samples' tokens included (`decode_pack`): one pack per pass."""
    greedy = params.temperature <= 0
    rows_per_prompt = 1 if greedy else params.n
    eos = set(lm.eos_ids.tolist())

    def run(packs: list[PrefixPack]) -> list[list[int]]:
        pack = packs[0]
        return decode_pack(lm, pack, [len(encoded[i]) for i in pack.members], [seeds[i] for i in pack.members], params)

    results: list[list[str] | None] = [None] * len(encoded)
    for packs, rows in pack_batches(
        lm,
        encoded,
        pack_tokens,
        run,
        "generate",
        "prompt",
        reserve=rows_per_prompt * (params.max_new_tokens - 1),
        max_units=1,
    ):
        for k, i in enumerate(packs[0].members):
            mine: list[str] = [
                decode(tokenizer, eos, row) for row in rows[k * rows_per_prompt : (k + 1) * rows_per_prompt]
            ]
            results[i] = mine * params.n if greedy else mine
    return results  # type: ignore[return-value]  # every prompt's slot is filled above


def decode_pack(
    lm: LoadedModel, pack: PrefixPack, lengths: list[int], seeds: list[int], params: SamplingParams
) -> list[list[int]]:
    """The new tokens of each sample row of a pack's members (member k's rows are k*rows..(k+1)*rows-1; one row per
    member when greedy), up to and including its end token.

    One pass over the pack fills the KV cache with each distinct prompt token once. Each later step feeds one
    token per unfinished row, appended to that same cache (batch of one sequence), with an attention mask in which
    the row sees its own prompt's nodes and its own earlier tokens, at the positions it would have alone: no copy
    of the prompt cache per row, no padding, no step fed for a finished row."""
    rows_per_prompt = 1 if params.temperature <= 0 else params.n
    dtype = lm.model.get_input_embeddings().weight.dtype
    sees = tree_sees(pack.parents)
    ids = torch.tensor([pack.tokens], dtype=torch.long, device=lm.device)
    pos = torch.tensor([pack.positions], dtype=torch.long, device=lm.device)
    last = torch.tensor(pack.last, dtype=torch.long)
    logits, past = lm.forward(
        ids, additive_mask(sees, dtype).to(lm.device), pos, keep=last.to(lm.device), use_cache=True, sees=sees[None]
    )
    owner = torch.arange(len(pack.members)).repeat_interleave(rows_per_prompt)  # member of each row
    logits = logits[0][owner.to(lm.device)]
    row_sees = sees[last][owner]  # (rows, cache length): the cache entries each row attends to
    next_pos = torch.tensor(lengths, dtype=torch.long)[owner]  # position of each row's first new token
    generators = row_generators(seeds, params)
    new_tokens: list[list[int]] = [[] for _ in range(len(owner))]
    active = torch.arange(len(owner))  # the rows still generating, in the order of `logits`' rows
    for step in range(params.max_new_tokens):
        token = torch.cat(
            [  # the sampling arithmetic (several vocabulary-wide tensors per row) in blocks of rows
                pick(
                    logits[start : start + PICK_ROWS],
                    params,
                    None if generators is None else [generators[a] for a in active[start : start + PICK_ROWS].tolist()],
                )
                for start in range(0, len(active), PICK_ROWS)
            ]
        )
        for row, t in zip(active.tolist(), token.tolist()):
            new_tokens[row].append(t)
        going = ~torch.isin(token, lm.eos_ids).cpu()
        if step == params.max_new_tokens - 1 or not bool(going.any()):
            break
        active, token = active[going], token[going.to(token.device)]
        appended = torch.zeros((len(owner), len(active)), dtype=torch.bool)
        appended[active, torch.arange(len(active))] = True  # each fed token is seen by its own row only
        row_sees = torch.cat([row_sees, appended], dim=1)
        mask = additive_mask(row_sees[active], dtype).to(lm.device)
        feed_pos = (next_pos[active] + step)[None].to(lm.device)
        logits, past = lm.forward(token[None], mask, feed_pos, keep=len(active), use_cache=True, past=past)
        logits = logits[0]
    return new_tokens


def row_generators(seeds: Sequence[int], params: SamplingParams) -> list[torch.Generator] | None:
    """The torch generators of the sample rows of prompts seeded `seeds`, prompt by prompt, repetition by repetition
    (repetition first..first+n-1 in a round of adaptive repetitions); None when greedy."""
    if params.temperature <= 0:
        return None
    first = params.first_repetition
    return [torch.Generator().manual_seed(stream_seed(seed, first + r)) for seed in seeds for r in range(params.n)]


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
    return seed_of(seed, repetition, bits=63)


def pick(logits: torch.Tensor, params: SamplingParams, generators: list[torch.Generator] | None) -> torch.Tensor:
    """Next token per row: argmax when greedy, else a draw with the row's own generator (temperature, top-k, top-p)."""
    logits = logits.float()
    if generators is None:
        return logits.argmax(dim=-1)
    probs = torch.softmax(filtered_logits(logits, params), dim=-1)
    # Exponential race (argmax p/E, E ~ Exp(1)) draws from `probs`, one noise vector per row from the row's generator.
    noise = torch.stack([torch.empty(probs.shape[-1]).exponential_(generator=g) for g in generators]).to(probs.device)
    return (probs / noise).argmax(dim=-1)
