"""Prefix-tree packing: prompts that share a prefix computed once, in one sequence with a tree attention mask.

The variants of one question share the chat header, the instruction and the question text. Packed, they are
laid out as one token sequence in which each shared token appears once, with a tree attention mask (a token
sees exactly its own prompt's earlier tokens) and each token's position in its own prompt. One pass gives
every prompt's logits, as a padded batch would, for the shared tokens' cost once. A model can be packed
when it honours a custom 4D attention mask (`packing_refusal` says when it cannot).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from src.backends.hf.forward import LoadedModel
from src.backends.hf.transformers_adapter import attention_implementation
from src.backends.hf.tree_attention import TREE_SDPA


@dataclass(frozen=True)
class PrefixPack:
    """Prompts laid out as one prefix tree: each distinct prefix token once, in an order where parents come first."""

    tokens: list[int]  # token id per tree node
    parents: list[int]  # parent node per node (-1: the node starts a prompt)
    positions: list[int]  # position of the node's token in its prompt(s)
    members: list[int]  # request indices packed here
    last: list[int]  # per member, the node of its prompt's last token
    nodes: list[list[int]] = field(default_factory=list)  # per member, the node of each of its tokens


def pack_prefix_trees(seqs: Sequence[Sequence[int]], *, budget: int, reserve: int = 0) -> list[PrefixPack]:
    """Prompts (token id lists) packed into prefix trees of at most `budget` nodes (a longer prompt gets a pack of
    its own). Sorted token sequences put the prompts that share prefixes side by side, and a sorted sequence's
    longest common prefix with any earlier one is its common prefix with the one just before. `reserve`: nodes
    each prompt will add after its own (generation appends its samples' tokens to the pack), counted in `budget`.

    >>> packs = pack_prefix_trees([[1, 2, 3], [1, 2, 4], [5]], budget=8)
    >>> [(p.tokens, p.parents, p.positions, p.members, p.last) for p in packs]
    [([1, 2, 3, 4, 5], [-1, 0, 1, 1, -1], [0, 1, 2, 2, 0], [0, 1, 2], [2, 3, 4])]
    """
    order = sorted((i for i in range(len(seqs)) if len(seqs[i]) > 0), key=lambda i: list(seqs[i]))
    if len(order) < len(seqs):
        raise ValueError("cannot score an empty prompt")
    packs: list[PrefixPack] = []
    pack: PrefixPack | None = None
    path: list[int] = []  # nodes of the previous prompt in the current pack
    previous: Sequence[int] = ()
    for i in order:
        seq = seqs[i]
        shared = 0
        if pack is not None:
            limit = min(len(seq), len(previous))
            while shared < limit and seq[shared] == previous[shared]:
                shared += 1
        if pack is None or len(pack.tokens) + len(seq) - shared + reserve * (len(pack.members) + 1) > budget:
            pack, path, shared = PrefixPack([], [], [], [], [], []), [], 0
            packs.append(pack)
        path = path[:shared]
        for position in range(shared, len(seq)):
            pack.tokens.append(seq[position])
            pack.parents.append(path[-1] if path else -1)
            pack.positions.append(position)
            path.append(len(pack.tokens) - 1)
        pack.members.append(i)
        pack.last.append(path[len(seq) - 1])
        pack.nodes.append(list(path))
        previous = seq
    return packs


def tree_sees(parents: Sequence[int]) -> torch.Tensor:
    """The (n, n) boolean matrix in which node i sees itself and its ancestors, nothing else.

    >>> tree_sees([-1, 0, 0]).int().tolist()
    [[1, 0, 0], [1, 1, 0], [1, 0, 1]]
    """
    n = len(parents)
    sees = torch.zeros((n, n), dtype=torch.bool)
    for i, parent in enumerate(parents):  # parents come first: a row is its parent's row plus itself
        if parent >= 0:
            sees[i] = sees[parent]
        sees[i, i] = True
    return sees


def additive_mask(sees: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive (1, 1, queries, keys) attention mask of a boolean (queries, keys) `sees` matrix."""
    return torch.zeros((1, 1, *sees.shape), dtype=dtype).masked_fill_(~sees[None, None], torch.finfo(dtype).min)


def packs_forward(
    lm: LoadedModel, packs: Sequence[PrefixPack], keeps: Sequence[Sequence[int] | None]
) -> list[torch.Tensor]:
    """Per pack, the logits at its nodes `keeps[k]` (None: each member's last token), from one pass over the packs
    as rows of a batch: right-padded to the longest, each row with its own tree mask (a padding node sees only
    itself, and nothing sees it)."""
    dtype = lm.model.get_input_embeddings().weight.dtype
    node_lists = [pack.last if keep is None else list(keep) for pack, keep in zip(packs, keeps)]
    if len(packs) == 1:  # one sequence: the nodes asked for, in their order
        pack, keep = packs[0], node_lists[0]
        ids = torch.tensor([pack.tokens], dtype=torch.long, device=lm.device)
        positions = torch.tensor([pack.positions], dtype=torch.long, device=lm.device)
        index = torch.tensor(keep, dtype=torch.long, device=lm.device)
        sees = tree_sees(pack.parents)[None]
        mask = additive_mask(sees[0], dtype).to(lm.device)
        return [lm.forward(ids, mask, positions, keep=index, sees=sees)[0][0]]
    width = max(len(pack.tokens) for pack in packs)
    ids = torch.full((len(packs), width), lm.pad_id, dtype=torch.long)
    positions = torch.zeros((len(packs), width), dtype=torch.long)
    sees = torch.eye(width, dtype=torch.bool).repeat(len(packs), 1, 1)
    for row, pack in enumerate(packs):
        n = len(pack.tokens)
        ids[row, :n] = torch.tensor(pack.tokens, dtype=torch.long)
        positions[row, :n] = torch.tensor(pack.positions, dtype=torch.long)
        sees[row, :n, :n] = tree_sees(pack.parents)
    mask = torch.zeros((len(packs), 1, width, width), dtype=dtype).masked_fill_(~sees[:, None], torch.finfo(dtype).min)
    rows = torch.tensor([row for row, keep in enumerate(node_lists) for _ in keep], dtype=torch.long, device=lm.device)
    nodes = torch.tensor([node for keep in node_lists for node in keep], dtype=torch.long, device=lm.device)
    logits = lm.forward_at(ids.to(lm.device), mask.to(lm.device), positions.to(lm.device), rows, nodes, sees)
    return list(torch.split(logits, [len(keep) for keep in node_lists]))


def repacked(
    packs: Sequence[PrefixPack], seqs: Sequence[Sequence[int]], *, budget: int, reserve: int = 0
) -> list[PrefixPack]:
    """The members of `packs` (indices into `seqs`) packed again into prefix trees of at most `budget` nodes."""
    members = [m for pack in packs for m in pack.members]
    out = pack_prefix_trees([seqs[m] for m in members], budget=budget, reserve=reserve)
    return [PrefixPack(p.tokens, p.parents, p.positions, [members[k] for k in p.members], p.last, p.nodes) for p in out]


def pack_batches(
    lm: LoadedModel,
    seqs: list[list[int]],
    pack_tokens: int,
    run: Callable[[list[PrefixPack]], Any],
    what: str,
    unit: str,
    *,
    reserve: int = 0,
    max_units: int | None = None,
) -> Iterator[tuple[list[PrefixPack], Any]]:
    """(packs, run(packs)) over `seqs` packed into prefix trees of at most `pack_tokens` nodes (and the budget),
    as many packs per pass as the token budget holds; smaller packs after an out-of-memory pass."""
    packs = pack_prefix_trees(seqs, budget=min(pack_tokens, lm.batch_tokens()), reserve=reserve)
    return lm.in_batches(
        packs,
        run,
        what=what,
        unit=unit,
        counts=lambda p: len(p.members),
        max_units=max_units,
        width=lambda p: len(p.tokens) + reserve * len(p.members),
        repack=lambda queue, tokens: repacked(queue, seqs, budget=min(pack_tokens, tokens), reserve=reserve),
    )


def packing_refusal(config: Any, longest: int) -> str | None:
    """Why a model with this config cannot be packed, or None: flash attention ignores custom masks, and a
    sliding window shorter than the prompts would need a mask of its own."""
    attention = attention_implementation(config)
    if attention not in ("sdpa", "eager", TREE_SDPA):
        return f"attention implementation {attention} ignores custom masks"
    window = getattr(config, "sliding_window", None)
    if window and longest > window:
        return f"prompts are longer than the sliding window ({window})"
    return None
