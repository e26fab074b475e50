"""Scores from a model's logits: label probabilities at the next position, and log-likelihoods of continuations.

- Labels: the next token's probability over each label's first tokens ("A", " A"); with sampling settings also
  the exact first-token sampling distribution (labels + INVALID) under the filter `generate` samples with.
  Where one first token cannot tell the labels apart (labels 1 and 10), each label is scored by the
  probability of its whole spellings instead (`spelled_label_scores`).
- Continuations (option texts, label spellings): the sum of their tokens' log-probabilities after the prompt,
  lm-eval style, with the prompt fed once for all of its continuations: as one prefix tree (packed) or as a
  KV cache copied to each continuation (padded batches).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch

from src.backends.base import LabelScores, SamplingParams
from src.backends.hf.forward import LoadedModel, positions
from src.backends.hf.packing import PrefixPack, pack_batches, packs_forward
from src.backends.hf.sampling import filtered_logits
from src.backends.logprobs import renormalised, with_invalid


def label_scores(logits: torch.Tensor, token_ids: list[torch.Tensor], sampling: SamplingParams | None) -> LabelScores:
    """LabelScores from one position's logits, each label counting its first tokens `token_ids`: probabilities at
    temperature 1 and, with `sampling`, the first sampled token's distribution over labels + INVALID."""
    probs = torch.softmax(logits.float(), dim=-1).double().cpu()
    per_label = [float(probs[ids].sum()) for ids in token_ids]
    mass = sum(per_label)
    dist = None
    if sampling is not None:
        if sampling.temperature <= 0:  # greedy: the argmax token decides
            top = int(logits.float().argmax())
            picked = [float(bool((ids == top).any())) for ids in token_ids]
        else:
            tempered = torch.softmax(filtered_logits(logits[None].float(), sampling)[0], dim=-1).double().cpu()
            picked = [float(tempered[ids].sum()) for ids in token_ids]
        dist = with_invalid(picked)
    return LabelScores(probs=renormalised(per_label, mass), mass=min(mass, 1.0), answer_dist=dist)


def spelled_label_scores(spellings: list[list[tuple[int, ...]]], logliks: Sequence[float]) -> LabelScores:
    """Label probabilities as the probability of each label's whole string: P(spelling) summed over its
    spellings, less the probability of the other labels that continue it ("1" then "0" is label 10, not 1).
    `logliks`: the log-likelihood of every spelling, in the order of `spellings` flattened."""
    prob = dict(zip((seq for label_seqs in spellings for seq in label_seqs), (math.exp(x) for x in logliks)))
    per_label = []
    for k, label_seqs in enumerate(spellings):
        others = [seq for j, seqs in enumerate(spellings) if j != k for seq in seqs]
        total = 0.0
        for seq in label_seqs:
            longer = sum(prob[o] for o in others if len(o) > len(seq) and o[: len(seq)] == seq)
            total += max(0.0, prob[seq] - longer)
        per_label.append(total)
    mass = sum(per_label)
    return LabelScores(probs=renormalised(per_label, mass), mass=min(mass, 1.0))


def padded_last_logits(
    lm: LoadedModel, encoded: list[list[int]], batch_size: int | None, what: str
) -> Iterator[tuple[list[int], torch.Tensor]]:
    """(request indices, their last-position logits), batch by batch of left-padded rows (at most `batch_size`
    rows, and the token budget)."""

    def run(batch: list[int]) -> torch.Tensor:
        ids, mask = lm.left_pad([encoded[i] for i in batch])
        return lm.forward(ids, mask, positions(mask), keep=1)[0][:, -1]

    return lm.prompt_batches([len(e) for e in encoded], batch_size, run, what)


def packed_last_logits(
    lm: LoadedModel, encoded: list[list[int]], pack_tokens: int, what: str
) -> Iterator[tuple[list[int], torch.Tensor]]:
    """(request indices, their last-position logits), pass by pass of prefix trees of at most `pack_tokens` tokens."""
    batches = pack_batches(
        lm, encoded, pack_tokens, lambda packs: packs_forward(lm, packs, [None] * len(packs)), what, "prompt"
    )
    for packs, logits in batches:
        for pack, rows in zip(packs, logits):
            yield pack.members, rows


