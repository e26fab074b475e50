"""Questions x variants x repetitions -> backend requests -> answered trial rows (the records table)."""
from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Any, Sequence

import pandas as pd

from .backends.base import Backend, Request, SamplingParams
from .parsing import parse_answer
from .questions import Question
from .records import COLUMNS
from .variants import Variant


def trial_seed(seed: int, question_id: str, variant_id: str) -> int:
    """Per (question, variant) seed, stable across processes and machines."""
    digest = hashlib.sha256(f"{seed}|{question_id}|{variant_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Item:
    """One prompt to ask: a variant of a question, rendered."""

    question: Question
    variant: Variant
    request: Request


@dataclass(frozen=True)
class Answer:
    """One repetition's outcome for an item, before it becomes a record row."""

    raw_output: str
    slot: int | None  # displayed slot chosen; None = INVALID
    label_probs: tuple[float, ...] | None = None
    label_mass: float | None = None
    option_loglik: tuple[float, ...] | None = None
    option_loglik_norm: tuple[float, ...] | None = None
    cache_hit: bool = False


def _scores_text(labels: Sequence[str], values: Sequence[float]) -> str:
    return " ".join(f"{lab}:{v:.4f}" for lab, v in zip(labels, values))


def _draw(probs: Sequence[float], temperature: float, rng: random.Random) -> int:
    """Sample a slot from label probabilities sharpened/flattened by temperature."""
    logits = [math.log(max(p, 1e-300)) / temperature for p in probs]
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    return rng.choices(range(len(probs)), weights=weights)[0]


def answer_items(backend: Backend, items: Sequence[Item], *, scoring: str, params: SamplingParams,
                 cloze_normalise: bool = True) -> list[list[Answer]]:
    """`params.n` answers per item, in repetition order."""
    requests = [it.request for it in items]
    if scoring == "generate":
        outs = backend.generate(requests, params)
        return [[Answer(text, parse_answer(text, r.labels, r.options)) for text in texts]
                for r, texts in zip(requests, outs)]
    if scoring == "logprob":
        answers = []
        for r, sc in zip(requests, backend.score_labels(requests)):
            greedy = max(range(len(sc.probs)), key=sc.probs.__getitem__)
            row = []
            for k in range(params.n):
                slot = greedy if params.temperature == 0 else _draw(sc.probs, params.temperature, random.Random(f"{r.seed}|{k}"))
                row.append(Answer(_scores_text(r.labels, sc.probs), slot, sc.probs, sc.mass))
            answers.append(row)
        return answers
    if scoring == "cloze":
        answers = []
        for r, sc in zip(requests, backend.score_options(requests)):
            values = sc.loglik_norm if cloze_normalise else sc.loglik
            best = max(range(len(values)), key=values.__getitem__)
            a = Answer(_scores_text(r.labels, values), best, option_loglik=sc.loglik, option_loglik_norm=sc.loglik_norm)
            answers.append([a] * params.n)
        return answers
    raise ValueError(f"unknown scoring {scoring!r}")


def to_records(items: Sequence[Item], answers: Sequence[Sequence[Answer]], *, run_info: dict[str, Any]) -> pd.DataFrame:
    """One row per item x repetition, columns as `src.records.COLUMNS`."""
    rows = []
    for it, reps in zip(items, answers):
        v, q = it.variant, it.question
        for k, a in enumerate(reps):
            parsed = None if a.slot is None else it.request.labels[a.slot]
            rows.append({
                **run_info,
                "question_id": q.id, "subject": q.subject, "variant_kind": v.kind, "variant_id": v.variant_id,
                "repetition": k, "n_options": v.n_options, "option_order": list(v.option_order),
                "correct_label": it.request.labels[v.correct_slot], "correct_option": v.option_order[v.correct_slot],
                "raw_output": a.raw_output, "parsed_label": parsed,
                "chosen_option": None if a.slot is None else v.option_order[a.slot],
                "correct": a.slot == v.correct_slot,
                "label_probs": None if a.label_probs is None else list(a.label_probs), "label_mass": a.label_mass,
                "option_loglik": None if a.option_loglik is None else list(a.option_loglik),
                "option_loglik_norm": None if a.option_loglik_norm is None else list(a.option_loglik_norm),
                "prompt_hash": prompt_hash(it.request.prompt), "cache_hit": a.cache_hit,
            })
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.astype({"chosen_option": "Int64", "label_mass": "Float64"})
