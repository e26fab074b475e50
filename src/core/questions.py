"""The one question type every benchmark loader produces, and the random stream of each question (`rng_for`)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Iterable


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
