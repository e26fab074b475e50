"""Batches sized by tokens: a budget of token positions per forward pass that survives out-of-memory.

Every pass of the HF backend (padded rows, prefix-tree packs, generation) takes work from a queue until the next
unit would make the batch feed more than `TokenBudget.tokens` positions (rows x the widest row, padding
included; generation counts each sample row's prompt and new tokens). A pass that runs out of memory
(`torch.cuda.OutOfMemoryError`, or the CPU allocator's RuntimeError) halves the budget and runs the same work
again in smaller batches: results leave `run_in_batches` only for batches that finished, so no trial is lost or
answered twice. The budget starts at the number `model.max_batch_tokens` gives, or with `auto` at the largest
that the device's free memory is estimated to hold (`start_tokens`), and it keeps what it found for the
rest of the job; the backend logs it as the param `batch_tokens`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import torch

from src.backends.batch_tokens import AUTO, CPU_BATCH_TOKENS, check_max_batch_tokens
from src.common.errors import UserError

log = logging.getLogger(__name__)

AUTO_MAX_TOKENS = 1 << 17  # auto never starts above this: a pass of 131,072 tokens keeps any GPU busy
AUTO_MIN_TOKENS = 256  # nor below this: a start under it means the estimate, not the device, is wrong
_OOM_TYPES = tuple({getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), torch.cuda.OutOfMemoryError})

Unit = TypeVar("Unit")


def is_out_of_memory(err: BaseException) -> bool:
    """Whether `err` is an allocation failure: CUDA's OutOfMemoryError, or the CPU allocator's RuntimeError
    ("DefaultCPUAllocator: can't allocate memory", "... out of memory")."""
    if isinstance(err, _OOM_TYPES):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and ("out of memory" in text.lower() or "DefaultCPUAllocator" in text)


class TokenBudget:
    """The token positions one forward pass may feed. `setting`: a number (the start and the ceiling), "auto" (start
    at the device's estimate) or None (auto on a GPU, CPU_BATCH_TOKENS on a CPU). Resolved on first use."""

    def __init__(self, setting: int | str | None, *, name: str) -> None:
        self.setting = check_max_batch_tokens(setting)
        self.name = name
        self.tokens: int | None = self.setting if isinstance(self.setting, int) else None
        self.recoveries = 0  # passes that ran out of memory and were run again smaller

    def resolve(self, device: torch.device, per_token_bytes: Callable[[], int]) -> int:
        """The budget in tokens, deciding it on first use on `device`."""
        if self.tokens is None:
            auto = self.setting == AUTO or (self.setting is None and device.type == "cuda")
            self.tokens = start_tokens(device, per_token_bytes()) if auto else CPU_BATCH_TOKENS
        return self.tokens

    def shrink(self, tried: int) -> None:
        """After an out-of-memory pass that fed `tried` tokens: half the budget (or of `tried`, when a short batch
        at the queue's end failed), never below one token."""
        before = self.tokens or tried
        self.tokens = max(1, min(before, tried) // 2)
        self.recoveries += 1
        log.warning(
            "model %s: out of memory on a pass of %d tokens; budget %d -> %d tokens per pass, the batch runs again",
            self.name,
            tried,
            before,
            self.tokens,
        )


def kv_bytes_per_token(config: Any, dtype: torch.dtype) -> int:
    """Bytes of KV cache per token fed: layers x (key + value) x kv heads x head dim x dtype bytes (SmolLM2-135M
    in float32: 30 x 2 x 3 x 64 x 4 = 46,080 bytes, 45 KiB)."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return config.num_hidden_layers * 2 * kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


def pass_bytes_per_token(config: Any, dtype: torch.dtype) -> int:
    """The memory one token of a pass holds, by the estimate: its KV cache, one layer's activations (hidden states
    and the MLP's intermediate ones) and one float32 row of logits (continuation scoring keeps one per token)."""
    size = torch.empty((), dtype=dtype).element_size()
    activations = (4 * config.hidden_size + 3 * config.intermediate_size) * size
    return kv_bytes_per_token(config, dtype) + activations + 4 * config.vocab_size


def start_tokens(device: torch.device, per_token: int) -> int:
    """auto's first budget: 90% of the device's free memory over the bytes one token of a pass holds, down to a
    power of two, within [AUTO_MIN_TOKENS, AUTO_MAX_TOKENS]. An overestimate costs one failed pass per halving."""
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    estimate = int(0.9 * free / max(1, per_token))
    power = 1 << max(0, estimate.bit_length() - 1)
    return max(AUTO_MIN_TOKENS, min(AUTO_MAX_TOKENS, power))


def fit(
    queue: Sequence[Unit], tokens: int, width: Callable[[Unit], int], rows: Callable[[Unit], int], max_units: int | None
) -> int:
    """How many units from the queue's head one pass takes: as many as keep (their rows) x (the widest) within
    `tokens`, at least one.

    >>> fit([5, 4, 4, 2], 12, width=lambda n: n, rows=lambda n: 1, max_units=None)
    2
    """
    n, total_rows, widest = 1, rows(queue[0]), width(queue[0])
    while n < len(queue) and (max_units is None or n < max_units):
        wider, more = max(widest, width(queue[n])), total_rows + rows(queue[n])
        if more * wider > tokens:
            break
        n, total_rows, widest = n + 1, more, wider
    return n


def run_in_batches(
    budget: TokenBudget,
    queue: list[Unit],
    run: Callable[[list[Unit]], Any],
    *,
    width: Callable[[Unit], int],
    rows: Callable[[Unit], int] = lambda unit: 1,
    max_units: int | None = None,
    repack: Callable[[list[Unit], int], list[Unit]] | None = None,
) -> Iterator[tuple[list[Unit], Any]]:
    """(batch, run(batch)) for the queue's units, in order, each batch within the budget. A batch that runs out of
    memory is dropped and its units taken again under the halved budget (`repack(pending, tokens)` rebuilds the
    pending units for it, e.g. smaller prefix-tree packs); one unit that still does not fit stops the job in one
    line."""
    assert budget.tokens is not None, "resolve the budget first"
    while queue:
        n = fit(queue, budget.tokens, width, rows, max_units)
        batch = queue[:n]
        tried = sum(rows(u) for u in batch) * max(width(u) for u in batch)
        failed = False
        try:
            result = run(batch)
        except RuntimeError as err:
            if not is_out_of_memory(err):
                raise
            failed = True  # handled below, outside the except block, so the failed pass's tensors are freed
        if not failed:
            queue = queue[n:]
            yield batch, result
            continue
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        budget.shrink(tried)
        if repack is not None:
            queue = repack(queue, budget.tokens)
        if n == 1 and rows(queue[0]) * width(queue[0]) >= tried:
            raise UserError(
                f"model {budget.name}: out of memory on one pass of {tried} tokens that cannot be split "
                f"(one prompt with its rows); run it on a device with more free memory, or spread the "
                f"model over several GPUs (model.device_map=auto)"
            )
