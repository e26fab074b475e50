"""Questions x variants x repetitions -> backend requests -> answered trial rows (the records table)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from src.answer_formats import FORMATS, format_of
from src.answering.cache import AnswerStore, request_key
from src.answering.items import Answer, Item, ItemsAt, answer_key, variant_at
from src.answering.pipeline import Asked, ChunkWork, Pipeline, answer_chunk
from src.backends.base import Backend, Completion, Request, SamplingParams, truncated_of
from src.backends.oracle import OracleBackend
from src.common.digests import seed_of, text_sha256
from src.common.progress import job_progress
from src.core.prompts import CLOZE_SCORINGS as CLOZE_MODES  # options scored as continuations
from src.core.records import COLUMNS


def trial_seed(seed: int, question_id: str, variant_id: str) -> int:
    """Per (question, variant) seed, stable across processes and machines."""
    return seed_of(seed, question_id, variant_id, bits=31)


def prompt_hash(prompt: str) -> str:
    return text_sha256(prompt, length=16)


def decision_margin(scores: Sequence[float], chosen: int) -> float | None:
    """The chosen option's score minus the best other option's (log units: the scores are log-probabilities or
    log-likelihoods): how far a ranking's decision is from a tie, so from a flip by another machine's rounding.
    None with fewer than two options.

    >>> decision_margin([-1.0, -1.25, -3.0], 0), decision_margin([-2.0], 0)
    (0.25, None)
    """
    others = [s for i, s in enumerate(scores) if i != chosen]
    return float(scores[chosen] - max(others)) if others else None


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf


def _scores_text(labels: Sequence[str], values: Sequence[float]) -> str:
    return " ".join(f"{lab}:{v:.4f}" for lab, v in zip(labels, values))


def draw_answers(dist: Sequence[float], *, seed: int, n: int) -> list[int | None]:
    """`n` answers drawn from a first-token answer distribution (labels, then INVALID last): a slot, or None for
    INVALID. Repetition r draws with its own stream seeded from (seed, r), so it does not depend on n.

    >>> draw_answers([0.0, 1.0, 0.0], seed=1, n=2), draw_answers([0.0, 0.0, 1.0], seed=1, n=1)
    ([1, 1], [None])
    """
    out: list[int | None] = []
    for rep in range(n):
        k = random.Random(f"{seed}|{rep}").choices(range(len(dist)), weights=dist)[0]
        out.append(None if k == len(dist) - 1 else k)
    return out


def _parsed(request: Request, text: str, *, cache_hit: bool) -> Answer:
    """A generated answer parsed by its request's format: a label, Yes/No, or a set of labels, with the rule
    that decided it; a truncated text (a `Completion` cut by max_new_tokens) is parsed as such."""
    truncated = truncated_of(text)
    parse = format_of(request).parse(text, request.labels, request.options, truncated=bool(truncated))
    return Answer(
        str(text), parse.slot, cache_hit=cache_hit, slots=parse.slots, parse_rule=parse.rule, truncated=truncated
    )


def _generation_params(request: Request, params: SamplingParams) -> SamplingParams:
    """`params`, with at least the new tokens the request's format needs."""
    floor = format_of(request).min_new_tokens
    return replace(params, max_new_tokens=floor) if params.max_new_tokens < floor else params


def _cached_text(value: Any) -> Completion:
    """A cached generation: `[text, truncated]`, or a plain string from before truncation was recorded."""
    if isinstance(value, str):
        return Completion(value, truncated=None)
    return Completion(value[0], truncated=value[1])


def _answer_chunk(
    backend: Backend,
    reqs: Sequence[Request],
    *,
    scoring: str,
    params: SamplingParams,
    cloze_normalise: bool,
    cache: AnswerStore | None,
) -> list[list[Answer]]:
    """Answers for one chunk of requests in line: cached results first, the backend for the rest, then stored (the
    rounds of adaptive repetitions; `answer_items` runs the same work as a pipeline)."""
    return answer_chunk(_work(backend, scoring, params, cloze_normalise), reqs, cache)


def _work(backend: Backend, scoring: str, params: SamplingParams, cloze_normalise: bool) -> ChunkWork[Any]:
    """The scoring mode's work on a chunk (src/answering/pipeline.py); the backend's identity is read here, in the
    calling thread."""
    if scoring == "generate":
        return _GenerateWork(backend, params)
    if scoring in CLOZE_MODES:
        return _ClozeWork(backend, n=params.n, cloze_normalise=cloze_normalise)
    return _LogprobWork(backend, params)


