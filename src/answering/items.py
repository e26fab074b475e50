"""The two nouns of answering: an `Item` to ask and the `Answer` of one repetition. Their own module, below both
the trial loop (src/answering/trials.py) and adaptive repetitions (src/answering/adaptive.py), so that the loop,
which hands its rounds to the adaptive one, and the adaptive one, which works on items and answers, do not import
each other."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from src.answer_formats import FORMATS
from src.backends.base import Request
from src.backends.oracle import KnownAnswer
from src.core.questions import Question
from src.core.variant import Variant


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
    answer_dist: tuple[float, ...] | None = None  # exact first-token sampling: labels then INVALID
    cache_hit: bool = False
    slots: tuple[int, ...] | None = None  # multi_select: every displayed slot named; None = INVALID
    parse_rule: str | None = None  # the rule that decided `slot` (src/core/parsing.py), or the scoring's own rule
    truncated: bool | None = None  # generated text cut by max_new_tokens; None when unknown or not generated
    decision_margin: float | None = None  # a ranking's decision: how far the chosen score lies above the next one


def answer_key(items: Iterable[Item]) -> dict[str, KnownAnswer]:
    """The right answers of `items` by trial key (`Request.key`), from their variants: what the answering loop tells an
    oracle backend before asking it (src/backends/oracle.py), and tells no other backend. Two items of one key are one
    trial (question ids are unique in a benchmark, variant ids in a question): different answers are a bug."""
    key: dict[str, KnownAnswer] = {}
    for it in items:
        known = KnownAnswer(it.variant.correct_slot, FORMATS[it.variant.fmt].names_a_set)
        if key.setdefault(it.request.key, known) != known:
            raise ValueError(
                f"trial {it.request.key} is asked with two right answers, {key[it.request.key]} and {known}"
            )
    return key
