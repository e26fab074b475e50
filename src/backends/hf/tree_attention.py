"""Attention over a packed pass in blocks of queries, each against only the keys its queries see.

A prefix-tree pack (`packing`) is one sequence in which a token sees its own prompt's earlier tokens only: the
trunk its prompt shares with others and its own branch, a small part of the pack. SDPA given that mask computes
every (query, key) pair of the pack all the same (the fused CPU kernel skips no masked block), so a packed token
paid attention over the whole pack (~1,024 keys) where a padded token pays over its own prompt: the main reason a
packed token cost 1.2-1.5x a padded one.

Here a packed pass's queries are cut into blocks, and each block attends to the keys that any of its queries sees
(gathered, in order) under its part of the same mask. Each query's softmax is the one SDPA computes over the whole
pack, since a masked key weighs exp(-inf) = 0 either way, now over the pairs that matter. Each block is a call of
its own with a fixed cost, so the blocks are chosen per pass (`query_blocks`): whole grains of 16 queries, cut
where the pairs saved outweigh the calls added.

It is an attention function registered with transformers' `AttentionInterface` under `TREE_SDPA`, which calls
transformers' own `sdpa_attention_forward` per block (scaling, grouped KV heads and dropout as SDPA does them), and
the whole pass unchanged whenever no layout is active or the mask is not the one the layout was made for. It is
switched on for models that run SDPA on a CPU (`enable`); on a GPU the pass stays one SDPA call (a call's fixed
cost there is worth far more pairs than a 1,024-token pack saves, unmeasured: docs/speed.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch

from src.backends.hf.budget import ModelDims

# transformers' SDPA attention function, which each block calls (4.48+; before it no model takes an attention
# function, and `enable` says no)
sdpa_attention_forward: Callable[..., tuple[torch.Tensor, None]] | None
try:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward as _transformers_sdpa

    sdpa_attention_forward = _transformers_sdpa
except ImportError:  # pragma: no cover - the supported transformers have it
    sdpa_attention_forward = None

TREE_SDPA = "mcq_tree_sdpa"
GRAIN = 16  # queries per grain: blocks are whole grains
# What one more call costs on a CPU, in FLOPs of attention (4 x hidden per pair): ~90 us of fixed cost against
# ~13 ns per pair at hidden 576 on 2 cores (SmolLM2; lscpu's "Intel(R) Xeon(R) Processor", AVX-512 and AMX, 2026-11-27).
CALL_COST_FLOPS = 16e6


@dataclass(frozen=True)
class BlockLayout:
    """The query blocks of one pass: (start, end) per block, the key positions it attends to and its part of the
    additive mask, for the mask tensor `mask` (the layout applies only to a pass given that very tensor)."""

    mask: torch.Tensor
    spans: list[tuple[int, int]]
    keys: list[torch.Tensor]
    masks: list[torch.Tensor]

    @property
    def pairs(self) -> int:
        """(query, key) pairs each layer computes (every head computes each), over all rows."""
        rows = self.mask.shape[0]
        return sum(rows * (end - start) * len(keys) for (start, end), keys in zip(self.spans, self.keys))


_ACTIVE: ContextVar[BlockLayout | None] = ContextVar("tree_attention_layout", default=None)


def query_blocks(sees: torch.Tensor, call_cost: float, grain: int = GRAIN) -> list[tuple[int, int, torch.Tensor]]:
    """(start, end, keys) per block of queries of a (rows, n, n) boolean `sees` (query sees key): blocks of whole
    `grain`s that minimise the pairs computed (rows x queries x keys, over all blocks) plus `call_cost` pairs per
    block; a block's keys are the positions that any of its queries sees in any row, sorted.

    >>> sees = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)[None]
    >>> [(a, b, k.tolist()) for a, b, k in query_blocks(sees, call_cost=0, grain=2)]
    [(0, 2, [0, 1]), (2, 4, [2, 3])]
    >>> [(a, b, k.tolist()) for a, b, k in query_blocks(sees, call_cost=100, grain=2)]
    [(0, 4, [0, 1, 2, 3])]
    """
    rows, n = sees.shape[0], sees.shape[1]
    seen = sees.any(0)
    grains = -(-n // grain)
    per_grain = torch.stack([seen[g * grain : (g + 1) * grain].any(0) for g in range(grains)])  # (grains, n)
    # keys[i][j - i - 1]: how many keys grains i..j-1 see together
    keys = [((per_grain[i:].int().cumsum(0) > 0).sum(1)).tolist() for i in range(grains)]
    best, cut = [0.0] + [math.inf] * grains, [0] * (grains + 1)
    for j in range(1, grains + 1):
        end = min(n, j * grain)
        for i in range(j):
            cost = best[i] + call_cost + rows * (end - i * grain) * keys[i][j - i - 1]
            if cost < best[j]:
                best[j], cut[j] = cost, i
    bounds, j = [], grains
    while j > 0:
        bounds.append((cut[j], j))
        j = cut[j]
    return [
        (i * grain, min(n, j * grain), seen[i * grain : j * grain].any(0).nonzero().flatten())
        for i, j in reversed(bounds)
    ]


def block_layout(sees: torch.Tensor, mask: torch.Tensor, call_cost: float) -> BlockLayout | None:
    """The layout of a pass whose additive (rows, 1, n, n) `mask` is made of `sees`, or None where one block over
    the whole pass is best."""
    blocks = query_blocks(sees, call_cost)
    if len(blocks) == 1:
        return None
    keys = [k.to(mask.device) for _, _, k in blocks]
    masks = [mask[:, :, a:b].index_select(3, k).contiguous() for (a, b, _), k in zip(blocks, keys)]
    return BlockLayout(mask, [(a, b) for a, b, _ in blocks], keys, masks)


def call_cost_pairs(config: Any, model: Any = None) -> float:
    """`CALL_COST_FLOPS` in (query, key) pairs of this model's attention (4 x hidden FLOPs each)."""
    return CALL_COST_FLOPS / (4 * ModelDims.of(config, model).hidden)