class _GenerateWork(ChunkWork[tuple[SamplingParams, list[str]]]):
    """Generated answers, a cache key per repetition (one for every repetition when greedy)."""

    def __init__(self, backend: Backend, params: SamplingParams) -> None:
        self.backend, self.params, self.identity = backend, params, backend.identity
        self.oracle = isinstance(backend, OracleBackend)  # answers depend on the trial, not just the prompt
        self.greedy = params.temperature == 0
        first = params.first_repetition
        # greedy: one answer serves every repetition
        self.reps: list[int | None] = [None] if self.greedy else list(range(first, first + params.n))
        # a format's new-token floor -> its requests' sampling parameters and the settings their cache keys name
        self.own: dict[int, tuple[SamplingParams, dict[str, Any]]] = {}

    def prepare(self, request: Request) -> tuple[SamplingParams, list[str]]:
        floor = format_of(request).min_new_tokens
        if floor not in self.own:  # the same for every request of a format: made once
            own = replace(_generation_params(request, self.params), n=len(self.reps))
            settings = {
                "temperature": own.temperature,
                "top_k": own.top_k,
                "top_p": own.top_p,
                "max_new_tokens": own.max_new_tokens,
            }
            self.own[floor] = own, settings
        own, settings = self.own[floor]
        seeded = self.oracle or not self.greedy
        return own, [request_key(self.identity, "generate", request, settings, k, seeded=seeded) for k in self.reps]

    def lookup_keys(self, prepared: tuple[SamplingParams, list[str]]) -> list[str]:
        return prepared[1]

    def ask(
        self, requests: Sequence[Request], prepared: Sequence[tuple[SamplingParams, list[str]]], found: dict[str, Any]
    ) -> Asked:
        todo = [i for i, (_, ks) in enumerate(prepared) if not all(k in found for k in ks)]
        fresh: dict[str, Any] = {}
        for budget in sorted({prepared[i][0].max_new_tokens for i in todo}):  # one backend call per token budget
            group = [i for i in todo if prepared[i][0].max_new_tokens == budget]
            outs = self.backend.generate([requests[i] for i in group], prepared[group[0]][0])
            # cached as [text, truncated]
            fresh.update(
                {k: [str(t), truncated_of(t)] for i, texts in zip(group, outs) for k, t in zip(prepared[i][1], texts)}
            )
        return Asked(fresh, set(todo))

    def answers(
        self,
        requests: Sequence[Request],
        prepared: Sequence[tuple[SamplingParams, list[str]]],
        found: dict[str, Any],
        asked: Asked,
    ) -> list[list[Answer]]:
        repeat = self.params.n if self.greedy else 1
        out = []
        for i, (r, (_, ks)) in enumerate(zip(requests, prepared)):
            texts = [_cached_text(found[k]) for k in ks] * repeat
            out.append([_parsed(r, t, cache_hit=i not in asked.done) for t in texts])
        return out


