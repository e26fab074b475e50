"""Forward passes of a loaded causal LM, for scoring and generation alike.

Work is cut into passes of at most a token budget each (`budget`: `model.max_batch_tokens`, halved on
out-of-memory with the pass run again). Prompts are batched by length with LEFT padding, so that the last column of
every row is the prompt's last token; explicit position ids make a padded row compute what it would alone. A pass
returns only the logits asked for (`logits_to_keep` where the model takes it), and `LoadedModel` counts the token
positions fed (padding included), which the bench reads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from src.backends.hf import tree_attention
from src.backends.hf.budget import TokenBudget, pass_bytes_per_token, run_in_batches
from src.common.progress import step_bar


class LoadedModel:
    """A loaded model and tokenizer's special ids, run in left-padded batches or on one packed sequence."""

    def __init__(
        self, model: Any, tokenizer: Any, *, name: str, progress: bool, budget: TokenBudget | None = None
    ) -> None:
        self.model = model
        self.budget = budget if budget is not None else TokenBudget(None, name=name)
        self.name, self.progress = name, progress
        self.device = model.get_input_embeddings().weight.device
        forward_args = inspect.signature(model.forward).parameters
        self.keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in forward_args), None)
        # The KV cache's argument and output field: `cache` from transformers 5.2x on (where `past_key_values` is a
        # deprecated alias that warns once per process), `past_key_values` before.
        self.cache_kw = "cache" if "cache" in forward_args else "past_key_values"
        self.pad_id = next(i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if i is not None)
        eos = {tokenizer.eos_token_id}
        gen_eos = getattr(model.generation_config, "eos_token_id", None)
        eos |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
        self.eos_ids = torch.tensor(sorted(i for i in eos if i is not None), dtype=torch.long, device=self.device)
        self.forward_tokens = 0  # token positions fed to the model in passes that ran (padding included)
        self.attention_pairs = 0  # (query, key) pairs each layer's attention computed in passes that ran
        self.head_rows = 0  # positions the output head computed logits for in passes that ran
        # A packed pass's attention in blocks of queries (tree_attention), where the model runs SDPA on a CPU: what
        # one more block costs, in pairs; None: every pass is one SDPA call.
        self.block_call_cost = (
            tree_attention.call_cost_pairs(model.config, model) if tree_attention.enable(model) else None
        )

    def forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        *,
        keep: int | torch.Tensor,
        use_cache: bool = False,
        past: Any = None,
        sees: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, Any]:
        """(logits on the input device, KV cache): of the last `keep` positions, or of the positions that the
        index tensor `keep` lists (a packed sequence, whose boolean (rows, n, n) `sees` made its 4D `mask`)."""
        kwargs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=use_cache)
        if past is not None:
            kwargs[self.cache_kw] = past
        if self.keep_kw:
            kwargs[self.keep_kw] = keep
        with self.attention(ids, mask, sees):
            out = self.model(**kwargs)
        self.forward_tokens += ids.numel()  # counted once the pass ran: a pass that ran out of memory fed nothing
        kept = keep if isinstance(keep, int) else len(keep)
        self.head_rows += ids.shape[0] * kept if self.keep_kw else ids.numel()
        logits = out.logits
        if not self.keep_kw:  # the model returned every position: keep what was asked for
            logits = logits[:, -keep:] if isinstance(keep, int) else logits[:, keep.to(logits.device)]
        # With a device map the head may sit on another GPU than the embeddings; index tensors live on the latter.
        return logits.to(self.device), getattr(out, self.cache_kw)

    def forward_at(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        rows: torch.Tensor,
        nodes: torch.Tensor,
        sees: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits at the (row, position) pairs `rows[k], nodes[k]` only, (pairs, vocabulary): the output head is fed
        just those hidden states (a pre-hook on it), so a batch of packs whose rows keep different positions pays the
        head for what it keeps, not for every row x every position some row keeps. `sees`: as in `forward`."""
        columns = torch.unique(nodes)  # sorted: what the model keeps of every row
        within = torch.searchsorted(columns, nodes) if self.keep_kw else nodes

        def only_kept(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
            hidden = args[0]
            return (hidden[rows.to(hidden.device), within.to(hidden.device)][None], *args[1:])

        kwargs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False)
        if self.keep_kw:
            kwargs[self.keep_kw] = columns
        handle = self.model.get_output_embeddings().register_forward_pre_hook(only_kept)
        try:
            with self.attention(ids, mask, sees):
                out = self.model(**kwargs)
        finally:
            handle.remove()
        self.forward_tokens += ids.numel()
        self.head_rows += len(nodes)  # the pre-hook fed the head just these
        logits: torch.Tensor = out.logits[0].to(self.device)
        return logits

    @contextmanager
    def attention(self, ids: torch.Tensor, mask: torch.Tensor, sees: torch.Tensor | None) -> Iterator[None]:
        """A pass run inside attends in blocks where it is packed (`sees` given) and blocks pay on this model; the
        pairs it computed are counted once it ran."""
        layout = None
        if sees is not None and self.block_call_cost is not None:
            layout = tree_attention.block_layout(sees, mask, self.block_call_cost)
        with tree_attention.blocked(layout):
            yield
        self.attention_pairs += layout.pairs if layout else ids.shape[0] * ids.shape[1] * mask.shape[-1]

    def left_pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(token ids, attention mask) of `seqs`, left-padded to the longest."""
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, seq in enumerate(seqs):
            if seq:
                ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
                mask[row, width - len(seq) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def batch_tokens(self) -> int:
        """The token budget of one pass, decided on first use (`TokenBudget.resolve`)."""
        dtype = self.model.get_input_embeddings().weight.dtype
        return self.budget.resolve(self.device, lambda: pass_bytes_per_token(self.model.config, dtype, self.model))

    def in_batches(
        self,
        queue: list[Any],
        run: Callable[[list[Any]], Any],
        *,
        what: str,
        unit: str,
        counts: Callable[[Any], int] = lambda u: 1,
        **layout: Any,
    ) -> Iterator[tuple[list[Any], Any]]:
        """(batch, run(batch)) over `queue` within the token budget (`budget.run_in_batches`, whose keywords
        `layout` passes on: width, rows, max_units, repack), with a bar of `unit`s counted by `counts`."""
        self.batch_tokens()
        with self.bar(sum(counts(u) for u in queue), unit, what) as bar:
            for batch, result in run_in_batches(self.budget, queue, run, **layout):
                yield batch, result
                bar.update(sum(counts(u) for u in batch))

    def prompt_batches(
        self,
        lengths: list[int],
        max_rows: int | None,
        run: Callable[[list[int]], Any],
        what: str,
        *,
        rows: Callable[[int], int] = lambda i: 1,
        extra: int = 0,
    ) -> Iterator[tuple[list[int], Any]]:
        """(indices, run(indices)) in left-padded batches of similar length, longest first (an out-of-memory shows
        at once), each within the token budget ((rows) x (longest + `extra`) tokens) and `max_rows` prompts."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        return self.in_batches(
            order, run, what=what, unit="prompt", width=lambda i: lengths[i] + extra, rows=rows, max_units=max_rows
        )

    def bar(self, total: int, unit: str, what: str) -> Any:
        """A bar inside the job's (src/common/progress.py): labelled, removed when done, none in a log file."""
        return step_bar(total, f"{self.name} {what}", unit=unit, enabled=self.progress)


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that start at 0 on each row's first real token (left padding)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)
