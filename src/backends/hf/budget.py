"""Batches sized by tokens: a budget of token positions per forward pass that survives out-of-memory.

Every pass of the HF backend (padded rows, prefix-tree packs, cloze continuations, generation) takes work from a
queue until the next unit would make the batch hold more than `TokenBudget.tokens` positions (rows x the widest
row, padding included): a padded cloze batch counts each option's row of context + continuation (the continuation
pass holds that KV cache), generation each sample row's prompt and new tokens. A pass that runs out of memory
(`torch.cuda.OutOfMemoryError`, or what accelerate's `should_reduce_batch_size` recognises: the CPU allocator's
RuntimeError, ...) halves the budget in force and runs the same work again in smaller batches: results leave
`run_in_batches` only for batches that finished, so no trial is lost or answered twice. The ceiling (the setting,
or auto's start) drops to the halved budget when the failed pass was larger than any that ran; when it was not
(memory held elsewhere for a while), the budget doubles back towards the ceiling after `GROW_AFTER` passes in a
row that fit. The budget starts at the number `model.max_batch_tokens` gives, or
with `auto` at the largest that the device's free memory is estimated to hold (`start_tokens`, from
`ModelDims`, which reads what every causal LM has and never fails on a missing config field). A backend reused
by the next job of a sweep starts that job from the learned ceiling with its counts at zero (`new_job`); the
backend logs each job's own `batch_tokens` and, where they happened, `batch_token_halvings` and
`batch_token_doublings`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from accelerate.utils.memory import clear_device_cache, should_reduce_batch_size

from src.backends.batch_tokens import AUTO, CPU_BATCH_TOKENS, check_max_batch_tokens
from src.common.errors import UserError

log = logging.getLogger(__name__)

AUTO_MAX_TOKENS = 1 << 17  # auto never starts above this: a pass of 131,072 tokens keeps any GPU busy
AUTO_MIN_TOKENS = 256  # nor below this: a start under it means the estimate, not the device, is wrong
GROW_AFTER = 16  # passes in a row that fit before a halved budget doubles again
_OOM_TYPES = tuple({getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), torch.cuda.OutOfMemoryError})

Unit = TypeVar("Unit")


def is_out_of_memory(err: BaseException) -> bool:
    """Whether `err` is an allocation failure: CUDA's OutOfMemoryError, or a RuntimeError that accelerate's
    `should_reduce_batch_size` recognises ("DefaultCPUAllocator: can't allocate memory", "... out of memory.")."""
    return isinstance(err, _OOM_TYPES) or (isinstance(err, Exception) and should_reduce_batch_size(err))


class TokenBudget:
    """The token positions one forward pass may feed. `setting`: a number (the start and the ceiling), "auto" (start
    at the device's estimate) or None (auto on a GPU, CPU_BATCH_TOKENS on a CPU). Resolved on first use."""

    def __init__(self, setting: int | str | None, *, name: str) -> None:
        self.setting = check_max_batch_tokens(setting)
        self.name = name
        self.tokens: int | None = self.setting if isinstance(self.setting, int) else None
        self.ceiling: int | None = self.tokens  # never grows above this: the start, below any pass that failed
        self.recoveries = 0  # passes that ran out of memory and were run again smaller (this job's)
        self.doublings = 0  # times a run of passes that fit doubled a halved budget (this job's)
        self.fitted = 0  # passes in a row that fit since the last change
        self.largest_ran = 0  # the most tokens a pass has fed without running out of memory

    def resolve(self, device: torch.device, per_token_bytes: Callable[[], int]) -> int:
        """The budget in tokens, deciding it on first use on `device`."""
        if self.tokens is None:
            auto = self.setting == AUTO or (self.setting is None and device.type == "cuda")
            self.tokens = start_tokens(device, per_token_bytes()) if auto else CPU_BATCH_TOKENS
            self.ceiling = self.tokens if self.ceiling is None else min(self.ceiling, self.tokens)
        return self.tokens

    def new_job(self) -> None:
        """A reused backend's next job: it starts from the ceiling learned so far, with its own counts, so its
        logged params say what it did."""
        self.tokens = self.ceiling
        self.recoveries = self.doublings = self.fitted = 0

    def shrink(self, tried: int) -> None:
        """After an out-of-memory pass that fed `tried` tokens: halve the budget in force until it is below `tried`
        (a short batch that fails would fail again at any budget that still holds it), never below one token. A
        pass larger than any that ran shows the budget was too large: the ceiling drops to the new budget. One no
        larger than a pass that ran failed for a passing reason (memory held elsewhere, fragmentation): the
        ceiling stays, and the budget grows back to it after GROW_AFTER passes that fit (`fitted_pass`)."""
        before = self.tokens or tried
        self.tokens = max(1, before // 2)
        while self.tokens >= tried and self.tokens > 1:
            self.tokens //= 2
        if tried > self.largest_ran or self.ceiling is None:
            self.ceiling = self.tokens
        self.recoveries += 1
        self.fitted = 0
        log.warning(
            "model %s: out of memory on a pass of %d tokens; budget %d -> %d tokens per pass, the batch runs again",
            self.name,
            tried,
            before,
            self.tokens,
        )

    def fitted_pass(self, tried: int) -> None:
        """A pass of `tried` tokens ran: after GROW_AFTER in a row, a budget below its ceiling doubles (up to it)."""
        self.largest_ran = max(self.largest_ran, tried)
        self.fitted += 1
        if self.tokens is not None and self.ceiling is not None and self.tokens < self.ceiling:
            if self.fitted >= GROW_AFTER:
                self.tokens, self.fitted = min(2 * self.tokens, self.ceiling), 0
                self.doublings += 1


@dataclass(frozen=True)
class ModelDims:
    """The sizes the memory estimate reads, from any causal LM: the config's fields under their many names
    (GPT-2's n_embd, OPT's ffn_dim, Falcon's num_kv_heads, a multimodal config's text_config), and where a config
    lacks one, what the model itself shows (its embedding's shape, its parameter count)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @classmethod
    def of(cls, config: Any, model: Any = None) -> ModelDims:
        """The dims of `config` (its text part), filled in from `model` or by rule where a field is missing."""
        text = config.get_text_config() if callable(getattr(config, "get_text_config", None)) else config
        embedding = _embedding_shape(model)
        vocab = _field(text, "vocab_size", "n_vocab") or embedding[0] or 32_000
        hidden = _field(text, "hidden_size", "n_embd", "d_model", "dim", "model_dim") or embedding[1] or 4096
        heads = _field(text, "num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads")
        heads = heads or max(1, hidden // 128)
        layers = _field(text, "num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers")
        if not layers:  # a transformer block holds ~12 x hidden^2 parameters
            params = sum(p.numel() for p in model.parameters()) if model is not None else 0
            layers = max(1, round((params - vocab * hidden) / (12 * hidden * hidden))) if params else 32
        kv_heads = _field(text, "num_key_value_heads", "num_kv_heads", "multi_query_group_num", "n_head_kv")
        if not kv_heads:
            kv_heads = 1 if getattr(text, "multi_query", False) else heads
        head_dim = _field(text, "head_dim", "kv_channels") or max(1, hidden // heads)
        intermediate = _field(text, "intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size", "d_ff") or 4 * hidden
        return cls(layers, hidden, heads, kv_heads, head_dim, intermediate, vocab)


def _field(config: Any, *names: str) -> int | None:
    """The first of `names` that `config` sets to a positive number, or None."""
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _embedding_shape(model: Any) -> tuple[int | None, int | None]:
    """(vocabulary, hidden size) from the model's input embedding, (None, None) without a model."""
    try:
        return tuple(model.get_input_embeddings().weight.shape)
    except (AttributeError, TypeError, ValueError):
        return None, None


def kv_bytes_per_token(config: Any, dtype: torch.dtype, model: Any = None) -> int:
    """Bytes of KV cache per token fed: layers x (key + value) x kv heads x head dim x dtype bytes (SmolLM2-135M
    in float32: 30 x 2 x 3 x 64 x 4 = 46,080 bytes, 45 KiB)."""
    dims = ModelDims.of(config, model)
    return dims.layers * 2 * dims.kv_heads * dims.head_dim * torch.empty((), dtype=dtype).element_size()


def activation_bytes_per_token(config: Any, dtype: torch.dtype, model: Any = None) -> int:
    """One layer's activations per token: hidden states and the MLP's intermediate ones."""
    dims = ModelDims.of(config, model)
    return (4 * dims.hidden + 3 * dims.intermediate) * torch.empty((), dtype=dtype).element_size()


def pass_bytes_per_token(config: Any, dtype: torch.dtype, model: Any = None) -> int:
    """The memory one token of a pass holds, by the estimate: its KV cache, one layer's activations and one
    float32 row of logits (continuation scoring keeps one per token)."""
    vocab = ModelDims.of(config, model).vocab
    return kv_bytes_per_token(config, dtype, model) + activation_bytes_per_token(config, dtype, model) + 4 * vocab


def tokens_for_memory(config: Any, dtype: torch.dtype, memory_gb: float, model: Any = None) -> int:
    """The most tokens one packed pass may hold within `memory_gb` GiB beside the weights, by the estimate
    n x (KV bytes per token + one layer's activations per token) + n^2 x (attention scores and probabilities
    per head, the mask, the tree's boolean matrix): the KV cache grows with the tokens, one layer's attention
    with their square."""
    size = torch.empty((), dtype=dtype).element_size()
    per_token = kv_bytes_per_token(config, dtype, model) + activation_bytes_per_token(config, dtype, model)
    per_pair = 2 * ModelDims.of(config, model).heads * size + size + 1
    budget = memory_gb * 2**30
    n = (-per_token + (per_token**2 + 4 * per_pair * budget) ** 0.5) / (2 * per_pair)
    return max(1, int(n))


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


CHUNK_MAX_PROMPTS = 8192  # the unit the response cache saves: a run killed outright loses at most the two in flight


def chunk_prompts(default: int, *, tokens: int | None, fed_per_prompt: float, on_gpu: bool) -> int:
    """Prompts per chunk of the answering loop (src/answering/trials.py), which caps what one pass can hold: on a
    CPU `default` (64: one 1,024-token pack per pass was measured fastest there, docs/speed.md), on a GPU as many
    prompts as one pass of the budget holds at the tokens each prompt has fed so far (packing shares prefixes, so
    fewer than its length), at least `default` and at most CHUNK_MAX_PROMPTS.

    >>> chunk_prompts(64, tokens=131072, fed_per_prompt=40.0, on_gpu=True), chunk_prompts(64, tokens=131072,
    ...     fed_per_prompt=40.0, on_gpu=False)
    (3276, 64)
    """
    if not on_gpu or tokens is None or fed_per_prompt <= 0:
        return default
    return max(default, min(CHUNK_MAX_PROMPTS, int(tokens / fed_per_prompt)))


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
            budget.fitted_pass(tried)
            yield batch, result
            continue
        clear_device_cache(garbage_collection=True)
        budget.shrink(tried)
        if repack is not None:
            queue = repack(queue, budget.tokens)
        if n == 1 and rows(queue[0]) * width(queue[0]) >= tried:
            raise UserError(
                f"model {budget.name}: out of memory on one pass of {tried} tokens that cannot be split "
                f"(one prompt with its rows); run it on a device with more free memory, or spread the "
                f"model over several GPUs (model.device_map=auto)"
            )