class _LogprobWork(ChunkWork[tuple[str, str]]):
    """Label scores; at temperature 0 every repetition is the best label. At a temperature, exact first-token
    sampling: one pass gives the first token's distribution under temperature/top-k/top-p over the whole
    vocabulary (labels + INVALID), and the R answers are drawn from it with each trial's seed. The cache keeps
    the temperature-1 scores (shared with greedy runs) and, under the sampling settings, the tempered part;
    the draws are cheap and made again on every run."""

    def __init__(self, backend: Backend, params: SamplingParams) -> None:
        self.backend, self.params, self.identity = backend, params, backend.identity
        self.oracle = isinstance(backend, OracleBackend)
        self.sampled = params.temperature > 0
        self.settings = {
            "temperature": params.temperature,
            "top_k": params.top_k,
            "top_p": params.top_p,
            "first_token": "exact",
        }

    def prepare(self, request: Request) -> tuple[str, str]:
        """(the temperature-1 key, the key the run reads: the sampled one under a temperature)."""
        plain = request_key(self.identity, "logprob", request, {}, None, seeded=self.oracle)
        if not self.sampled:
            return plain, plain
        return plain, request_key(self.identity, "logprob", request, self.settings, None, seeded=self.oracle)

    def lookup_keys(self, prepared: tuple[str, str]) -> tuple[str]:
        return (prepared[1],)

    def ask(self, requests: Sequence[Request], prepared: Sequence[tuple[str, str]], found: dict[str, Any]) -> Asked:
        first: dict[str, int] = {}  # identical prompts in a chunk (a variant that repeats another) are scored once
        for i, (_, k) in enumerate(prepared):
            if k not in found:
                first.setdefault(k, i)
        todo = list(first.values())
        if not todo:
            return Asked({}, set())
        scored = self.backend.score_labels([requests[i] for i in todo], self.params if self.sampled else None)
        fresh = {
            prepared[i][1]: [list(sc.probs), sc.mass] + ([list(sc.answer_dist or ())] if self.sampled else [])
            for i, sc in zip(todo, scored)
        }
        plain = [(prepared[i][0], value[:2]) for i, value in zip(todo, fresh.values())] if self.sampled else []
        return Asked(fresh, set(fresh), also=plain)

    def answers(
        self, requests: Sequence[Request], prepared: Sequence[tuple[str, str]], found: dict[str, Any], asked: Asked
    ) -> list[list[Answer]]:
        n = self.params.n
        out = []
        for r, (_, k) in zip(requests, prepared):
            probs, mass = tuple(found[k][0]), found[k][1]
            hit = k not in asked.done
            if not self.sampled:
                best = max(range(len(probs)), key=probs.__getitem__)
                margin = decision_margin([_log(p) for p in probs], best)
                out.append(
                    [
                        Answer(
                            _scores_text(r.labels, probs),
                            best,
                            probs,
                            mass,
                            cache_hit=hit,
                            parse_rule="logprob_argmax",
                            decision_margin=margin,
                        )
                    ]
                    * n
                )
                continue
            dist = tuple(found[k][2])
            text = _scores_text((*r.labels, "INVALID"), dist)
            out.append(
                [
                    Answer(text, slot, probs, mass, answer_dist=dist, cache_hit=hit, parse_rule="exact_sample")
                    for slot in draw_answers(dist, seed=r.seed, n=n)
                ]
            )
        return out


class _ClozeWork(ChunkWork[list[str]]):
    """Cloze scores per (prompt, option text) pair: an option's log-likelihood does not depend on the other
    options shown, so the variants of a question (same cloze prompt, reordered or reduced options) share the
    work, and each pair is computed once per model."""

    def __init__(self, backend: Backend, *, n: int, cloze_normalise: bool) -> None:
        self.backend, self.n, self.cloze_normalise = backend, n, cloze_normalise
        self.identity, self.oracle = backend.identity, isinstance(backend, OracleBackend)

    def prepare(self, request: Request) -> list[str]:
        """A key per option text; without an oracle it names the (prompt, option text) pair alone, whichever
        request showed it."""
        r = request
        return [
            request_key(
                self.identity,
                "cloze",
                Request(
                    r.prompt, (), (text,), r.seed, key=r.key, data=r.data, continuation_prefix=r.continuation_prefix
                ),
                {},
                None,
                seeded=self.oracle,
            )
            for text in r.options
        ]

    def lookup_keys(self, prepared: list[str]) -> list[str]:
        return prepared

    def ask(self, requests: Sequence[Request], prepared: Sequence[list[str]], found: dict[str, Any]) -> Asked:
        todo = [i for i, ks in enumerate(prepared) if not all(k in found for k in ks)]
        fresh: dict[str, Any] = {}
        if self.oracle:  # an oracle's scores depend on the whole request (which slot is right), not on pairs
            for i, sc in zip(todo, self.backend.score_options([requests[i] for i in todo])):
                fresh.update({k: [a, b] for k, a, b in zip(prepared[i], sc.loglik, sc.loglik_norm)})
        elif todo:
            # (prompt, question identity, continuation prefix) -> option texts still to score, in first-seen order,
            # each with its pair's key
            groups: dict[tuple[str, str, str | None], dict[str, str]] = {}
            for i in todo:
                r = requests[i]
                for text, k in zip(r.options, prepared[i]):
                    if k not in found:
                        groups.setdefault((r.prompt, r.data, r.continuation_prefix), {}).setdefault(text, k)
            group_reqs = [
                Request(
                    prompt, tuple(str(j) for j in range(len(texts))), tuple(texts), 0, data=data, continuation_prefix=p
                )
                for (prompt, data, p), texts in groups.items()
            ]
            for keyed, sc in zip(groups.values(), self.backend.score_options(group_reqs)):
                fresh.update({k: [a, b] for k, a, b in zip(keyed.values(), sc.loglik, sc.loglik_norm)})
        return Asked(fresh, set(todo))

    def answers(
        self, requests: Sequence[Request], prepared: Sequence[list[str]], found: dict[str, Any], asked: Asked
    ) -> list[list[Answer]]:
        out = []
        for i, (r, ks) in enumerate(zip(requests, prepared)):
            loglik = tuple(found[k][0] for k in ks)
            norm = tuple(found[k][1] for k in ks)
            values = norm if self.cloze_normalise else loglik
            best = max(range(len(values)), key=values.__getitem__)
            out.append(
                [
                    Answer(
                        _scores_text(r.labels, values),
                        best,
                        option_loglik=loglik,
                        option_loglik_norm=norm,
                        cache_hit=i not in asked.done,
                        parse_rule="cloze_argmax",
                        decision_margin=decision_margin(values, best),
                    )
                ]
                * self.n
            )
        return out