def packed_continuation_logliks(
    lm: LoadedModel, contexts: list[list[int]], continuations: list[list[list[int]]], pack_tokens: int, what: str
) -> list[list[float]]:
    """Per context, the log-likelihood of each of its continuations (token id lists): every (context +
    continuation) sequence as a branch of a prefix tree; one pass per batch of packs gives the logits at each node
    that predicts a continuation token (its parent in its own sequence)."""
    seqs, owner = [], []
    for i, (context, conts) in enumerate(zip(contexts, continuations)):
        for j, cont in enumerate(conts):
            seqs.append(context + cont)
            owner.append((i, j))

    def targets_of(pack: PrefixPack) -> tuple[list[int], list[tuple[int, int, int]]]:
        """(nodes whose logits are kept, (member, row in the kept logits, token id) per continuation token)."""
        wanted: dict[int, int] = {}  # predicting node -> row in the kept logits
        targets = []
        for member, nodes in zip(pack.members, pack.nodes):
            for position in range(len(contexts[owner[member][0]]), len(seqs[member])):
                node = nodes[position - 1]
                targets.append((member, wanted.setdefault(node, len(wanted)), seqs[member][position]))
        return list(wanted), targets

    def run(packs: list[PrefixPack]) -> list[tuple[int, float]]:
        """(member, log-probability) of every continuation token of the packs."""
        laid_out = [targets_of(pack) for pack in packs]
        scored = [k for k, (_, targets) in enumerate(laid_out) if targets]
        if not scored:
            return []
        logits = packs_forward(lm, [packs[k] for k in scored], [laid_out[k][0] for k in scored])
        picked: list[tuple[int, float]] = []  # (member, log-probability)
        for k, rows in zip(scored, logits):
            targets = laid_out[k][1]
            logprobs = torch.log_softmax(rows.float(), dim=-1)
            index = torch.tensor([row for _, row, _ in targets], device=lm.device)
            tokens = torch.tensor([token for _, _, token in targets], device=lm.device)
            picked += zip((member for member, _, _ in targets), logprobs[index, tokens].double().cpu().tolist())
        return picked

    out = [[0.0] * len(conts) for conts in continuations]
    for _, picked in pack_batches(lm, seqs, pack_tokens, run, what, "continuation"):
        for member, value in picked:
            i, j = owner[member]
            out[i][j] += value
    return out


def padded_continuation_logliks(
    lm: LoadedModel, contexts: list[list[int]], continuations: list[list[list[int]]], batch_size: int | None, what: str
) -> list[list[float]]:
    """Per context, the log-likelihood of each of its continuations: left-padded batches of contexts, each
    context's KV cache shared by its continuations (the budget counts the continuations' rows)."""

    def run(batch: list[int]) -> list[list[float]]:
        ids, mask = lm.left_pad([contexts[i] for i in batch])
        pos = positions(mask)
        logits, past = lm.forward(ids, mask, pos, keep=1, use_cache=True)
        first = torch.log_softmax(logits[:, -1].float(), dim=-1)  # predicts each continuation's first token
        owner = [b for b, i in enumerate(batch) for _ in continuations[i]]
        conts = [c for i in batch for c in continuations[i]]
        loglik = torch.zeros(len(conts), dtype=torch.float64)
        for row, (b, cont) in enumerate(zip(owner, conts)):
            if cont:
                loglik[row] += float(first[b, cont[0]])
        longest = max((len(c) - 1 for c in conts), default=0)
        if longest > 0:
            # The rest of each continuation after the shared prompt cache, right-padded: padding at the end
            # is never attended to by the real tokens before it.
            expand = torch.tensor(owner, device=lm.device)
            past.reorder_cache(expand)
            feed = torch.full((len(conts), longest), lm.pad_id, dtype=torch.long)
            targets = torch.zeros((len(conts), longest), dtype=torch.long)
            valid = torch.zeros((len(conts), longest), dtype=torch.bool)
            for row, cont in enumerate(conts):
                if len(cont) > 1:
                    feed[row, : len(cont) - 1] = torch.tensor(cont[:-1], dtype=torch.long)
                    targets[row, : len(cont) - 1] = torch.tensor(cont[1:], dtype=torch.long)
                    valid[row, : len(cont) - 1] = True
            feed, targets, valid = feed.to(lm.device), targets.to(lm.device), valid.to(lm.device)
            full_mask = torch.cat([mask[expand], valid.long()], dim=1)
            cont_pos = pos[expand, -1:] + 1 + torch.arange(longest, device=lm.device)
            logits = lm.forward(feed, full_mask, cont_pos, keep=longest, use_cache=True, past=past)[0].float()
            token_lp = logits.gather(-1, targets[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)
            loglik += (token_lp * valid).sum(dim=1).double().cpu()
        out, start = [], 0
        for i in batch:
            out.append([float(x) for x in loglik[start : start + len(continuations[i])]])
            start += len(continuations[i])
        return out

    # The continuation pass holds every option's row of KV cache (context + continuation): the budget counts those
    # rows, which bound the contexts' pass too.
    widths = [len(c) + max((len(x) for x in conts), default=0) for c, conts in zip(contexts, continuations)]
    results: list[list[float]] = [[] for _ in contexts]
    batches = lm.prompt_batches(widths, batch_size, run, what, rows=lambda i: max(1, len(continuations[i])))
    for batch, logliks in batches:
        for i, values in zip(batch, logliks):
            results[i] = values
    return results
