"""The one question type every benchmark loader produces, and the random stream of each question (`rng_for`)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from src.common.digests import json_sha256, text_sha256


@dataclass(frozen=True)
class Question:
    """A multiple-choice question as the benchmark file holds it.

    >>> q = Question(id="q1", question="2+2?", options=("3", "4"), answer=1)
    >>> q.options[q.answer]
    '4'
    """

    id: str
    question: str
    options: tuple[str, ...]
    answer: int  # index into `options` of the correct option
    subject: str | None = None
    split: str = "test"
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def n_options(self) -> int:
        return len(self.options)


# metadata that describes the run a question is asked in, not the question: an lm-eval group's name, its skipped
# documents, the hash of all its questions (src/benchmarks/lm_eval.py). Kept out of a question's identity, so that
# a change to one task of a group, or another `limit`, leaves the other questions' cached answers theirs.
RUN_METADATA = frozenset({"lm_eval_group", "lm_eval_skipped", "lm_eval_config_hash"})


def question_identity(question: Question) -> str:
    """sha256 of a question as loaded (after cleaning): id, text, options, answer, subject, split and metadata. Part
    of the response cache's key, so a corrected question (its answer key, a text) never gets an answer cached for
    the old one, while the unchanged questions of a benchmark keep theirs.

    >>> q = Question(id="q1", question="2+2?", options=("3", "4"), answer=1)
    >>> question_identity(q) == question_identity(Question(id="q1", question="2+2?", options=("3", "4"), answer=1))
    True
    >>> question_identity(q) == question_identity(Question(id="q1", question="2+2?", options=("3", "4"), answer=0))
    False
    """
    body = [
        question.id,
        question.question,
        list(question.options),
        question.answer,
        question.subject,
        question.split,
        {k: v for k, v in question.metadata.items() if k not in RUN_METADATA},
    ]
    return json_sha256(body, ascii=False)


def benchmark_identity(questions: Sequence[Question]) -> str:
    """The content identity of the questions a job asks, in order: a sha256 over their `question_identity`s (16 hex
    digits). A run logs it (tag `data_identity`); a finished run with another one is no result of this job."""
    return text_sha256("".join(question_identity(question) for question in questions), length=16)


def duplicate_option_groups(question: Question | Iterable[str], *, casefold: bool = False) -> list[tuple[int, ...]]:
    """Groups (2+ indices, in option order) of options that are the same text after `strip` and
    whitespace runs collapsed; with `casefold=True` also ignoring case.

    Such a question cannot be won under option-identity scoring when both copies are shown.
    Case counts by default: in the shipped data every pair that differs only in case is a
    different option (genotypes "Bb" / "bb" in 8 MMLU and ARC questions, "Sc" / "sC" in formal
    logic, "II" / "ii"). Takes a `Question` or its option texts.

    >>> duplicate_option_groups(["Paris", "Rome", " Paris", "Lyon", "Rome ", "Paris"])
    [(0, 2, 5), (1, 4)]
    >>> duplicate_option_groups(["Bb", "bb"]), duplicate_option_groups(["Bb", "bb"], casefold=True)
    ([], [(0, 1)])
    """
    options = question.options if isinstance(question, Question) else tuple(question)
    keys = [" ".join(text.split()) for text in options]
    if casefold:
        keys = [key.casefold() for key in keys]
    if len(set(keys)) == len(keys):
        return []
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return [tuple(g) for g in groups.values() if len(g) > 1]


def rng_for(seed: int, question_id: str, purpose: str) -> random.Random:
    """Deterministic stream per (seed, question, purpose); str seeds hash with sha512, independent of PYTHONHASHSEED."""
    return random.Random(f"{seed}|{question_id}|{purpose}")