def answer_items(
    backend: Backend,
    items: Sequence[Item],
    *,
    scoring: str,
    params: SamplingParams,
    cloze_normalise: bool = True,
    cache: AnswerStore | None = None,
    chunk_size: int = 64,
    progress: bool = True,
    adaptive: bool = False,
) -> list[list[Answer]]:
    """`params.n` answers per item, in repetition order. Work is done and cached chunk by chunk, the framework's
    part beside the backend's (src/answering/pipeline.py), so a killed run loses at most the chunks in flight: the
    one the backend answers and the one being stored. `adaptive` (generate at a temperature only): stop an item
    once its repetition cell can no longer change, so it gets the first `n_asked` <= n answers
    (src/answering/adaptive.py)."""
    if scoring not in ("generate", "logprob", *CLOZE_MODES):
        raise ValueError(f"unknown scoring {scoring!r}")
    if isinstance(backend, OracleBackend):  # the simulation answers from the answer key; no real model is told it
        backend.know(answer_key(items))
    if adaptive and params.n > 1:
        if scoring != "generate" or params.temperature <= 0:
            raise ValueError("adaptive repetitions need scoring=generate at a temperature > 0")
        from src.answering.adaptive import answer_adaptively  # local: loads numpy (slow import)

        return answer_adaptively(
            backend,
            items,
            params=params,
            answer_chunk=_answer_chunk,
            cache=cache,
            chunk_size=chunk_size,
            progress=progress,
        )
    generated = (
        [i for i in range(len(items)) if FORMATS[variant_at(items, i).fmt].generated_only]
        if scoring != "generate"
        else []
    )
    if generated:  # a set of labels can only be written out: such items are generated under any scoring
        picked = set(generated)
        rest = [i for i in range(len(items)) if i not in picked]

        def part(indices: list[int], mode: str) -> list[list[Answer]]:
            return answer_items(
                backend,
                ItemsAt(items, indices),
                scoring=mode,
                params=params,
                cloze_normalise=cloze_normalise,
                cache=cache,
                chunk_size=chunk_size,
                progress=progress,
            )

        with job_progress(len(items), scoring, enabled=progress):  # both parts count on the job's one bar
            found = dict(zip(rest, part(rest, scoring)))
            found.update(zip(generated, part(generated, "generate")))
        return [found[i] for i in range(len(items))]
    with job_progress(len(items), scoring, enabled=progress) as bar:  # one bar per job (src/common/progress.py)
        pipeline = Pipeline(
            _work(backend, scoring, params, cloze_normalise),
            items,
            cache=cache,
            # the HF backend on a GPU sizes chunks by its token budget (`prompts_per_chunk`); else chunk_size
            chunk_size=lambda: backend.prompts_per_chunk(chunk_size),
            block=chunk_size,
            on_chunk=bar.update,
        )
        return pipeline.run()


