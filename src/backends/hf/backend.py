"""HFBackend: a transformers causal LM (CPU, or GPU through accelerate device maps) behind the batched `Backend`.

It holds the configuration, the identity and the loaded model, and wires the parts: `loading` (weights),
`forward` (passes), `packing` (prefix trees), `scoring` (labels, options) and `generation` (sampling).

- score_labels: the next-token logits after each prompt; with `share_prefix` (default) the prompts of a call
  are packed into prefix trees instead of padded rows. With a temperature, it also gives the exact first-token
  sampling distribution (labels + INVALID).
- generate: seeded sampling over the KV cache (see `generation`); with `share_prefix` the prompts are packed
  into prefix trees as for score_labels and every sample row decodes against the one pack cache.
- score_options: lm-eval style log-likelihood of " " + option after the prompt, the prompt fed once for all
  of its options.

Models load lazily: `identity` is known without loading, so a run whose answers are all in the response
cache never pays for the model.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from src.backends import weights
from src.backends.base import Backend, LabelScores, OptionScores, Request, SamplingParams
from src.backends.hf import gguf_cache
from src.backends.hf.budget import TokenBudget, chunk_prompts, is_out_of_memory, tokens_for_memory
from src.backends.hf.forward import LoadedModel
from src.backends.hf.generation import generate
from src.backends.hf.loading import dtype_name, load_pretrained, locate_weights, torch_dtype
from src.backends.hf.packing import packing_refusal
from src.backends.hf.scoring import (
    label_scores,
    packed_continuation_logliks,
    packed_last_logits,
    padded_continuation_logliks,
    padded_last_logits,
    spelled_label_scores,
)
from src.backends.hf.settings import HFSettings
from src.backends.text import (
    chat_text,
    label_spelling_ids,
    label_token_ids,
    option_continuations,
    option_scores,
    plain_ids,
    prompt_ids,
    uses_chat,
)
from src.common.errors import UserError

log = logging.getLogger(__name__)


class HFBackend(Backend):
    """A transformers causal LM. Build it from a config node with `HFBackend.from_config(cfg, chat=...)`."""

    def __init__(
        self,
        settings: HFSettings,
        *,
        progress: bool = True,
        loaded: tuple[Any, Any] | None = None,  # (model, tokenizer) already in memory: `HFBackend.in_memory`
    ) -> None:
        self.settings = settings
        self.name = settings.name
        # the passes' own copies: a failed packing check turns sharing off, a memory budget sets the pack size, and
        # the benches (devtools/perf) set each to time it
        self.batch_size, self.pack_tokens, self.share_prefix = (
            settings.batch_size,
            settings.pack_tokens,
            settings.share_prefix,
        )
        self.progress = progress
        self.budget = TokenBudget(settings.max_batch_tokens, name=settings.name)
        self._torch_dtype = loaded[0].dtype if loaded else torch_dtype(settings.dtype, device_map=settings.device_map)
        self.dtype_name = dtype_name(self._torch_dtype)  # "auto" resolved: the identity names what was computed in

        self.location, self.gguf_path = (
            (f"memory:{settings.name}", None)
            if loaded
            else locate_weights(
                settings.name,
                path=settings.path,
                gguf_file=settings.gguf_file,
                package=settings.package,
                package_module=settings.package_module,
                install=settings.install,
                assemble=settings.assemble,
                revision=settings.revision,
            )
        )
        self.gguf_sha256: str | None = None
        if self.gguf_path is not None:
            self.gguf_sha256 = gguf_cache.file_sha256(self.gguf_path)
        self._name_content(settings.revision, in_memory=loaded is not None)

        self.model: Any = None
        self.lm: LoadedModel | None = None
        self.prompts_answered = 0  # prompts asked of the model (what the tokens it fed are spread over)
        self._packing_checked = False
        self._label_ids: dict[tuple[str, ...], list[torch.Tensor]] = {}
        self._spellings: dict[tuple[str, ...], list[list[tuple[int, ...]]] | None] = {}
        if loaded:
            self._attach(*loaded)

    @property
    def identity(self) -> str:
        return self._identity

    def _name_content(self, revision: str | None, *, in_memory: bool) -> None:
        """`content`, `identity` and `load_revision`: what it loads by content alone (src/backends/weights.py), so a
        renamed folder is the same model and new files in the same folder another one; a hub id's resolved commit
        is the revision loaded."""
        self.content = None
        self.load_revision = revision
        if in_memory:  # a model built in this process (the device check): no weights on disk or hub to name
            head = f"hf:{self.location}|in-memory"
        else:
            self.content = weights.model_content(self.gguf_path or self.location, revision=revision)
            self.load_revision = self.content.commit or revision
            head = self.content.identity_fields("hf")
        self._identity = f"{head}|revision={revision}|dtype={self.dtype_name}|chat={self.settings.chat}"

    @classmethod
    def in_memory(cls, model: Any, tokenizer: Any, settings: HFSettings, *, progress: bool = True) -> HFBackend:
        """A backend around a model and tokenizer already in memory (the device check builds a random 8B-shaped model
        from its config, devtools/perf/gpu.py): the same passes, nothing loaded; its identity names it `memory:NAME`."""
        return cls(settings, progress=progress, loaded=(model, tokenizer))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], *, chat: bool, progress: bool = True) -> HFBackend:
        """The backend of a `model` config node (`HFSettings.from_config`)."""
        return cls(HFSettings.from_config(cfg, chat=chat), progress=progress)

    def run_params(self) -> dict[str, int]:
        """What the job logs as params beside its config: `batch_tokens`, the token budget per forward pass that it
        ended with (auto's find, after any halving), and this job's `batch_token_halvings` (out-of-memory passes run
        again smaller) and `batch_token_doublings` (growth back after passes that fit) where it had any."""
        params: dict[str, int] = {}
        if self.budget.tokens is not None:
            params["batch_tokens"] = self.budget.tokens
        if self.budget.recoveries:
            params["batch_token_halvings"] = self.budget.recoveries
        if self.budget.doublings:
            params["batch_token_doublings"] = self.budget.doublings
        return params

    def prompts_per_chunk(self, default: int) -> int:
        """Prompts per chunk of the answering loop: `default` on a CPU, as many as a pass of the budget holds on a
        GPU (`budget.chunk_prompts`), by the tokens each prompt fed in this backend's calls so far."""
        on_gpu = self.lm is not None and self.lm.device.type == "cuda"
        fed = self.forward_tokens / self.prompts_answered if self.prompts_answered else 0.0
        return chunk_prompts(default, tokens=self.budget.tokens, fed_per_prompt=fed, on_gpu=on_gpu)

    def new_job(self) -> None:
        """The next job of a sweep on this loaded backend (`reuse_backend`): its budget starts from the ceiling
        learned so far, with its own counts (`TokenBudget.new_job`)."""
        self.budget.new_job()

    @property
    def forward_tokens(self) -> int:
        """Token positions fed to the model so far, padding included (the bench reads it); 0 before loading."""
        return self.lm.forward_tokens if self.lm is not None else 0

    @forward_tokens.setter
    def forward_tokens(self, value: int) -> None:
        if self.lm is not None:
            self.lm.forward_tokens = value

    def load(self) -> None:
        """Load tokenizer and model now (the scoring methods call this on first use)."""
        if self.model is not None:
            return
        tokenizer, model = load_pretrained(
            self.name,
            self.location,
            self.gguf_path,
            revision=self.load_revision,
            trust_remote_code=self.settings.trust_remote_code,
            dtype=self._torch_dtype,
            device_map=self.settings.device_map,
        )
        self._attach(model, tokenizer)

    def _attach(self, model: Any, tokenizer: Any) -> None:
        """Take a loaded model and its tokenizer: the forward passes, the pack size a memory budget gives, chat."""
        self.model, self.tokenizer = model, tokenizer
        self.lm = LoadedModel(self.model, self.tokenizer, name=self.name, progress=self.progress, budget=self.budget)
        if self.settings.memory_gb is not None:
            dtype = self.model.get_input_embeddings().weight.dtype
            self.pack_tokens = tokens_for_memory(self.model.config, dtype, self.settings.memory_gb, self.model)
        self.use_chat = uses_chat(self.tokenizer, chat=self.settings.chat, name=self.name)

    def _loaded(self) -> LoadedModel:
        """The loaded model's forward passes (`load()` makes them)."""
        if self.lm is None:
            raise RuntimeError(f"model {self.name} is not loaded: call load() first")
        return self.lm

    # -- the Backend interface -----------------------------------------------------------------

    @torch.inference_mode()
    def score_labels(self, requests: Sequence[Request], sampling: SamplingParams | None = None) -> list[LabelScores]:
        if not requests:
            return []
        self.load()
        encoded = [self._encode(self._prompt_text(r.prompt)) for r in requests]
        self.prompts_answered += len(requests)
        results: list[LabelScores | None] = [None] * len(requests)
        spelled = [i for i, r in enumerate(requests) if self._label_spellings(r.labels) is not None]
        if spelled:
            if sampling is not None:
                labels = requests[spelled[0]].labels
                raise UserError(
                    f"model {self.name} writes the labels {', '.join(labels)} with tokens that are not one "
                    f"per label, so exact first-token sampling (scoring=logprob at a temperature) cannot "
                    f"tell them apart; use scoring=generate, letter labels (prompt.label_style=A.) or "
                    f"at most 9 numbered options"
                )
            # each of `spelled` has spellings (so it was chosen): the filter drops none, it narrows the type
            spellings = [s for i in spelled if (s := self._label_spellings(requests[i].labels)) is not None]
            conts = [[list(seq) for label_seqs in sp for seq in label_seqs] for sp in spellings]
            logliks = self._continuation_logliks([encoded[i] for i in spelled], conts, "score_labels")
            for i, sp, ll in zip(spelled, spellings, logliks):
                results[i] = spelled_label_scores(sp, ll)
        rest = [i for i in range(len(requests)) if results[i] is None]
        if rest:
            for batch, logits in self._last_logits([encoded[i] for i in rest], "score_labels"):
                for row, k in enumerate(batch):
                    labels = requests[rest[k]].labels
                    results[rest[k]] = label_scores(logits[row], self._label_token_ids(labels), sampling)
        return results  # type: ignore[return-value]  # every request is scored above

    @torch.inference_mode()
    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
        if not requests:
            return []
        self.load()
        if params.n < 1 or params.max_new_tokens < 1:
            raise UserError(
                f"sampling needs n >= 1 and max_new_tokens >= 1 (got n={params.n}, "
                f"max_new_tokens={params.max_new_tokens})"
            )
        encoded = [self._encode(self._prompt_text(r.prompt)) for r in requests]
        self.prompts_answered += len(requests)
        return generate(
            self._loaded(),
            self.tokenizer,
            encoded,
            [r.seed for r in requests],
            params,
            self.batch_size,
            share_prefix=self._use_packing(encoded),
            pack_tokens=self.pack_tokens,
        )

    @torch.inference_mode()
    def score_options(self, requests: Sequence[Request]) -> list[OptionScores]:
        if not requests:
            return []
        self.load()
        encoded = [
            option_continuations(
                self.tokenizer, self._prompt_text(r.prompt), r.options, chat=self.use_chat, prefix=r.continuation_prefix
            )
            for r in requests
        ]
        self.prompts_answered += len(requests)
        logliks = self._continuation_logliks([c for c, _ in encoded], [conts for _, conts in encoded], "score_options")
        return [option_scores(ll, r.options) for r, ll in zip(requests, logliks)]

    def model_input(self, prompt: str) -> str | None:
        """The text the model is given for `prompt` (chat template applied when used); None before loading."""
        return self._prompt_text(prompt) if self.tokenizer is not None else None

    # -- wiring --------------------------------------------------------------------------------

    def _prompt_text(self, prompt: str) -> str:
        return chat_text(self.tokenizer, prompt) if self.use_chat else prompt

    def _encode(self, text: str) -> list[int]:
        return prompt_ids(self.tokenizer, text, chat=self.use_chat)

    def _label_token_ids(self, labels: tuple[str, ...]) -> list[torch.Tensor]:
        """Per label, its first tokens (`text.label_token_ids`) as an index tensor; a label left with none is
        scored by its whole spellings instead (`_label_spellings`)."""
        if labels not in self._label_ids:
            ids = label_token_ids(lambda s: plain_ids(self.tokenizer, s), labels)
            self._label_ids[labels] = [torch.tensor(sorted(firsts), dtype=torch.long) for firsts in ids]
        return self._label_ids[labels]

    def _label_spellings(self, labels: tuple[str, ...]) -> list[list[tuple[int, ...]]] | None:
        """Per label, the token sequences of its spellings when some label has no first token of its own (labels
        1 and 10 both start with "1" where digits are single tokens, and " 1" starts with " "), so one next
        token cannot tell the labels apart; None when the first-token probabilities can (letters)."""
        if labels not in self._spellings:
            spellings = None
            if any(ids.numel() == 0 for ids in self._label_token_ids(labels)):
                spellings = label_spelling_ids(lambda s: plain_ids(self.tokenizer, s), labels)
            self._spellings[labels] = spellings
        return self._spellings[labels]

    def _last_logits(self, encoded: list[list[int]], what: str) -> Iterator[tuple[list[int], torch.Tensor]]:
        if self._use_packing(encoded):
            return packed_last_logits(self._loaded(), encoded, self.pack_tokens, what)
        return padded_last_logits(self._loaded(), encoded, self.batch_size, what)

    def _continuation_logliks(
        self, contexts: list[list[int]], continuations: list[list[list[int]]], what: str
    ) -> list[list[float]]:
        """Per context, the log-likelihood of each of its continuations (token id lists) after it. Packed into
        prefix trees when sharing is on (a context's tokens, and a question's text shared by its variants, are
        fed once for all continuations), else padded batches that encode each context once."""
        if self._use_packing(contexts):
            return packed_continuation_logliks(self._loaded(), contexts, continuations, self.pack_tokens, what)
        return padded_continuation_logliks(self._loaded(), contexts, continuations, self.batch_size, what)

    def _use_packing(self, encoded: list[list[int]]) -> bool:
        """Prefix-tree packing when configured and the model honours a custom 4D attention mask. The first use
        compares packed with padded scores on a few prompts and falls back to padding if they differ."""
        if not self.share_prefix:
            return False
        refusal = packing_refusal(self.model.config, max(len(e) for e in encoded))
        if refusal:
            return self._no_packing(refusal)
        if not self._packing_checked:
            self._packing_checked = True
            probe = encoded[:4]
            try:
                packed = {
                    i: row
                    for batch, logits in packed_last_logits(self._loaded(), probe, self.pack_tokens, "check")
                    for i, row in zip(batch, torch.softmax(logits.float(), -1))
                }
            except (RuntimeError, TypeError, ValueError, IndexError) as err:
                if is_out_of_memory(err):  # not the mask's fault: the budget's halving did not save it
                    raise
                return self._no_packing(f"a packed pass failed ({str(err).splitlines()[0][:200]})")
            padded = {
                i: row
                for batch, logits in padded_last_logits(self._loaded(), probe, self.batch_size, "check")
                for i, row in zip(batch, torch.softmax(logits.float(), -1))
            }
            gap = max(float((packed[i] - padded[i]).abs().max()) for i in padded)
            tolerance = 1e-3 if self._torch_dtype in (torch.float32, torch.float64) else 3e-2
            if gap > tolerance:
                return self._no_packing(f"packed and padded probabilities differ by {gap:.2g}")
        return self.share_prefix

    def _no_packing(self, why: str) -> bool:
        log.warning("model %s: prefix sharing off, %s; scoring padded batches", self.name, why)
        self.share_prefix = False
        return False