@contextmanager
def blocked(layout: BlockLayout | None) -> Iterator[None]:
    """Passes run inside attend in `layout`'s blocks (None: as one call)."""
    token = _ACTIVE.set(layout)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def tree_sdpa(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    *args: Any,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, per block of the active layout when this call's mask is the layout's."""
    layout = _ACTIVE.get()
    assert sdpa_attention_forward is not None  # `enable` registers this function only where it is there
    if layout is None or attention_mask is not layout.mask or query.shape[2] != key.shape[2]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, *args, **kwargs)
    outputs = [
        sdpa_attention_forward(
            module, query[:, :, a:b], key.index_select(2, k), value.index_select(2, k), m, *args, **kwargs
        )[0]
        for (a, b), k, m in zip(layout.spans, layout.keys, layout.masks)
    ]
    return torch.cat(outputs, dim=1), None  # (batch, queries, heads, head dim), as SDPA's


def enable(model: Any) -> bool:
    """Run `model`'s attention through `tree_sdpa` where it runs SDPA on a CPU and its transformers lets an
    attention function be set (AttentionInterface, transformers 4.48+; `set_attn_implementation`); whether it does."""
    from src.backends.hf.transformers_adapter import attention_implementation  # local: checks transformers' version

    if attention_implementation(model.config) != "sdpa" or model.get_input_embeddings().weight.device.type != "cpu":
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:
        return False
    if sdpa_attention_forward is None or not callable(getattr(model, "set_attn_implementation", None)):
        return False
    AttentionInterface.register(TREE_SDPA, tree_sdpa)
    AttentionMaskInterface.register(TREE_SDPA, sdpa_mask)
    model.set_attn_implementation(TREE_SDPA)
    return attention_implementation(model.config) == TREE_SDPA