def to_records(
    items: Sequence[Item], answers: Sequence[Sequence[Answer]], *, run_info: dict[str, Any], planned: int | None = None
) -> pd.DataFrame:
    """One row per item x repetition asked, columns as `src.core.records.COLUMNS`; with `planned` (adaptive runs:
    the R repetitions planned) also `n_asked` and `n_planned`, the adaptive runs' own columns.

    Built column by column (a row's dict per trial cost more than the rest of the table): an item's columns are
    made once and repeated over its answers; what a format's `columns` gives overrides the others, row by row, as a
    row's dict once merged it (a column it gives on some rows only is NaN on the rest, as in a frame of dicts)."""
    cols: dict[str, list[Any]] = {name: [] for name in _ITEM_COLUMNS + _ANSWER_COLUMNS}
    overrides: dict[str, dict[int, Any]] = {}  # a format's column -> {row: value}
    row = 0
    for it, reps in zip(items, answers):
        v, q, labels = it.variant, it.question, it.request.labels
        n = len(reps)
        order = list(v.option_order)
        perm_sets = [f"{name}:{pos}" for name, pos in v.memberships]
        item_values = (
            q.id,
            q.subject,
            v.kind,
            v.variant_id,
            v.n_options,
            labels[v.correct_slot],
            prompt_hash(it.request.prompt),
            v.fmt,
            v.level,
            v.asked_option,
        )
        for name, value in zip(_ITEM_COLUMNS, item_values):
            cols[name].extend([value] * n)
        # a list per row, as each row's dict had its own (a frame's cells are not shared)
        cols["option_order"].extend([list(order) for _ in range(n)])
        cols["perm_sets"].extend([list(perm_sets) for _ in range(n)])
        fmt = FORMATS[v.fmt]
        for k, a in enumerate(reps):
            cols["repetition"].append(k)
            cols["raw_output"].append(a.raw_output)
            cols["parsed_label"].append(None if a.slot is None else labels[a.slot])
            cols["correct"].append(a.slot == v.correct_slot)
            cols["label_probs"].append(None if a.label_probs is None else list(a.label_probs))
            cols["label_mass"].append(a.label_mass)
            cols["option_loglik"].append(None if a.option_loglik is None else list(a.option_loglik))
            cols["option_loglik_norm"].append(None if a.option_loglik_norm is None else list(a.option_loglik_norm))
            cols["answer_dist"].append(None if a.answer_dist is None else list(a.answer_dist))
            cols["cache_hit"].append(a.cache_hit)
            cols["parse_rule"].append(a.parse_rule)
            cols["truncated"].append(a.truncated)
            cols["decision_margin"].append(a.decision_margin)
            for name, value in fmt.columns(q, v, labels, slot=a.slot, slots=a.slots).items():
                overrides.setdefault(name, {})[row + k] = value
        row += n
    cols["parsed_labels"] = [None] * row
    cols["chosen_options"] = [None] * row
    for name, value in run_info.items():
        cols.setdefault(name, [value] * row)
    for name, by_row in overrides.items():
        values = cols.setdefault(name, [math.nan] * row)
        if len(by_row) == row:
            cols[name] = list(by_row.values())
        else:
            for i, value in by_row.items():
                values[i] = value
    # no trials: every column empty and of no type, as a frame of no rows' dicts has them
    data = {name: cols[name] for name in COLUMNS if name in cols} if row else []
    frame = pd.DataFrame(data, columns=list(COLUMNS))
    if planned is not None:  # trials not asked are absent: say how many were made of how many planned
        frame["n_asked"] = pd.array([len(reps) for reps in answers for _ in reps], dtype="int64")
        frame["n_planned"] = pd.array([planned] * len(frame), dtype="int64")
    return frame.astype(
        {
            "chosen_option": "Int64",
            "label_mass": "Float64",
            "decision_margin": "Float64",
            "variant_level": "Int64",
            "asked_option": "Int64",
            "truncated": "boolean",
        }
    )


# the records' columns that one item gives all its answers, in `to_records`' order, and those each answer gives
_ITEM_COLUMNS = (
    "question_id",
    "subject",
    "variant_kind",
    "variant_id",
    "n_options",
    "correct_label",
    "prompt_hash",
    "fmt",
    "variant_level",
    "asked_option",
)
_ANSWER_COLUMNS = (
    "option_order",
    "perm_sets",
    "repetition",
    "raw_output",
    "parsed_label",
    "correct",
    "label_probs",
    "label_mass",
    "option_loglik",
    "option_loglik_norm",
    "answer_dist",
    "cache_hit",
    "parse_rule",
    "truncated",
    "decision_margin",
)


# the trial loop's callers take the nouns they hand it (`Item`, `Answer`) and the cloze scorings from here too
__all__ = [
    "CLOZE_MODES",
    "Answer",
    "Item",
    "answer_items",
    "decision_margin",
    "draw_answers",
    "prompt_hash",
    "to_records",
    "trial_seed",
]
